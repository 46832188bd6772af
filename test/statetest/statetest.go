// Package statetest holds what the ledger's tests share: fixtures, and the
// real servers the cluster and DynamoDB backends are tested against, each
// started only when a test first needs it. The memory, file and fit tests
// never start either, so they run without the control-plane assets, node or
// dynalite.
package statetest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Epoch is a fixed UTC time, so that marks round-trip through JSON equal.
var Epoch = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// Mark returns a pod mark first seen i minutes after Epoch, and its key.
func Mark(i int) (string, fleet.Mark) {
	uid := fmt.Sprintf("0000-uid-%04d", i)
	return fleet.PodMarkKey(uid), fleet.Mark{
		Verdict:    fleet.Zombie,
		FirstSeen:  Epoch.Add(time.Duration(i) * time.Minute),
		LastSeen:   Epoch.Add(time.Duration(i+1) * time.Minute),
		Scope:      "org:acme",
		Namespace:  "runners",
		Pod:        fmt.Sprintf("runner-%04d", i),
		RunnerID:   int64(1000 + i),
		RunnerName: fmt.Sprintf("runner-%04d", i),
	}
}

// Marks returns n marks, first seen one minute apart from Epoch.
func Marks(n int) map[string]fleet.Mark {
	m := make(map[string]fleet.Mark, n)
	for i := 0; i < n; i++ {
		k, v := Mark(i)
		m[k] = v
	}
	return m
}

// Lists returns a list cache of scopes scopes with runners runners each.
func Lists(scopes, runners int) map[string]state.ListCache {
	l := make(map[string]state.ListCache, scopes)
	for s := 0; s < scopes; s++ {
		page := state.CachedPage{ETag: fmt.Sprintf(`W/"etag-%d"`, s), TotalCount: runners}
		for r := 0; r < runners; r++ {
			page.Runners = append(page.Runners, fleet.Registration{
				ID: int64(s*100000 + r), Name: fmt.Sprintf("runner-%d-%d", s, r),
				Online: r%2 == 0, Busy: r%3 == 0, Labels: []string{"self-hosted", "linux"},
			})
		}
		l[fmt.Sprintf("org:scope-%d", s)] = state.ListCache{Pages: []state.CachedPage{page}}
	}
	return l
}

// FleetLists is the list cache of a large fleet as the GitHub client
// keeps it: scopes scopes of perScope runners, one page each, with names
// as ARC gives them (a scale set's, a random suffix) and 64-hex ETags as
// GitHub's, which compress about as the real ones do.
func FleetLists(scopes, perScope int) map[string]state.ListCache {
	lists := make(map[string]state.ListCache, scopes)
	for s := range scopes {
		runners := make([]fleet.Registration, 0, perScope)
		for r := range perScope {
			id := int64(s*perScope + r + 1)
			runners = append(runners, fleet.Registration{ID: 400000000 + id, Name: fmt.Sprintf("arc-runners-%05x-runner-%08x", s*7919%65536, uint32(id*2654435761)), Online: true})
		}
		lists[fmt.Sprintf("org:acme-%03d", s)] = state.ListCache{Pages: []state.CachedPage{{ETag: fmt.Sprintf(`W/"%064x"`, s*104729), TotalCount: perScope, Runners: runners}}}
	}
	return lists
}

// Record returns the record of the i-th action, i minutes after Epoch: a
// zombie's EphemeralRunner deleted with its registration, holding a job,
// every field set; an odd i is a terminal pod instead, with its exit.
func Record(i int) state.Record {
	r := state.Record{
		At: Epoch.Add(time.Duration(i) * time.Minute), Verdict: string(fleet.Zombie),
		Evidence: fmt.Sprintf("pod running; registration %d \"arc-runner-%04d\" is offline", 5000+i, i),
		Scope:    "org:acme", Action: "delete-registration-then-ephemeralrunner", Result: "deleted",
		ObjectKind: fleet.EphemeralRunnerKind, Namespace: "arc-runners", ObjectName: fmt.Sprintf("arc-runner-%04d", i),
		Pod: fmt.Sprintf("arc-runner-%04d", i), RunnerName: fmt.Sprintf("arc-runner-%04d", i), RunnerID: int64(5000 + i),
		RegistrationResult: "deleted", ObjectResult: "deleted", FinalizerResult: "deleted",
		Job: &state.RecordJob{Repository: "acme/api", RunID: int64(90000 + i),
			RunURL: fmt.Sprintf("https://github.com/acme/api/actions/runs/%d", 90000+i),
			JobID:  int64(700000 + i), Name: "build (linux)", RequestID: int64(8000 + i),
			Status: "completed", Conclusion: "failure", URL: fmt.Sprintf("https://github.com/acme/api/actions/runs/%d/job/%d", 90000+i, 700000+i)},
		Version: "v1.2.3",
	}
	if i%2 == 1 {
		r.Verdict, r.Action, r.ObjectKind, r.FinalizerResult = string(fleet.Terminal), "delete-registration-then-pod", "Pod", ""
		r.ServiceAccountResult = "already-gone"
		r.Exit = &state.RecordExit{Code: 137, Reason: "OOMKilled", Class: "oom-host", FinishedAt: r.At.Add(-time.Minute)}
	}
	return r
}

// History returns the records of n actions, oldest first.
func History(n int) []state.Record {
	h := make([]state.Record, n)
	for i := range h {
		h[i] = Record(i)
	}
	return h
}

// Loops is a reap-loop window of groups groups, each with n actions a
// minute apart, their fingerprints alike but the verdict of every third.
func Loops(groups, n int) map[string][]state.LoopEntry {
	l := make(map[string][]state.LoopEntry, groups)
	for g := range groups {
		es := make([]state.LoopEntry, n)
		for i := range es {
			es[i] = state.LoopEntry{At: Epoch.Add(time.Duration(i) * time.Minute), Fingerprint: "outdated", Verdict: string(fleet.Terminal)}
			if i%3 == 2 {
				es[i].Fingerprint, es[i].Verdict = "ImagePullBackOff", "never-started"
			}
		}
		l[fmt.Sprintf("AutoscalingRunnerSet arc-runners/set-%d", g)] = es
	}
	return l
}

// Sample is a small ledger with both marks and a list cache.
func Sample() state.Ledger {
	m := Marks(3)
	m[fleet.RegistrationMarkKey("repo:acme/app", 42)] = fleet.Mark{
		Verdict: fleet.Ghost, FirstSeen: Epoch, LastSeen: Epoch.Add(time.Minute),
		Scope: "repo:acme/app", RunnerID: 42, RunnerName: "reaper-ghost",
	}
	return state.Ledger{Marks: m, Lists: Lists(2, 3)}
}

// Size counts an encoding as the ConfigMap and DynamoDB limits count it:
// keys and values.
func Size(e state.Encoded) int {
	n := len(state.MarksKey) + len(e.Marks)
	if e.Lists != nil {
		n += len(state.ListsKey) + len(e.Lists)
	}
	if e.Next != "" {
		n += len(state.NextScopeKey) + len(e.Next)
	}
	if e.Streaks != "" {
		n += len(state.StreaksKey) + len(e.Streaks)
	}
	if e.History != "" {
		n += len(state.HistoryKey) + len(e.History)
	}
	if e.Loops != "" {
		n += len(state.LoopsKey) + len(e.Loops)
	}
	return n
}

// SizeOf is the size of l encoded whole, and of its marks alone, for
// choosing limits.
func SizeOf(t testing.TB, l state.Ledger) (withLists, marksOnly int) {
	t.Helper()
	enc, trim, err := state.Fit(l, 1<<30, 1<<30, "test ledger")
	require.NoError(t, err)
	require.False(t, trim.Trimmed())
	return Size(enc), len(state.MarksKey) + len(enc.Marks)
}

// Newest returns the keys of the n newest of ms by FirstSeen, the smaller
// key first among equals, as state.Fit keeps them.
func Newest(ms map[string]fleet.Mark, n int) []string {
	keys := make([]string, 0, len(ms))
	for k := range ms {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := ms[keys[i]].FirstSeen, ms[keys[j]].FirstSeen
		if !a.Equal(b) {
			return a.After(b)
		}
		return keys[i] < keys[j]
	})
	return keys[:n]
}

// KeysOf returns the keys of ms, in no order.
func KeysOf(ms map[string]fleet.Mark) []string {
	keys := make([]string, 0, len(ms))
	for k := range ms {
		keys = append(keys, k)
	}
	return keys
}

// Gzipped is s, gzip'd.
func Gzipped(t testing.TB, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write([]byte(s))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// Ctx is a context that ends with the test, or after 30 s.
func Ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// LogLines decodes what a JSON slog handler wrote.
func LogLines(t testing.TB, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(buf)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m))
		lines = append(lines, m)
	}
	return lines
}

// The servers of this test process, each started by its first user. They
// are process-wide because a test binary is one process and starting a
// control plane per test would cost a minute each.
var (
	kubeOnce sync.Once
	kubeEnv  *testenv.Env
	kubeErr  error

	dynOnce sync.Once
	dyn     *testenv.Dynalite
	dynErr  error
)

// Kube returns the process's control plane, starting it on first use. In
// -short mode it skips the test instead, so that `make unit` runs without
// the control-plane assets; it never skips otherwise: a missing control
// plane fails the test.
func Kube(t testing.TB) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the test control plane (kube-apiserver, etcd); `make test` runs it")
	}
	kubeOnce.Do(func() { kubeEnv, kubeErr = testenv.Start() })
	if kubeErr != nil {
		t.Fatal(kubeErr)
	}
	return kubeEnv
}

// Dynalite returns the process's dynalite with table created from schema,
// starting both on first use; every caller in a process passes the same
// schema. In -short mode it skips the test instead, so that `make unit`
// runs without node; it never skips otherwise.
func Dynalite(t testing.TB, schema *dynamodb.CreateTableInput) *testenv.Dynalite {
	t.Helper()
	if testing.Short() {
		t.Skip("needs dynalite (node); `make test` runs it")
	}
	dynOnce.Do(func() {
		dyn, dynErr = testenv.StartDynalite()
		if dynErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dynErr = dyn.CreateTable(ctx, schema)
	})
	if dynErr != nil {
		t.Fatalf("dynalite: %v", dynErr)
	}
	return dyn
}

// Main runs a test package's tests and then stops the control plane if a
// test started it; use it from TestMain. Dynalite needs no stopping: it
// exits when this process does.
func Main(m *testing.M) {
	code := m.Run()
	if kubeEnv != nil {
		if err := kubeEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop test control plane:", err)
		}
	}
	os.Exit(code)
}

// LedgerTable is the table the DynamoDB ledger needs, as template.yaml
// declares it: partition key pk of type S and nothing else, on demand.
// The tests create their tables from it; state/dynamo's TestTableSchema
// checks it against the key the backend writes.
func LedgerTable(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
		},
		BillingMode: types.BillingModePayPerRequest,
	}
}
