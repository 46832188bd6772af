package e2e_test

// `runner-reaper history`, the compiled binary, against the ledger a real
// sweep wrote in a ConfigMap on the API server: a zombie ARC runner that
// held a job GitHub says failed is reaped, and a week later an operator
// with nothing but the right to read the ledger asks which job it was
// holding and why it was killed.

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

func TestHistoryNamesTheJobOfAReapedZombie(t *testing.T) {
	w := newWorld(t, arcEnv(nil))
	name := erName("h1st0")
	reg := w.sim.AddRunner(scope, ghsim.Runner{Name: name, Status: "online", Ephemeral: true})
	job := w.sim.StartJob("acme/api", 4242, "integration (linux)", name)
	require.NotZero(t, job.ID)
	_, ok := w.sim.FinishJob(job.ID, "failure")
	require.True(t, ok)
	require.True(t, w.sim.SetRunner(scope, reg.ID, func(r *ghsim.Runner) { r.Status = "offline" }))
	w.arcRunner(name, &testenv.EphemeralRunnerStatus{Phase: "Running", RunnerID: reg.ID,
		Job: &testenv.ARCJob{RequestID: 94242, Repository: "acme/api", RunID: 4242, Name: "integration (linux)"}}, ptr(testenv.Running()))
	dead := "acme-dead-h1st"
	w.pod(dead, testenv.PodState{Phase: "Failed", Terminated: testenv.Terminated(137, 0, "OOMKilled")})

	// A dry run before anything acts records nothing.
	dry := w.sweep("--dry-run")
	dry.requireCode(t, 0)

	w.sweep().requireCode(t, 0) // reaps the terminal pod, marks the zombie
	time.Sleep(pastConfirm)
	second := w.sweep()
	second.requireCode(t, 0)
	require.Equal(t, "deleted", second.actions(t)[name]["result"], "%s", second.Stdout)
	assert.False(t, w.runnerExists(reg.ID))

	// The operator: nothing but the ledger's name and a kubeconfig whose
	// user may get that one ConfigMap.
	user := "history-reader-" + w.ns
	env.Grant(t, w.ns, "ledger-reader", user, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"},
		Verbs: []string{"get"}, ResourceNames: []string{ledgerName}})
	kc, err := env.UserKubeconfig(t.TempDir(), user)
	require.NoError(t, err)
	w.sim.ResetRequests()
	reader := &world{t: t, ns: w.ns, sim: w.sim, token: w.token, env: map[string]string{
		"KUBECONFIG":    kc,
		"REAPER_LEDGER": w.env["REAPER_LEDGER"],
	}}

	table := reader.exec("history")
	table.requireCode(t, 0)
	lines := strings.Split(strings.TrimSuffix(table.Stdout, "\n"), "\n")
	require.Len(t, lines, 3, "a header and the two actions, newest first:\n%s", table.Stdout)
	assert.Regexp(t, `^TIME\s+VERDICT\s+OBJECT\s+RUNNER\s+JOB\s+WRITES\s+FINGERPRINT`, lines[0])
	zombie := lines[1]
	for _, want := range []string{"zombie", "EphemeralRunner " + w.ns + "/" + name, name,
		"acme/api run 4242", "integration (linux) (completed, failure)", "registration=deleted", "object=deleted"} {
		assert.Contains(t, zombie, want)
	}
	for _, want := range []string{"terminal", "Pod " + w.ns + "/" + dead, "[oom-host] exit 137 OOMKilled"} {
		assert.Contains(t, lines[2], want)
	}
	assert.Empty(t, table.Stderr)
	assert.Empty(t, reader.sim.Requests(), "history asks GitHub nothing")

	js := reader.exec("history", "--output", "json", "--runner", name)
	js.requireCode(t, 0)
	jl := strings.Split(strings.TrimSuffix(js.Stdout, "\n"), "\n")
	require.Len(t, jl, 1, "one line, the zombie's: %s", js.Stdout)
	var r state.Record
	require.NoError(t, json.Unmarshal([]byte(jl[0]), &r))
	assert.Equal(t, "zombie", r.Verdict)
	assert.Equal(t, name, r.RunnerName)
	assert.Equal(t, reg.ID, r.RunnerID)
	assert.Equal(t, "EphemeralRunner", r.ObjectKind)
	assert.Equal(t, w.ns, r.Namespace)
	assert.Equal(t, "deleted", r.RegistrationResult)
	assert.Equal(t, testenv.BinaryVersion, r.Version)
	require.NotNil(t, r.Job)
	assert.Equal(t, "acme/api", r.Job.Repository)
	assert.Equal(t, int64(4242), r.Job.RunID)
	assert.Equal(t, "integration (linux)", r.Job.Name)
	assert.Equal(t, "completed", r.Job.Status)
	assert.Equal(t, "failure", r.Job.Conclusion)
	assert.False(t, r.At.IsZero())
	assert.WithinDuration(t, time.Now(), r.At, time.Minute, "the API server's clock, which is this machine's here")

	none := reader.exec("history", "--runner", "acme-never-reaped")
	none.requireCode(t, 0)
	assert.Equal(t, "no action on runner acme-never-reaped is recorded in "+w.env["REAPER_LEDGER"]+"\n", none.Stdout)

	// The reader may not write: the ledger is as the sweep left it.
	cm, err := env.Client.CoreV1().ConfigMaps(w.ns).Get(context.Background(), ledgerName, metav1.GetOptions{})
	require.NoError(t, err)
	raw := cm.Data["history.json"]
	var stored []state.Record
	require.NoError(t, json.Unmarshal([]byte(raw), &stored))
	require.Len(t, stored, 2, "the dry run recorded nothing")
	t.Logf("history.json holds %d records of real actions in %d bytes (%d a record)", len(stored), len(raw), len(raw)/len(stored))

	// Without the right to read the ledger: exit 1, saying what it was doing.
	denied := &world{t: t, ns: w.ns, sim: w.sim, token: w.token, env: map[string]string{
		"KUBECONFIG": kc, "REAPER_LEDGER": "configmap:" + w.ns + "/another-ledger"}}
	refused := denied.exec("history")
	refused.requireCode(t, 1)
	assert.Contains(t, refused.Stderr, "read the record of actions in configmap:"+w.ns+"/another-ledger")
	assert.Contains(t, refused.Stderr, "forbidden")
}

// A DynamoDB endpoint that takes the connection and never answers: the
// SDK's retries have no deadline of their own, so without one `history`
// would wait for ever. It ends within REAPER_SWEEP_TIMEOUT, saying what it
// was reading.
func TestHistoryGivesUpOnALedgerThatNeverAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c // read nothing, answer nothing
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for len(held) > 0 {
			_ = (<-held).Close()
		}
	})
	reader := &world{t: t, sim: ghsim.New(ghsim.Options{}), env: map[string]string{
		"REAPER_LEDGER":        "dynamodb:reaper-ledger",
		"REAPER_SWEEP_TIMEOUT": "3s",
	}}
	awsStandIns(reader.env, map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://" + ln.Addr().String()})
	r := reader.exec("history")
	r.requireCode(t, 1)
	assert.Contains(t, r.Stderr, "read the record of actions in dynamodb:reaper-ledger")
	assert.Contains(t, r.Stderr, "deadline exceeded")
	assert.NotEmpty(t, held, "the binary reached the endpoint that never answers")
}
