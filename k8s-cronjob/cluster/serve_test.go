package cluster_test

// The long-running mode on the real cluster: the shipped base with
// components/arc and components/deployment, `runner-reaper serve` in two
// replicas, beside ARC's real manager (as arc_test.go runs it), each
// zombie an ARC runner whose registration goes offline while its runner
// hangs. What it proves:
//
//   - the replica holding the Lease reaps a zombie, and the other sweeps
//     nothing;
//   - the leader stopped after it marked a zombie, three ways: killed
//     (SIGKILL through containerd, as a crash or the OOM killer ends it:
//     the Lease goes by expiry to a new process, the other replica or the
//     killed one's restart, never under the dead one's identity); its pod
//     deleted with grace period 0 (the API forgets it at once, the kubelet
//     still sends SIGTERM); its pod deleted (SIGTERM: it exits 0 and
//     releases the Lease before the other takes it). Each time the new
//     leader finishes the job and nothing is done twice: one action line
//     in all the replicas' logs, one record in the ledger, one delete of
//     the registration on GitHub, every write on the runner from one pod;
//     the ledger's saves form one unbroken chain, and a save at the
//     version the killed leader last saw is refused;
//   - the pods watch of both replicas cut mid-stream, and every list of it
//     cut before its end, while a zombie is made: the leader holds back
//     every sweep that comes due (it says its stores cannot vouch for the
//     fleet, as /readyz and runner_reaper_watch_live do; a sweep already
//     reading when the cut comes fails at observe), and nothing is marked
//     or done for confirm-after and two intervals, in which a reaper
//     judging from what it holds would have reaped; once the watch is whole
//     again, it reaps.
//
// Two replicas on the one node cannot share the host's network, as every
// other test's pods do: they would listen on the same port. They run on a
// pod network of their own (testenv.StartPodNetwork), and reach the API
// server through the test's proxy on the bridge (testenv.PodAPIProxy,
// which can cut a watch) with their own ServiceAccount tokens, and GitHub
// through a TLS front on the same address ARC's manager reaches it by.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/configmap"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	serveNS = "serve-runners"
	// The Lease, and the Secret holding what the test's pods need to reach
	// the API server and GitHub through the test (a kubeconfig and a CA).
	leaseName    = "runner-reaper"
	accessSecret = "runner-reaper-test-access"
	accessDir    = "/etc/runner-reaper-test"
	// servePort is REAPER_LISTEN's, as components/deployment sets it.
	servePort = "8080"
	// serveInterval and serveConfirmAfter are REAPER_INTERVAL and
	// REAPER_CONFIRM_AFTER as serveEnv and serveConfig set them.
	serveInterval     = 10 * time.Second
	serveConfirmAfter = 5 * time.Second
	// msgSweepWaits is the leader's line when a sweep comes due while a
	// store cannot vouch for the whole fleet.
	msgSweepWaits = "sweep waits for the watches"
)

// serveConfig is the test's reaper configuration beside the overlay's:
// short enough that a zombie is reaped in two sweeps. REAPER_INTERVAL and
// the Lease's duration are the Deployment's own variables (serveEnv).
var serveConfig = map[string]string{
	"REAPER_CONFIRM_AFTER":            serveConfirmAfter.String(),
	"REAPER_SWEEP_TIMEOUT":            "9s",
	"REAPER_MAX_FRACTION":             "1",
	"REAPER_ARC_FAILED_AFTER":         "20s",
	"REAPER_ARC_STUCK_DELETING_AFTER": "20s",
}

// serveEnv are the Deployment's variables the test sets: REAPER_INTERVAL
// at its least, a Lease of a few seconds, and the way to the API server
// and GitHub through the test.
var serveEnv = map[string]string{
	"REAPER_INTERVAL":       serveInterval.String(),
	"REAPER_LEASE_DURATION": "6s",
	"KUBECONFIG":            accessDir + "/kubeconfig",
	"SSL_CERT_FILE":         accessDir + "/github-ca.crt",
}

// serveWorld is the ARC world of arc_test.go with the Deployment in it,
// and what the test follows while it runs: each replica's log, the
// Lease's and the ledger's every version, and how each container ended.
type serveWorld struct {
	*arcWorld
	px    *testenv.PodAPIProxy
	gh    string // the GitHub front's host:port on the pod network
	logs  *serveLogs
	lease *history[leaseSeen]
	led   *history[ledgerSeen]
	exits *history[exitSeen]
}

// serveCase is one zombie: a runner set of one runner, made a zombie when
// its turn comes.
type serveCase struct {
	label, set, name string
	id               int64
	gone             *goneWatch
	// mark is the first version of the ledger with a mark on it.
	mark ledgerSeen
}

func TestServeDeploymentOnARealKubelet(t *testing.T) { //nolint:gocyclo // one story on one cluster, told in the order it happens
	t.Parallel() // beside the other tests, in a namespace of its own
	ctx := context.Background()
	s := newServeWorld(t)

	// The runners, provisioned together: each online and idle until its
	// turn, when it becomes a zombie.
	reaped := &serveCase{label: "leader reaps", set: "serve-reaped"}
	killed := &serveCase{label: "leader killed", set: "serve-killed"}
	forced := &serveCase{label: "leader force-deleted", set: "serve-forced"}
	deleted := &serveCase{label: "leader deleted", set: "serve-deleted"}
	cut := &serveCase{label: "watch cut", set: "serve-cut"}
	cases := []*serveCase{reaped, killed, forced, deleted, cut}
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Add(1)
		go func() { defer wg.Done(); c.name, c.id = s.runnerSet(c.set) }()
	}
	wg.Wait()
	// The first zombie is there before the Deployment.
	s.zombie(reaped)

	applied := time.Now()
	s.apply(t)
	pods := s.waitReady(t, 2, "")
	t.Logf("SERVE: both replicas Running and ready (/readyz: synced) %v after apply, on the pod network at %s and %s",
		time.Since(applied).Round(100*time.Millisecond), pods[0].Status.PodIP, pods[1].Status.PodIP)
	leader := s.waitHolder(t, "", 90*time.Second)
	t.Logf("SERVE: %s holds the Lease", leader)

	t.Run("the leader reaps a zombie; the standby sweeps nothing", func(t *testing.T) {
		a := s.waitAction(t, reaped, 3*time.Minute)
		assert.Equal(t, podOf(leader), a.pod, "the leader acted: %v", a.m)
		s.assertReaped(t, reaped, a)
		for _, p := range pods {
			if p.Name == podOf(leader) {
				continue
			}
			for _, l := range s.logs.lines(p.Name) {
				assert.NotEqual(t, "action", l.m["msg"], "the standby %s acted: %v", p.Name, l.m)
				assert.NotEqual(t, "sweep", l.m["msg"], "the standby %s swept: %v", p.Name, l.m)
			}
		}
	})

	t.Run("the leader killed after marking: a new process takes the Lease once it expires, and finishes", func(t *testing.T) {
		f := s.failover(t, killed, func(t *testing.T, p *corev1.Pod) {
			require.NoError(t, cluster.KillContainer(reaperContainer(t, p).ContainerID))
		})
		_, released := s.lease.firstAfter(f.stopped, func(l leaseSeen) bool { return l.holder == "" })
		assert.False(t, released, "a killed leader releases nothing: the Lease went by expiry: %+v", s.lease.all())
		f.log(t, "SIGKILL (containerd)", "")
	})

	t.Run("a save at the version the killed leader last saw is refused", func(t *testing.T) {
		require.NotNil(t, killed.mark.cm, "the killed leader never marked its zombie")
		staleVersion, staleLedger := killed.mark.rv, killed.mark.ledger()
		store := configmap.New(cluster.Client.CoreV1().ConfigMaps(serveNS), serveNS, ledgerName, nil)
		require.Eventually(t, func() bool {
			cm, err := cluster.Client.CoreV1().ConfigMaps(serveNS).Get(ctx, ledgerName, metav1.GetOptions{})
			return err == nil && cm.ResourceVersion != staleVersion
		}, 2*time.Minute, 100*time.Millisecond, "the ledger never saved again after version %s", staleVersion)
		_, err := store.Save(ctx, staleLedger, state.Version(staleVersion))
		require.ErrorIs(t, err, state.ErrConflict)
		// That it wrote nothing is the chain's to show (below): a write
		// from the stale version would repeat a save's number.
	})

	t.Run("the leader's pod deleted with grace period 0 after marking: the other takes over and finishes", func(t *testing.T) {
		// The API forgets the pod at once, and its replacement starts
		// beside a process the kubelet is only now stopping (SIGTERM,
		// then SIGKILL after its own short grace): whether that process
		// releases the Lease in time is its race; the Lease keeps two
		// from leading either way.
		zero := int64(0)
		f := s.failover(t, forced, func(t *testing.T, p *corev1.Pod) {
			require.NoError(t, cluster.Client.CoreV1().Pods(serveNS).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
		})
		how := "expired"
		if r, ok := s.lease.firstAfter(f.stopped, func(l leaseSeen) bool { return l.holder == "" }); ok && !r.at.After(f.took.at) {
			how = fmt.Sprintf("released %v after the delete", r.at.Sub(f.stopped).Round(10*time.Millisecond))
		}
		f.log(t, "delete --grace-period=0", "the Lease "+how)
	})

	t.Run("the leader's pod deleted after marking: it exits 0, releases the Lease, and the other finishes", func(t *testing.T) {
		var cid string
		f := s.failover(t, deleted, func(t *testing.T, p *corev1.Pod) {
			cid = reaperContainer(t, p).ContainerID
			require.NoError(t, cluster.Client.CoreV1().Pods(serveNS).Delete(ctx, p.Name, metav1.DeleteOptions{}))
		})
		released, ok := s.lease.firstAfter(f.stopped, func(l leaseSeen) bool { return l.holder == "" })
		assert.True(t, ok && !released.at.After(f.took.at), "the leader released the Lease on SIGTERM, before the other took it: %+v", s.lease.all())
		var exit exitSeen
		require.Eventually(t, func() bool {
			var ok bool
			exit, ok = s.exits.find(func(e exitSeen) bool { return e.containerID == cid })
			return ok
		}, 2*time.Minute, 100*time.Millisecond, "the deleted leader's container never ended")
		assert.EqualValues(t, 0, exit.code, "SIGTERM: the serve process exits 0: %+v", exit)
		f.log(t, "delete (SIGTERM)", fmt.Sprintf("released the Lease %v after the delete; exit %d (%s)",
			released.at.Sub(f.stopped).Round(10*time.Millisecond), exit.code, exit.reason))
	})

	t.Run("a watch cut mid-stream yields no verdict until it is whole again", func(t *testing.T) {
		pods := s.waitReady(t, 2, "")
		leader := s.holder(t)
		cutsBefore := s.px.Cuts("pods")
		cutAt := time.Now()
		s.px.Cut("pods")

		// The next sweep that comes due is held back: the leader says its
		// stores cannot vouch for the fleet, and so does each replica.
		held := s.waitLine(t, podOf(leader), cutAt, msgSweepWaits, 2*serveInterval)
		for _, p := range pods {
			code, body := get(t, p.Status.PodIP, "/readyz")
			assert.Equal(t, http.StatusServiceUnavailable, code, "%s /readyz while its pods watch is cut: %s", p.Name, body)
			assert.Contains(t, body, "pods in namespace "+serveNS+": ", "%s /readyz names the watch and why", p.Name)
			live, ok := metricValue(t, p.Status.PodIP, "runner_reaper_watch_live", `resource="pods"`)
			assert.True(t, ok && live == 0, "%s runner_reaper_watch_live{resource=\"pods\"} while cut: %v %v", p.Name, live, ok)
		}

		// Now the zombie, while the store holds its pod as it was. For a
		// mark and its confirmation, a reaper judging from what it holds
		// would have acted within confirm-after and two intervals: nothing
		// may be judged or done in them.
		s.zombie(cut)
		violation := ""
		assert.Never(t, func() bool {
			for _, l := range s.logs.all() {
				switch {
				case l.m["msg"] == "action" && l.at.After(cutAt):
					violation = fmt.Sprintf("an action while the watch was cut: %s %v", l.pod, l.m)
				case l.m["msg"] == "sweep" && l.began().After(held.at):
					violation = fmt.Sprintf("a sweep ran while the watch was cut: %s %v", l.pod, l.m)
				}
			}
			if v, ok := s.led.firstAfter(cutAt, func(v ledgerSeen) bool { return v.markOf(cut.name) != "" }); ok {
				violation = fmt.Sprintf("%s marked while the watch was cut: ledger %s", cut.name, v.rv)
			}
			return violation != ""
		}, serveConfirmAfter+2*serveInterval, 200*time.Millisecond, "judged from a store the cut watch could not vouch for")
		assert.Empty(t, violation)
		// A leader whose stores stay incomplete for two intervals steps
		// down; the standby's pods watch is cut too, so none may take it.
		assert.Contains(t, []string{leader, ""}, s.holder(t), "no replica whose watch was cut took the Lease")
		st := cluster.ARCRunner(t, serveNS, cut.name)
		require.NotNil(t, st.Runner, "the EphemeralRunner is there")
		assert.False(t, st.Deleting)
		_, registered := s.sim.RunnerByName(scope, cut.name)
		assert.True(t, registered, "its registration is there")
		// A sweep already past its lists when the cut came may end after
		// it; one that read the store after the cut failed at observe.
		for _, l := range s.logs.lines(podOf(leader)) {
			if l.m["msg"] == "sweep" && l.at.After(cutAt) && toInt(l.m["status"]) != 0 {
				assert.Contains(t, fmt.Sprint(l.m["error"]), "incomplete observation", "%v", l.m)
				t.Logf("SERVE watch cut: the sweep in flight failed at observe: %v", l.m["error"])
			}
		}
		cuts := s.px.Cuts("pods") - cutsBefore
		assert.Greater(t, cuts, len(pods), "the proxy cut each replica's open watch, and the relists after them")

		restoredAt := time.Now()
		s.px.Restore("pods")
		a := s.waitAction(t, cut, 3*time.Minute)
		t.Logf("SERVE watch cut: %s acted after the restore (the leader before the cut: %s)", a.pod, podOf(leader))
		s.assertReaped(t, cut, a)
		first, ok := s.led.firstAfter(time.Time{}, func(v ledgerSeen) bool { return v.markOf(cut.name) != "" })
		require.True(t, ok, "the reap of %s followed a mark", cut.name)
		assert.True(t, first.at.After(restoredAt), "marked only once the watch was whole again")
		t.Logf("SERVE watch cut: held for %v with no sweep, mark or action (%d streams cut or watches refused); after the restore, marked %v and acted %v later",
			restoredAt.Sub(cutAt).Round(10*time.Millisecond), cuts,
			first.at.Sub(restoredAt).Round(10*time.Millisecond), a.at.Sub(restoredAt).Round(10*time.Millisecond))
	})

	t.Run("nothing was done twice, and the ledger's saves form one chain", func(t *testing.T) {
		led, err := cluster.Client.CoreV1().ConfigMaps(serveNS).Get(ctx, ledgerName, metav1.GetOptions{})
		require.NoError(t, err)
		records, err := state.DecodeHistory(led.Data[state.HistoryKey])
		require.NoError(t, err)
		audit := audit(t)
		for _, c := range cases {
			var acts []logLine
			for _, l := range s.logs.all() {
				if l.m["msg"] == "action" && actsOn(l.m, c.name) {
					acts = append(acts, l)
				}
			}
			assert.Len(t, acts, 1, "%s: one action line in every replica's log: %v", c.name, acts)
			n := 0
			for _, r := range records {
				if r.ObjectName == c.name || r.RunnerName == c.name {
					n++
				}
			}
			assert.Equal(t, 1, n, "%s: one record in the ledger: %+v", c.name, records)
			deletes := 0
			for _, r := range s.sim.Requests() {
				if r.Endpoint == ghsim.EndpointDelete && strings.HasSuffix(r.Path, "/"+strconv.FormatInt(c.id, 10)) {
					deletes++
				}
			}
			assert.Equal(t, 1, deletes, "%s: one delete of registration %d on GitHub", c.name, c.id)
			writers := map[string]int{}
			for _, e := range audit {
				if e.User.Username == "system:serviceaccount:"+serveNS+":runner-reaper" && e.ObjectRef.Name == c.name &&
					(e.Verb == "delete" || e.Verb == "patch") {
					writers[strings.Join(e.User.Extra["authentication.kubernetes.io/pod-name"], ",")]++
				}
			}
			assert.Len(t, writers, 1, "%s: every write on the runner from one pod: %v", c.name, writers)
		}
		vs := s.led.all(nil)
		var rvs []string
		for i, v := range vs {
			rvs = append(rvs, v.rv+"/"+v.saves)
			if i == 0 {
				continue
			}
			prev, _ := strconv.Atoi(vs[i-1].saves)
			cur, _ := strconv.Atoi(v.saves)
			assert.Equal(t, prev+1, cur, "each save follows the one before: %s after %s", v.rv, vs[i-1].rv)
		}
		for _, l := range s.logs.all() {
			if strings.Contains(l.raw, state.ErrConflict.Error()) {
				t.Errorf("a save lost the race: %s %s", l.pod, l.raw)
			}
		}
		t.Logf("SERVE ledger: %d versions seen (resourceVersion/saves): %s", len(vs), strings.Join(rvs, " "))
	})

	t.Run("only a Lease holder swept", func(t *testing.T) {
		holders := map[string]bool{}
		for _, l := range s.lease.all() {
			holders[l.holder] = true
		}
		for _, l := range s.logs.all() {
			if l.m["msg"] == "sweep" || l.m["msg"] == "action" {
				require.NotEmpty(t, l.id, "%s: a process that swept never logged its identity", l.pod)
				assert.True(t, holders[l.id], "%s (%s) swept but never held the Lease: %v", l.id, l.pod, l.m)
			}
		}
	})
}

func newServeWorld(t *testing.T) *serveWorld {
	t.Helper()
	s := &serveWorld{arcWorld: newARCWorld(t, serveNS)}
	gw := cluster.StartPodNetwork(t, serveNS)
	sim := strings.TrimSuffix(strings.TrimPrefix(s.url, "http://"), "/")
	var ghCA []byte
	s.gh, ghCA = testenv.ForwardWithTLS(t, gw, sim)
	// ARC registers the runners with GitHub where the reaper lists them:
	// the same host and port (in plain HTTP: ARC's manager runs on the
	// host, where that is loopback's equal).
	var err error
	s.cfg, err = ghsim.ConfigURL("http://"+s.gh, scope)
	require.NoError(t, err)
	s.px = cluster.StartPodAPIProxy(t, gw)
	_, err = cluster.Client.CoreV1().Secrets(serveNS).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: accessSecret},
		Data:       map[string][]byte{"kubeconfig": s.px.Kubeconfig(serveNS), "github-ca.crt": ghCA},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	s.logs = &serveLogs{ns: serveNS, files: map[string]*procLog{}}
	s.lease = &history[leaseSeen]{}
	s.led = &history[ledgerSeen]{}
	s.exits = &history[exitSeen]{}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			s.logs.poll()
			time.Sleep(100 * time.Millisecond)
		}
		s.logs.poll()
		s.logs.close()
	}()
	go func() {
		defer wg.Done()
		follow(ctx, func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "metadata.name=" + leaseName
			return cluster.Client.CoordinationV1().Leases(serveNS).Watch(ctx, o)
		}, func(o runtime.Object) {
			if l, ok := o.(*coordinationv1.Lease); ok {
				s.lease.add(leaseSeen{at: time.Now(), holder: deref(l.Spec.HolderIdentity), rv: l.ResourceVersion})
			}
		})
	}()
	go func() {
		defer wg.Done()
		follow(ctx, func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "metadata.name=" + ledgerName
			return cluster.Client.CoreV1().ConfigMaps(serveNS).Watch(ctx, o)
		}, func(o runtime.Object) {
			if cm, ok := o.(*corev1.ConfigMap); ok && cm.Data[state.MarksKey] != "" {
				s.led.add(ledgerSeen{at: time.Now(), rv: cm.ResourceVersion, saves: cm.Data["saves"], cm: cm.DeepCopy()})
			}
		})
	}()
	go func() {
		defer wg.Done()
		follow(ctx, func(o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = reaperLabel
			return cluster.Client.CoreV1().Pods(serveNS).Watch(ctx, o)
		}, func(o runtime.Object) {
			p, ok := o.(*corev1.Pod)
			if !ok {
				return
			}
			for _, st := range p.Status.ContainerStatuses {
				for _, term := range []*corev1.ContainerStateTerminated{st.State.Terminated, st.LastTerminationState.Terminated} {
					if term == nil || term.ContainerID == "" {
						continue
					}
					if _, seen := s.exits.find(func(e exitSeen) bool { return e.containerID == term.ContainerID }); seen {
						continue
					}
					s.exits.add(exitSeen{pod: p.Name, containerID: term.ContainerID, code: term.ExitCode, reason: term.Reason})
				}
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if t.Failed() {
			for _, f := range s.logs.procs() {
				t.Logf("%s %s:\n%s", f.pod, f.file, f.text())
			}
			t.Logf("Lease: %+v", s.lease.all())
		}
	})
	return s
}

// apply renders the shipped base with components/arc and
// components/deployment, the test's settings, and the way to the API
// server and GitHub through the test, and applies it.
func (s *serveWorld) apply(t *testing.T) {
	t.Helper()
	base, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		require.NoError(t, err)
		return r
	}
	var config, env strings.Builder
	for _, k := range sortedKeys(serveConfig) {
		op := "add"
		if k == "REAPER_SWEEP_TIMEOUT" {
			op = "replace"
		}
		fmt.Fprintf(&config, "\n      - op: %s\n        path: /data/%s\n        value: %q", op, k, serveConfig[k])
	}
	for _, k := range sortedKeys(serveEnv) {
		fmt.Fprintf(&env, "\n                  - {name: %s, value: %q}", k, serveEnv[k])
	}
	tag := strings.TrimPrefix(testenv.ImageRef, "ghcr.io/runner-reaper/runner-reaper:")
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %[1]s
resources:
  - %[2]s
components:
  - %[3]s
  - %[4]s
images:
  - name: ghcr.io/runner-reaper/runner-reaper
    newTag: %[5]s
patches:
  - target: {kind: ConfigMap, name: runner-reaper-config}
    patch: |-
      - op: replace
        path: /data/REAPER_DRY_RUN
        value: "false"
      - op: replace
        path: /data/REAPER_SCOPES
        value: %[6]q
      - op: replace
        path: /data/REAPER_NAMESPACES
        value: %[1]q
      - op: replace
        path: /data/REAPER_LEDGER
        value: %[7]q
      - op: add
        path: /data/REAPER_GITHUB_API_URL
        value: %[8]q%[9]s
  - target: {kind: RoleBinding}
    patch: |-
      - op: replace
        path: /subjects/0/namespace
        value: %[1]q
  - target: {kind: Deployment, name: runner-reaper}
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: runner-reaper
      spec:
        template:
          spec:
            containers:
              - name: reaper
                imagePullPolicy: Never
                env:%[10]s
                volumeMounts:
                  - {name: test-access, mountPath: %[11]s, readOnly: true}
            volumes:
              - name: test-access
                secret: {secretName: %[12]s}
`, serveNS, rel(base), rel(filepath.Join(base, "components", "arc")), rel(filepath.Join(base, "components", "deployment")),
		tag, scope, "configmap:"+serveNS+"/"+ledgerName, "https://"+s.gh+"/", config.String(), env.String(), accessDir, accessSecret)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o600))
	kubectl := filepath.Join(testenv.AssetsDir(cluster.Root), "kubectl")
	rendered, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	require.NoError(t, err, "%s", rendered)
	require.Contains(t, string(rendered), "kind: Deployment")
	require.NotContains(t, string(rendered), "kind: CronJob", "components/deployment replaces the CronJob")
	kubeconfig, err := cluster.Kubeconfig(t.TempDir())
	require.NoError(t, err)
	apply := exec.Command(kubectl, "--kubeconfig", kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(string(rendered))
	out, err := apply.CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// zombie makes c's runner a zombie: it hangs, and GitHub has it offline;
// and watches for it all gone.
func (s *serveWorld) zombie(c *serveCase) {
	s.t.Helper()
	c.gone = s.watchGone(c.name)
	s.cue(c.name, "hang")
	s.mu.Lock()
	s.offline[c.name] = true
	s.mu.Unlock()
	require.True(s.t, s.sim.SetRunner(scope, c.id, func(r *ghsim.Runner) { r.Status = "offline" }))
}

// waitReady waits until n replicas, none of them named not, run and are
// ready (the kubelet's readiness probe on /readyz: every store synced),
// and returns them.
func (s *serveWorld) waitReady(t *testing.T, n int, not string) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	require.Eventually(t, func() bool {
		ready = nil
		l, err := cluster.Client.CoreV1().Pods(serveNS).List(context.Background(), metav1.ListOptions{LabelSelector: reaperLabel})
		if err != nil {
			return false
		}
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && p.Name != not && p.Status.Phase == corev1.PodRunning && podReady(&p) {
				ready = append(ready, p)
			}
		}
		return len(ready) == n
	}, 3*time.Minute, 200*time.Millisecond, "%d replicas never ready; ready now: %d", n, len(ready))
	_, subnet, err := net.ParseCIDR(testenv.PodSubnet)
	require.NoError(t, err)
	for _, p := range ready {
		assert.True(t, subnet.Contains(net.ParseIP(p.Status.PodIP)), "%s on the pod network: %s", p.Name, p.Status.PodIP)
	}
	return ready
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// holder is the Lease's holder now.
func (s *serveWorld) holder(t *testing.T) string {
	t.Helper()
	l, err := cluster.Client.CoordinationV1().Leases(serveNS).Get(context.Background(), leaseName, metav1.GetOptions{})
	require.NoError(t, err)
	return deref(l.Spec.HolderIdentity)
}

// waitHolder waits until the Lease has a holder other than not, and
// returns it.
func (s *serveWorld) waitHolder(t *testing.T, not string, within time.Duration) string {
	t.Helper()
	var h string
	require.Eventually(t, func() bool {
		l, err := cluster.Client.CoordinationV1().Leases(serveNS).Get(context.Background(), leaseName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		h = deref(l.Spec.HolderIdentity)
		return h != "" && h != not
	}, within, 50*time.Millisecond, "no holder of the Lease but %q; seen: %+v", not, s.lease.all())
	return h
}

// failedOver is one failover: the leader stopped after it marked the
// case's zombie, and the other replica's act on it.
type failedOver struct {
	c        *serveCase
	old, now string
	stopped  time.Time
	took     leaseSeen
	act      logLine
}

// failover makes c's runner a zombie, waits until the leader has marked
// it, stops the leader's process with stop, and waits until the other
// replica holds the Lease and has reaped it.
func (s *serveWorld) failover(t *testing.T, c *serveCase, stop func(t *testing.T, p *corev1.Pod)) failedOver {
	t.Helper()
	s.waitReady(t, 2, "")
	f := failedOver{c: c, old: s.holder(t)}
	s.zombie(c)
	s.waitMark(t, c)
	p := s.pod(t, podOf(f.old))
	f.stopped = time.Now()
	stop(t, p)
	// The Lease changes hands, or a new process leads under the stopped
	// one's identity, which a Lease cannot tell from the old one.
	var again logLine
	require.Eventually(t, func() bool {
		l, err := cluster.Client.CoordinationV1().Leases(serveNS).Get(context.Background(), leaseName, metav1.GetOptions{})
		if err == nil && deref(l.Spec.HolderIdentity) != "" && deref(l.Spec.HolderIdentity) != f.old {
			f.now = deref(l.Spec.HolderIdentity)
			return true
		}
		for _, l := range s.logs.all() {
			if l.m["msg"] == "leading" && l.m["identity"] == f.old && l.at.After(f.stopped) {
				again = l
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "no new holder of the Lease; seen: %v", s.lease.all())
	require.Empty(t, again.raw, "the Lease never changed hands: a new process (%s %s) leads under the stopped leader's identity %q, "+
		"which must be unique to the process", again.pod, again.at.Format("15:04:05.000"), f.old)
	f.took = s.waitSeen(t, f.stopped, f.now)
	f.act = s.waitAction(t, c, 2*time.Minute)
	assert.Equal(t, podOf(f.now), f.act.pod, "the new leader acted: %v", f.act.m)
	s.assertReaped(t, c, f.act)
	return f
}

func (f failedOver) log(t *testing.T, how, more string) {
	who := "the other replica"
	if podOf(f.now) == podOf(f.old) {
		who = "the stopped leader's restart"
	}
	t.Logf("SERVE %s: %s, %s after it marked %s; %s (%s) took the Lease %v after (Lease %s)%s; acted %v after",
		f.c.label, f.old, how, f.c.name, f.now, who, f.took.at.Sub(f.stopped).Round(10*time.Millisecond),
		serveEnv["REAPER_LEASE_DURATION"], strings.TrimSuffix("; "+more, "; "), f.act.at.Sub(f.stopped).Round(10*time.Millisecond))
}

// waitSeen waits until the Lease's follower has seen holder take it after
// after, and returns that version.
func (s *serveWorld) waitSeen(t *testing.T, after time.Time, holder string) leaseSeen {
	t.Helper()
	var l leaseSeen
	require.Eventually(t, func() bool {
		var ok bool
		l, ok = s.lease.firstAfter(after, func(l leaseSeen) bool { return l.holder == holder })
		return ok
	}, 10*time.Second, 10*time.Millisecond, "the Lease's follower never saw %s take it", holder)
	return l
}

// podOf is the pod of a holder identity: the pod's name, which the
// replica makes unique to its process with a suffix after "_".
func podOf(identity string) string {
	pod, _, _ := strings.Cut(identity, "_")
	return pod
}

func (s *serveWorld) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	p, err := cluster.Client.CoreV1().Pods(serveNS).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func reaperContainer(t *testing.T, p *corev1.Pod) corev1.ContainerStatus {
	t.Helper()
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "reaper" {
			require.NotEmpty(t, c.ContainerID, "%s: the reaper container runs", p.Name)
			return c
		}
	}
	t.Fatalf("%s has no reaper container: %+v", p.Name, p.Status)
	return corev1.ContainerStatus{}
}

// waitMark waits until the ledger holds a mark on c's runner, and returns
// that version of the ledger.
func (s *serveWorld) waitMark(t *testing.T, c *serveCase) ledgerSeen {
	t.Helper()
	var v ledgerSeen
	require.Eventually(t, func() bool {
		var ok bool
		v, ok = s.led.firstAfter(time.Time{}, func(v ledgerSeen) bool { return v.markOf(c.name) != "" })
		return ok
	}, 2*time.Minute, 20*time.Millisecond, "%s: never marked", c.name)
	c.mark = v
	for _, l := range s.logs.all() {
		require.False(t, l.m["msg"] == "action" && actsOn(l.m, c.name), "%s: acted on before the failover: %v", c.name, l.m)
	}
	return v
}

// waitLine waits for a line msg in pod's log logged after after.
func (s *serveWorld) waitLine(t *testing.T, pod string, after time.Time, msg string, within time.Duration) logLine {
	t.Helper()
	var found logLine
	require.Eventually(t, func() bool {
		for _, l := range s.logs.lines(pod) {
			if l.m["msg"] == msg && l.at.After(after) {
				found = l
				return true
			}
		}
		return false
	}, within, 100*time.Millisecond, "%s never logged %q", pod, msg)
	return found
}

// waitAction waits for an action line on c's runner in any replica's log.
func (s *serveWorld) waitAction(t *testing.T, c *serveCase, within time.Duration) logLine {
	t.Helper()
	var a logLine
	require.Eventually(t, func() bool {
		for _, l := range s.logs.all() {
			if l.m["msg"] == "action" && actsOn(l.m, c.name) {
				a = l
				return true
			}
		}
		return false
	}, within, 100*time.Millisecond, "%s: no action on %s; Lease %+v", c.label, c.name, s.lease.all())
	t.Logf("%s: %s acted: %v", c.label, a.pod, a.m)
	return a
}

func actsOn(m map[string]any, name string) bool {
	return m["pod"] == name || m["object"] == "EphemeralRunner "+serveNS+"/"+name
}

// assertReaped checks the act on a zombie, and that ARC finished it: its
// EphemeralRunner, pod, JIT Secret and registration gone.
func (s *serveWorld) assertReaped(t *testing.T, c *serveCase, a logLine) {
	t.Helper()
	assert.Equal(t, "zombie", a.m["verdict"], "%v", a.m)
	assert.Equal(t, "delete-registration-then-ephemeralrunner", a.m["action"], "%v", a.m)
	assert.Equal(t, "deleted", a.m["result"], "%v", a.m)
	assert.EqualValues(t, c.id, a.m["runner_id"], "%v", a.m)
	<-c.gone.done
	require.False(t, c.gone.at.IsZero(), "%s: EphemeralRunner, pod, JIT Secret and registration not all gone: %+v", c.name, cluster.ARCRunner(t, serveNS, c.name))
	t.Logf("SERVE %s: %s reaped; all gone %v after the act", c.label, c.name, c.gone.at.Sub(a.at).Round(10*time.Millisecond))
}

// get asks a replica for path on its port.
func get(t *testing.T, ip, path string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(ip, servePort) + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// metricValue is the value of the sample of family whose labels hold
// label, from a replica's /metrics.
func metricValue(t *testing.T, ip, family, label string) (float64, bool) {
	t.Helper()
	code, body := get(t, ip, "/metrics")
	require.Equal(t, http.StatusOK, code)
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, family+"{") || !strings.Contains(l, label) {
			continue
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		return v, err == nil
	}
	return 0, false
}

// What the test follows while the Deployment runs.

// history is what a follower saw, in order.
type history[T any] struct {
	mu   sync.Mutex
	seen []T
}

func (h *history[T]) add(v T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, v)
}

// all is every version seen that keep accepts (nil: every one).
func (h *history[T]) all(keep ...func(T) bool) []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []T
	for _, v := range h.seen {
		if len(keep) == 0 || keep[0] == nil || keep[0](v) {
			out = append(out, v)
		}
	}
	return out
}

func (h *history[T]) find(f func(T) bool) (T, bool) {
	return h.firstAfter(time.Time{}, f)
}

type timed interface{ seenAt() time.Time }

type leaseSeen struct {
	at     time.Time
	holder string
	rv     string
}

func (l leaseSeen) seenAt() time.Time { return l.at }

func (l leaseSeen) String() string {
	return fmt.Sprintf("%s %q (rv %s)", l.at.Format("15:04:05.000"), l.holder, l.rv)
}

type ledgerSeen struct {
	at    time.Time
	rv    string
	saves string
	cm    *corev1.ConfigMap
}

func (l ledgerSeen) seenAt() time.Time { return l.at }

// markOf is the key of a mark on runner name in this version, or "".
func (l ledgerSeen) markOf(name string) string {
	var marks map[string]fleet.Mark
	if json.Unmarshal([]byte(l.cm.Data[state.MarksKey]), &marks) != nil {
		return ""
	}
	for k, m := range marks {
		if m.RunnerName == name || m.Pod == name {
			return k
		}
	}
	return ""
}

// ledger is this version's marks and records, as a replica loaded them.
func (l ledgerSeen) ledger() state.Ledger {
	var out state.Ledger
	_ = json.Unmarshal([]byte(l.cm.Data[state.MarksKey]), &out.Marks)
	out.History, _ = state.DecodeHistory(l.cm.Data[state.HistoryKey])
	return state.Normalize(out)
}

type exitSeen struct {
	pod, containerID, reason string
	code                     int32
}

// firstAfter is the first version seen after after that f accepts.
func (h *history[T]) firstAfter(after time.Time, f func(T) bool) (T, bool) {
	for _, v := range h.all(f) {
		if t, ok := any(v).(timed); !ok || t.seenAt().After(after) {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// follow lists and watches what watchFn watches until ctx ends, passing
// each object seen to seen, and watching again from where it was when the
// watch ends.
func follow(ctx context.Context, watchFn func(metav1.ListOptions) (watch.Interface, error), seen func(runtime.Object)) {
	rv := ""
	for ctx.Err() == nil {
		w, err := watchFn(metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				continue
			}
			if m, ok := ev.Object.(metav1.Object); ok {
				rv = m.GetResourceVersion()
			}
			seen(ev.Object)
		}
		w.Stop()
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// serveLogs follows the replicas' container logs as the kubelet writes
// them, one file a container (0.log, then 1.log after a restart), each
// held open from when it appears, so that a pod deleted, and its log
// with it, is still read to its end.
type serveLogs struct {
	ns    string
	mu    sync.Mutex
	files map[string]*procLog
	order []string
}

// procLog is one container's log: one serve process.
type procLog struct {
	pod, file string
	// id is the process's holder identity, from its start-up line.
	id      string
	f       *os.File
	rest    string // the part of a line not yet ended
	partial string // a line the runtime split (tag P), so far
	lines   []logLine
}

// logLine is one JSON line a replica logged.
type logLine struct {
	pod, id string
	at      time.Time
	raw     string
	m       map[string]any
}

// began is when a sweep summary's sweep began, by its own clock.
func (l logLine) began() time.Time {
	return l.at.Add(-time.Duration(toInt(l.m["duration_ms"])) * time.Millisecond)
}

func (l *serveLogs) poll() {
	paths, _ := filepath.Glob(filepath.Join(cluster.PodLogs, l.ns+"_runner-reaper-*", "reaper", "*.log"))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range paths {
		if _, ok := l.files[p]; ok {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		dir := filepath.Base(filepath.Dir(filepath.Dir(p))) // NS_POD_UID
		parts := strings.Split(dir, "_")
		l.files[p] = &procLog{pod: parts[1], file: filepath.Base(p), f: f}
		l.order = append(l.order, p)
	}
	for _, p := range l.order {
		l.files[p].read()
	}
}

func (f *procLog) read() {
	b, err := io.ReadAll(f.f)
	if err != nil || len(b) == 0 {
		return
	}
	text := f.rest + string(b)
	lines := strings.Split(text, "\n")
	f.rest = lines[len(lines)-1]
	for _, cri := range lines[:len(lines)-1] {
		// time stream tag content
		parts := strings.SplitN(cri, " ", 4)
		if len(parts) < 4 {
			continue
		}
		f.partial += parts[3]
		if parts[2] != "F" {
			continue
		}
		line := f.partial
		f.partial = ""
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			f.lines = append(f.lines, logLine{pod: f.pod, raw: line})
			continue
		}
		if m["msg"] == "serving" && f.id == "" {
			f.id, _ = m["identity"].(string)
		}
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(m["time"]))
		f.lines = append(f.lines, logLine{pod: f.pod, at: at, raw: line, m: m})
	}
}

func (l *serveLogs) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.files {
		f.f.Close()
	}
}

// all is every line of every replica, each container's in order.
func (l *serveLogs) all() []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logLine
	for _, p := range l.order {
		for _, ln := range l.files[p].lines {
			if ln.m == nil {
				ln.m = map[string]any{}
			}
			ln.id = l.files[p].id
			out = append(out, ln)
		}
	}
	return out
}

// lines is every line of pod's containers.
func (l *serveLogs) lines(pod string) []logLine {
	var out []logLine
	for _, ln := range l.all() {
		if ln.pod == pod {
			out = append(out, ln)
		}
	}
	return out
}

func (l *serveLogs) procs() []*procLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*procLog
	for _, p := range l.order {
		out = append(out, l.files[p])
	}
	return out
}

func (f *procLog) text() string {
	var b strings.Builder
	for _, l := range f.lines {
		b.WriteString(l.raw)
		b.WriteString("\n")
	}
	return b.String()
}
