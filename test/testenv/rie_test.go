package testenv_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// buildFunction compiles one of the tiny functions under testdata/ (echo,
// on aws-lambda-go as the real bootstrap is, or initfail) for this test,
// once the emulator that runs it is known to be built.
func buildFunction(t *testing.T, name string) string {
	t.Helper()
	testenv.NeedEmulator(t)
	bin, err := testenv.BuildLambda(t.TempDir(), "./test/testenv/testdata/"+name)
	require.NoError(t, err)
	return bin
}

// echoed is echo's answer.
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

func invokeEcho(t *testing.T, e *testenv.Emulator, payload string) testenv.Invocation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), e.Timeout+30*time.Second)
	defer cancel()
	inv, err := e.Invoke(ctx, []byte(payload))
	require.NoError(t, err)
	return inv
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body: %s", b)
	return v
}

// One process answers a response, an error and a response again under the
// emulator: a warm start keeps the process and its state; every invocation
// carries its own request id and deadline to the handler's context; each invocation's log holds what the function wrote then, on
// stdout and stderr, and nothing of the emulator's own lines.
func TestEmulatorWarmStartResponseAndError(t *testing.T) {
	e := testenv.StartEmulator(t, buildFunction(t, "echo"), testenv.EmulatorOptions{Timeout: 5 * time.Second})

	inv1 := invokeEcho(t, e, `{"hello":"world","say":"first to stdout","complain":"first to stderr"}`)
	require.NotNil(t, inv1.Response, "body: %s", inv1.Body)
	assert.Nil(t, inv1.Error)
	assert.False(t, inv1.Exited || inv1.TimedOut)
	first := decode[echoed](t, inv1.Response)
	assert.JSONEq(t, `{"hello":"world","say":"first to stdout","complain":"first to stderr"}`, string(first.Payload))
	assert.Equal(t, inv1.RequestID, first.RequestID, "the invoke's request id reaches lambdacontext")
	assert.Equal(t, testenv.FunctionARN, first.FunctionARN, "the function's ARN reaches lambdacontext")
	assert.Greater(t, first.RemainingMS, int64(3000))
	assert.LessOrEqual(t, first.RemainingMS, int64(5000))
	assert.Equal(t, 1, first.Invocation)
	assert.Equal(t, "first to stdout\nfirst to stderr\n", inv1.Log, "the invocation's own log, stdout and stderr")

	inv2 := invokeEcho(t, e, `{"fail":"scope org:acme skipped","say":"second"}`)
	assert.Nil(t, inv2.Response)
	assert.False(t, inv2.Exited, "a function error is an answer: the process stays")
	assert.Equal(t, "sweepError", inv2.ErrorType)
	er := decode[lambdaError](t, inv2.Error)
	assert.Equal(t, "scope org:acme skipped", er.ErrorMessage)
	assert.Equal(t, "sweepError", er.ErrorType)
	assert.NotEqual(t, inv1.RequestID, inv2.RequestID)
	assert.True(t, strings.HasPrefix(inv2.Log, "second\n"), "log: %q", inv2.Log)
	assert.NotContains(t, inv2.Log, "first")

	inv3 := invokeEcho(t, e, `{"again":true}`)
	require.NotNil(t, inv3.Response, "body: %s", inv3.Body)
	third := decode[echoed](t, inv3.Response)
	assert.Equal(t, 3, third.Invocation, "the same process, its state kept: a warm start")
	assert.Equal(t, first.PID, third.PID)
	assert.Equal(t, first.InitAt, third.InitAt, "initialisation ran once")
	assert.Greater(t, third.DeadlineMS, first.DeadlineMS, "each invocation has its own deadline")
	assert.Empty(t, inv3.Log)

	all := e.Log()
	for _, want := range []string{"first to stdout\n", "first to stderr\n", "second\n"} {
		assert.Contains(t, all, want)
	}
	for _, emulatorLine := range []string{"START RequestId:", "END RequestId:", "REPORT RequestId:"} {
		assert.NotContains(t, all, emulatorLine)
	}
	assert.Equal(t, 1, strings.Count(e.EmulatorLog(), "INIT START"), "one cold start for three invocations")
}

// The deadline the handler's context carries is the invocation's start
// plus AWS_LAMBDA_FUNCTION_TIMEOUT: a handler that works until shortly
// before it answers in time; one that overruns is killed when it passes,
// and the next invocation is a cold start in a new process.
func TestEmulatorDeadlineFromFunctionTimeout(t *testing.T) {
	bin := buildFunction(t, "echo")
	for _, timeout := range []time.Duration{time.Second, 2 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) {
			e := testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: timeout})

			inv := invokeEcho(t, e, `{"stop_before_deadline_ms":300}`)
			require.NotNil(t, inv.Response, "body: %s", inv.Body)
			r := decode[echoed](t, inv.Response)
			assert.True(t, r.StoppedEarly)
			took := inv.Finished.Sub(inv.Started)
			assert.Less(t, took, timeout, "answered before the deadline")
			assert.Greater(t, took, timeout-300*time.Millisecond-200*time.Millisecond,
				"it worked until shortly before the deadline the timeout set")
			assert.LessOrEqual(t, inv.Started.Add(timeout).UnixMilli(), r.DeadlineMS+1)
			assert.LessOrEqual(t, r.DeadlineMS, inv.Finished.Add(timeout).UnixMilli())

			late := invokeEcho(t, e, `{"sleep_ms":`+strconv.FormatInt(timeout.Milliseconds()+1500, 10)+`}`)
			assert.True(t, late.TimedOut, "body: %s", late.Body)
			assert.Nil(t, late.Response)
			assert.Nil(t, late.Error)
			assert.Less(t, late.Finished.Sub(late.Started), timeout+time.Second, "ended at the deadline, not when the handler would have")

			again := invokeEcho(t, e, `{}`)
			require.NotNil(t, again.Response, "body: %s", again.Body)
			next := decode[echoed](t, again.Response)
			assert.Equal(t, 1, next.Invocation, "the timed-out process was killed: a cold start")
			assert.NotEqual(t, r.PID, next.PID)
		})
	}
}

// A panic is reported as the invocation's error and ends the process, as
// aws-lambda-go does; the emulator starts a new one for the next
// invocation.
func TestEmulatorPanicEndsProcess(t *testing.T) {
	e := testenv.StartEmulator(t, buildFunction(t, "echo"), testenv.EmulatorOptions{Timeout: 5 * time.Second})

	before := decode[echoed](t, invokeEcho(t, e, `{}`).Response)
	inv := invokeEcho(t, e, `{"panic":true}`)
	assert.True(t, inv.Exited)
	assert.Nil(t, inv.Response)
	assert.Equal(t, "string", inv.ErrorType)
	assert.Contains(t, decode[lambdaError](t, inv.Error).ErrorMessage, "asked to panic")
	assert.Contains(t, inv.Log, "asked to panic", "aws-lambda-go logs the panic")

	after := decode[echoed](t, invokeEcho(t, e, `{}`).Response)
	assert.Equal(t, 1, after.Invocation)
	assert.NotEqual(t, before.PID, after.PID)
	assert.Equal(t, 2, strings.Count(e.EmulatorLog(), "INIT START"), "a second cold start")
}

// A function that posts /runtime/init/error and exits fails the invocation
// with the error type it reported; the emulator's log has its exit status.
func TestEmulatorInitError(t *testing.T) {
	e := testenv.StartEmulator(t, buildFunction(t, "initfail"), testenv.EmulatorOptions{Timeout: 5 * time.Second})
	inv := invokeEcho(t, e, `{}`)
	assert.True(t, inv.Exited)
	assert.Nil(t, inv.Response)
	assert.Equal(t, "Runtime.ConfigError", inv.ErrorType)
	assert.Contains(t, string(inv.Error), "REAPER_SCOPES")
	assert.Contains(t, e.EmulatorLog(), "exit status 2")
}

// Emulators choose their own ports, so tests may run them side by side.
func TestEmulatorsSideBySide(t *testing.T) {
	bin := buildFunction(t, "echo")
	emulators := []*testenv.Emulator{
		testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 5 * time.Second}),
		testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 5 * time.Second}),
	}
	answers := make([]echoed, len(emulators))
	var wg sync.WaitGroup
	for i, e := range emulators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			inv, err := e.Invoke(ctx, []byte(`{"stop_before_deadline_ms":4500}`))
			if assert.NoError(t, err) && assert.NotNil(t, inv.Response, "body: %s", inv.Body) {
				assert.NoError(t, json.Unmarshal(inv.Response, &answers[i]))
			}
		}()
	}
	wg.Wait()
	assert.NotEqual(t, answers[0].PID, answers[1].PID, "two functions, one per emulator")
	assert.True(t, answers[0].StoppedEarly && answers[1].StoppedEarly)
}
