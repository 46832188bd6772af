package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/statetest"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const secretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:runner-reaper-github-AbCdEf"

var (
	lambdaOnce sync.Once
	lambdaBin  string
	lambdaDyn  *testenv.Dynalite
	lambdaErr  error
)

// lambdaParts builds the bootstrap and starts dynalite once for the
// package's Lambda tests.
func lambdaParts(t *testing.T) (string, *testenv.Dynalite) {
	t.Helper()
	lambdaOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bootstrap-")
		if err != nil {
			lambdaErr = err
			return
		}
		if lambdaBin, lambdaErr = testenv.BuildLambda(dir, "./functions/lambda"); lambdaErr != nil {
			return
		}
		lambdaDyn, lambdaErr = testenv.StartDynalite()
	})
	require.NoError(t, lambdaErr)
	return lambdaBin, lambdaDyn
}

// secretsManager stands in for AWS Secrets Manager's GetSecretValue and
// counts the calls, so a test can see the secret read once per cold start.
func secretsManager(t *testing.T, value string) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct{ SecretId string }
		_ = json.Unmarshal(body, &in)
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || in.SecretId != secretARN {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"ResourceNotFoundException","message":"not found"}`)
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"ARN": secretARN, "Name": "runner-reaper-github", "SecretString": value})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// lambdaEnv is the function's environment: the world's REAPER_ settings,
// with the token from Secrets Manager, the ledger in DynamoDB, EMF metrics,
// and AWS clients pointed at the local stand-ins.
func lambdaEnv(t *testing.T, w *world, d *testenv.Dynalite, sm *httptest.Server, table string) map[string]string {
	e := map[string]string{}
	for k, v := range w.env {
		e[k] = v
	}
	delete(e, "REAPER_GITHUB_TOKEN")
	for k, v := range map[string]string{
		"REAPER_GITHUB_SECRET_ARN":         secretARN,
		"REAPER_LEDGER":                    "dynamodb:" + table,
		"REAPER_METRICS_NAMESPACE":         "RunnerReaper",
		"AWS_REGION":                       "us-east-1",
		"AWS_ACCESS_KEY_ID":                "AKIDLAMBDATEST",
		"AWS_SECRET_ACCESS_KEY":            "lambda-test-secret",
		"AWS_ENDPOINT_URL_DYNAMODB":        d.URL,
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": sm.URL,
		"AWS_CONFIG_FILE":                  os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE":      os.DevNull,
		"AWS_EC2_METADATA_DISABLED":        "true",
	} {
		e[k] = v
	}
	return e
}

func newTable(t *testing.T, d *testenv.Dynalite) string {
	table := "ledger-" + randomHex(t)[:10]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, d.CreateTable(ctx, statetest.LedgerTable(table)))
	return table
}

// answer is one invocation's answer as the sweep's summary; the invocation
// must have been answered with one, in time.
func answer(t *testing.T, em *testenv.Emulator, inv testenv.Invocation) map[string]any {
	t.Helper()
	require.False(t, inv.TimedOut, "the invocation timed out; log:\n%s", inv.Log)
	require.False(t, inv.Exited, "the function exited: %s\nlog:\n%s\nemulator:\n%s", inv.Body, inv.Log, em.EmulatorLog())
	require.Nil(t, inv.Error, "the invocation failed: %s\nlog:\n%s", inv.Error, inv.Log)
	var summary map[string]any
	require.NoError(t, json.Unmarshal(inv.Response, &summary), "answer: %s", inv.Body)
	t.Logf("invocation took %s: %s", inv.Finished.Sub(inv.Started).Round(time.Millisecond), inv.Response)
	return summary
}

// invokeScheduled invokes em's function as its schedule does, and fails
// the test if the emulator does not answer.
func invokeScheduled(t *testing.T, em *testenv.Emulator) testenv.Invocation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), em.Timeout+30*time.Second)
	defer cancel()
	inv, err := em.InvokeScheduled(ctx)
	require.NoError(t, err)
	return inv
}

// emfLines checks log's EMF lines (well-formed, in namespace, every metric
// with a value) and counts them.
func emfLines(t *testing.T, log string) int {
	t.Helper()
	emf := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"_aws"`) {
			continue
		}
		emf++
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		meta := m["_aws"].(map[string]any)
		assert.NotZero(t, meta["Timestamp"])
		for _, cwm := range meta["CloudWatchMetrics"].([]any) {
			d := cwm.(map[string]any)
			assert.Equal(t, "RunnerReaper", d["Namespace"])
			for _, metric := range d["Metrics"].([]any) {
				name := metric.(map[string]any)["Name"].(string)
				_, isNumber := m[name].(float64)
				assert.True(t, isNumber, "metric %s has a value", name)
			}
		}
	}
	return emf
}

// The compiled bootstrap under AWS's Runtime Interface Emulator: a cold
// start reads the secret once, each invocation is one sweep answered with
// the summary, a second invocation in the same process reuses everything,
// the ledger lives in DynamoDB, metrics are EMF lines, and the deadline
// AWS_LAMBDA_FUNCTION_TIMEOUT sets is honoured.
func TestLambdaBootstrapSweeps(t *testing.T) {
	bin, d := lambdaParts(t)
	w := newWorld(t, nil)
	sm, secretCalls := secretsManager(t, w.token)
	table := newTable(t, d)

	w.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})
	zombie := w.runner("acme-zombie", "offline", false)
	w.pod("acme-zombie", testenv.Running())

	em := testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 50 * time.Second, Env: lambdaEnv(t, w, d, sm, table)})

	first := invokeScheduled(t, em)
	s1 := answer(t, em, first)
	t.Logf("cold start and first sweep: %s", first.Finished.Sub(first.Started).Round(time.Millisecond))
	assert.EqualValues(t, 0, s1["status"])
	assert.Equal(t, map[string]any{"deleted": 1.0, "pending-confirmation": 1.0}, s1["results"])
	assert.False(t, w.podExists("acme-dead"), "the terminal pod went on the first invocation")
	assert.True(t, w.podExists("acme-zombie"))

	time.Sleep(pastConfirm)
	s2 := answer(t, em, invokeScheduled(t, em))
	assert.Equal(t, map[string]any{"deleted": 1.0}, s2["results"], "the mark left in DynamoDB matured")
	assert.False(t, w.podExists("acme-zombie"))
	assert.False(t, w.runnerExists(zombie.ID))

	// A warm start reuses what the cold start built: the same process,
	// the secret read once.
	assert.EqualValues(t, 1, secretCalls.Load(), "the secret is read once per cold start")
	assert.Equal(t, 1, strings.Count(em.EmulatorLog(), "INIT START"), "one cold start for two invocations")

	// The ledger is the DynamoDB item, at version 2 or more.
	item, err := d.Client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "runner-reaper"}},
		ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	require.NotNil(t, item.Item, "the ledger lives in DynamoDB")

	// The deadline: a function whose timeout is shorter than the spare
	// starts no action, and the sweep says what it did not reach. The
	// timeout is the function's configuration: another environment.
	w.pod("acme-dead-2", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(1, 0, "Error")})
	short := testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 4 * time.Second, Env: lambdaEnv(t, w, d, sm, table)})
	late := invokeScheduled(t, short)
	s3 := answer(t, short, late)
	assert.Equal(t, map[string]any{"not-reached": 1.0}, s3["results"])
	assert.EqualValues(t, 3, s3["status"], "an action not reached is a degraded sweep, as in the CLI")
	assert.True(t, w.podExists("acme-dead-2"), "nothing started past the spare time")
	assert.Less(t, late.Finished.Sub(late.Started), short.Timeout, "answered before the deadline")
	assert.EqualValues(t, 2, secretCalls.Load(), "a new environment is a cold start")

	// EMF: well-formed metric lines beside the JSON log lines; no secret.
	assert.GreaterOrEqual(t, emfLines(t, em.Log()), 2, "one EMF line per sweep at least")
	assert.GreaterOrEqual(t, emfLines(t, short.Log()), 1, "one EMF line per sweep at least")
	for _, e := range []*testenv.Emulator{em, short} {
		assert.NotContains(t, e.Log()+e.EmulatorLog(), w.token, "the token from Secrets Manager is never logged")
	}
}

// A sweep that cannot observe answers with an error, so Lambda counts the
// invocation as failed, and the process stays warm; bad configuration
// stops the cold start with exit status 2 and a message naming the
// variable.
func TestLambdaBootstrapFailures(t *testing.T) {
	bin, d := lambdaParts(t)
	w := newWorld(t, nil)
	sm, _ := secretsManager(t, w.token)

	t.Run("missing ledger table: the invocation fails", func(t *testing.T) {
		em := testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 30 * time.Second, Env: lambdaEnv(t, w, d, sm, "no-such-table")})
		inv := invokeScheduled(t, em)
		require.NotNil(t, inv.Error, "answer: %s", inv.Body)
		assert.False(t, inv.Exited, "a failed sweep is the invocation's error, not the process's end")
		assert.Contains(t, string(inv.Error), "could not observe or act")
		assert.Contains(t, string(inv.Error), "no-such-table")
	})

	t.Run("bad configuration: the cold start stops with exit 2", func(t *testing.T) {
		e := lambdaEnv(t, w, d, sm, "t")
		e["REAPER_CONFIRM_AFTER"] = "soon"
		em := testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 30 * time.Second, Env: e})
		inv := invokeScheduled(t, em)
		assert.True(t, inv.Exited, "answer: %s", inv.Body)
		assert.Nil(t, inv.Response)
		assert.Contains(t, em.EmulatorLog(), "Runtime exited with error: exit status 2")
		assert.Contains(t, inv.Log, "REAPER_CONFIRM_AFTER")
		assert.Contains(t, inv.Log, "example")
	})
}

// The Lambda says what it says in three places: its log lines, its answer
// (the summary) and the error it returns when a sweep fails. An echoing
// GitHub puts the token, read from Secrets Manager, into error texts; none
// of the three may hold it.
func TestLambdaRedactsEchoedToken(t *testing.T) {
	bin, d := lambdaParts(t)
	w := newWorld(t, nil)
	sm, _ := secretsManager(t, w.token)
	table := newTable(t, d)
	w.runner("acme-zombie", "offline", false)
	w.pod("acme-zombie", testenv.Running())

	em := testenv.StartEmulator(t, bin, testenv.EmulatorOptions{Timeout: 30 * time.Second, Env: lambdaEnv(t, w, d, sm, table)})
	invoke := func() testenv.Invocation {
		t.Helper()
		inv := invokeScheduled(t, em)
		require.False(t, inv.Exited || inv.TimedOut, "answer: %s\nemulator:\n%s", inv.Body, em.EmulatorLog())
		assert.NotContains(t, string(inv.Body), w.token, "the token is in the invocation's answer")
		return inv
	}

	// The list is echoed: the scope is skipped, and said so in the log.
	w.sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Echo: true, Times: 1})
	summary := answer(t, em, invoke())
	assert.EqualValues(t, 3, summary["status"], "a degraded sweep is not a failed invocation")
	assert.Equal(t, []any{scope}, summary["scopes_skipped"])

	// The mark is left; the registration delete is echoed: the action
	// fails, and so does the invocation, with the echo in its error.
	invoke()
	w.sim.Fault(scope, ghsim.EndpointDelete, ghsim.Fault{Echo: true, Status: http.StatusBadRequest})
	time.Sleep(pastConfirm)
	third := invoke()
	require.NotNil(t, third.Error, "answer: %s", third.Body)
	assert.Contains(t, string(third.Error), "could not observe or act")
	assert.Contains(t, string(third.Error), "Authorization: Bearer [REDACTED]", "the echo reached the error, redacted")

	out := em.Log() + em.EmulatorLog()
	assert.Contains(t, out, "Authorization: Bearer [REDACTED]", "the echo reached the log, redacted")
	assert.NotContains(t, out, w.token, "the token is in the function's log")
}
