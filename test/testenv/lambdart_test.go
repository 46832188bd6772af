package testenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// build compiles one of the tiny functions under testdata/ (echo, with
// aws-lambda-go as the real handler is, or initfail) for this test. No
// TestMain, so that the package's other tests may have theirs.
func build(t *testing.T, name string) string {
	t.Helper()
	bin, err := testenv.BuildLambda(t.TempDir(), "./test/testenv/testdata/"+name)
	require.NoError(t, err)
	return bin
}

type echoed struct {
	Payload      json.RawMessage `json:"payload"`
	RequestID    string          `json:"request_id"`
	FunctionARN  string          `json:"function_arn"`
	TraceID      string          `json:"trace_id"`
	DeadlineMS   int64           `json:"deadline_ms"`
	RemainingMS  int64           `json:"remaining_ms"`
	StoppedEarly bool            `json:"stopped_early"`
	PID          int             `json:"pid"`
	Invocation   int             `json:"invocation"`
	InitAt       string          `json:"init_at"`
}

type lambdaError struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

// start runs bin under a fresh runtime; both are stopped at the end.
func start(t *testing.T, bin string) (*testenv.Runtime, *testenv.Process) {
	t.Helper()
	rt, err := testenv.StartRuntime()
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	p, err := rt.StartProcess(bin, nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("function stdout:\n%s\nstderr:\n%s", p.Stdout(), p.Stderr())
		}
	})
	return rt, p
}

func invoke(t *testing.T, rt *testenv.Runtime, payload string, timeout time.Duration) (testenv.Invocation, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return rt.Invoke(ctx, []byte(payload), timeout)
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	return v
}

// One process answers a response, an error and a response again: a warm
// start keeps the process and its state, and every invocation carries its
// own request id and deadline to the handler's context.
func TestRuntimeWarmStartResponseAndError(t *testing.T) {
	rt, p := start(t, build(t, "echo"))

	inv1, err := invoke(t, rt, `{"hello":"world"}`, 5*time.Second)
	require.NoError(t, err)
	assert.Nil(t, inv1.Error)
	assert.Empty(t, inv1.ErrorType)
	first := decode[echoed](t, inv1.Response)
	assert.JSONEq(t, `{"hello":"world"}`, string(first.Payload))
	assert.Equal(t, inv1.RequestID, first.RequestID, "Lambda-Runtime-Aws-Request-Id reaches lambdacontext")
	assert.Equal(t, testenv.FunctionARN, first.FunctionARN, "Lambda-Runtime-Invoked-Function-Arn reaches lambdacontext")
	assert.True(t, strings.HasPrefix(first.TraceID, "Root=1-"), "Lambda-Runtime-Trace-Id reaches the context: %q", first.TraceID)
	assert.Equal(t, inv1.Deadline.UnixMilli(), first.DeadlineMS, "Lambda-Runtime-Deadline-Ms is ctx.Deadline()")
	assert.Greater(t, first.RemainingMS, int64(3000))
	assert.LessOrEqual(t, first.RemainingMS, int64(5000))
	assert.Equal(t, 1, first.Invocation)
	assert.Equal(t, p.Pid(), first.PID)
	assert.WithinDuration(t, inv1.Started.Add(5*time.Second), inv1.Deadline, 2*time.Millisecond,
		"the deadline is counted from when the function received the invocation")
	assert.False(t, inv1.Finished.Before(inv1.Started))

	inv2, err := invoke(t, rt, `{"fail":"scope org:acme skipped"}`, 5*time.Second)
	require.NoError(t, err, "a function error is an answer, not a failure of Invoke")
	assert.Nil(t, inv2.Response)
	assert.Equal(t, "sweepError", inv2.ErrorType)
	e := decode[lambdaError](t, inv2.Error)
	assert.Equal(t, "scope org:acme skipped", e.ErrorMessage)
	assert.Equal(t, "sweepError", e.ErrorType)
	assert.NotEqual(t, inv1.RequestID, inv2.RequestID)

	inv3, err := invoke(t, rt, `{"again":true}`, 3*time.Second)
	require.NoError(t, err)
	third := decode[echoed](t, inv3.Response)
	assert.Equal(t, 3, third.Invocation, "the same process, its state kept: a warm start")
	assert.Equal(t, first.PID, third.PID)
	assert.Equal(t, first.InitAt, third.InitAt, "initialisation ran once")
	assert.Equal(t, inv3.Deadline.UnixMilli(), third.DeadlineMS)
	assert.LessOrEqual(t, third.RemainingMS, int64(3000), "each invocation has its own deadline")

	select {
	case <-p.Exited():
		t.Fatalf("the function exited after an error: %v", p.ExitErr())
	default:
	}
	require.Eventually(t, func() bool { return rt.NextCalls() == 4 }, 5*time.Second, 10*time.Millisecond,
		"after three answers the function is waiting for a fourth invocation")
}

// A handler that stops before its context's deadline answers in time; one
// that overruns is a timed-out invocation, its late answer kept.
func TestRuntimeDeadline(t *testing.T) {
	rt, _ := start(t, build(t, "echo"))

	inv, err := invoke(t, rt, `{"stop_before_deadline_ms":300}`, 1500*time.Millisecond)
	require.NoError(t, err)
	r := decode[echoed](t, inv.Response)
	assert.True(t, r.StoppedEarly)
	assert.True(t, inv.Finished.Before(inv.Deadline), "answered before the deadline")
	assert.True(t, inv.Finished.After(inv.Deadline.Add(-time.Second)),
		"it worked until shortly before the deadline: the deadline header is what it honoured")

	late, err := invoke(t, rt, `{"sleep_ms":1500}`, 500*time.Millisecond)
	require.ErrorIs(t, err, testenv.ErrTimedOut)
	assert.True(t, late.Finished.After(late.Deadline))
	assert.NotNil(t, late.Response, "a late answer within the grace is still reported")

	// The function goes on (warm) after a late answer.
	again, err := invoke(t, rt, `{}`, 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, decode[echoed](t, again.Response).Invocation)
}

// A panic is reported on the error path and ends the process, as
// aws-lambda-go does; an invocation waiting on the dead process fails.
func TestRuntimePanicEndsProcess(t *testing.T) {
	rt, p := start(t, build(t, "echo"))

	inv, err := invoke(t, rt, `{"panic":true}`, 5*time.Second)
	require.NoError(t, err)
	assert.Nil(t, inv.Response)
	e := decode[lambdaError](t, inv.Error)
	assert.Contains(t, e.ErrorMessage, "asked to panic")
	assert.Equal(t, "string", inv.ErrorType)

	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not exit after a panic")
	}
	_, err = invoke(t, rt, `{}`, time.Second)
	require.ErrorIs(t, err, testenv.ErrProcessExited)
}

// POST /runtime/init/error fails the waiting invocation with the reported
// error type.
func TestRuntimeInitError(t *testing.T) {
	rt, p := start(t, build(t, "initfail"))
	_, err := invoke(t, rt, `{}`, 5*time.Second)
	require.ErrorIs(t, err, testenv.ErrInitFailed)
	ie := rt.InitError()
	require.NotNil(t, ie)
	assert.Equal(t, "Runtime.ConfigError", ie.ErrorType)
	assert.Contains(t, string(ie.Body), "REAPER_SCOPES")
	<-p.Exited()
	assert.Error(t, p.ExitErr())
}

// The protocol by hand: /next blocks until an invocation is queued and
// carries every header; an answer is accepted once, for a known id; the
// error type header wins over the body.
func TestRuntimeProtocol(t *testing.T) {
	rt, err := testenv.StartRuntime()
	require.NoError(t, err)
	defer rt.Close()
	base := "http://" + rt.Addr() + "/2018-06-01/runtime/"

	type result struct {
		inv testenv.Invocation
		err error
	}
	invokeAsync := func(payload string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			inv, err := rt.Invoke(context.Background(), []byte(payload), 10*time.Second)
			ch <- result{inv, err}
		}()
		return ch
	}
	post := func(path, errType, body string) int {
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if errType != "" {
			req.Header.Set("Lambda-Runtime-Function-Error-Type", errType)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	next := func() (*http.Response, []byte) {
		resp, err := http.Get(base + "invocation/next")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}

	// /next blocks while nothing is queued.
	gotNext := make(chan struct{})
	var resp *http.Response
	var body []byte
	go func() { resp, body = next(); close(gotNext) }()
	select {
	case <-gotNext:
		t.Fatal("/next returned with nothing queued")
	case <-time.After(200 * time.Millisecond):
	}
	before := time.Now()
	done := invokeAsync(`{"n":1}`)
	<-gotNext
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `{"n":1}`, string(body))
	id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	require.NotEmpty(t, id)
	ms, err := strconv.ParseInt(resp.Header.Get("Lambda-Runtime-Deadline-Ms"), 10, 64)
	require.NoError(t, err)
	assert.WithinDuration(t, before.Add(10*time.Second), time.UnixMilli(ms), time.Second)
	assert.Equal(t, testenv.FunctionARN, resp.Header.Get("Lambda-Runtime-Invoked-Function-Arn"))
	assert.NotEmpty(t, resp.Header.Get("Lambda-Runtime-Trace-Id"))

	assert.Equal(t, http.StatusBadRequest, post("invocation/not-a-request/response", "", `{}`))
	assert.Equal(t, http.StatusAccepted, post("invocation/"+id+"/response", "", `{"ok":true}`))
	assert.Equal(t, http.StatusBadRequest, post("invocation/"+id+"/response", "", `{"twice":true}`))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, id, r.inv.RequestID)
	assert.Equal(t, `{"ok":true}`, string(r.inv.Response))
	assert.True(t, time.UnixMilli(ms).Equal(r.inv.Deadline), "Invocation.Deadline is the header's")

	done = invokeAsync(`{"n":2}`)
	resp, _ = next()
	id = resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	assert.Equal(t, http.StatusAccepted, post("invocation/"+id+"/error", "Custom.Failure",
		`{"errorMessage":"boom","errorType":"FromBody"}`))
	r = <-done
	require.NoError(t, r.err)
	assert.Equal(t, "Custom.Failure", r.inv.ErrorType)
	assert.JSONEq(t, `{"errorMessage":"boom","errorType":"FromBody"}`, string(r.inv.Error))

	assert.Equal(t, http.StatusNotFound, post("invocation/"+id+"/other", "", `{}`))

	// An Invoke whose context ends before the function asks is not handed
	// out later.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = rt.Invoke(ctx, []byte(`{"abandoned":true}`), time.Second)
	require.True(t, errors.Is(err, context.Canceled))
	done = invokeAsync(`{"n":3}`)
	_, body = next()
	assert.Equal(t, `{"n":3}`, string(body))

	// Close fails a waiting Invoke, and any later one.
	rt.Close()
	r = <-done
	require.ErrorIs(t, r.err, testenv.ErrClosed)
	_, err = rt.Invoke(context.Background(), []byte(`{}`), time.Second)
	require.ErrorIs(t, err, testenv.ErrClosed)
}
