package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// member is one runner of the demo fleet: its pod as a kubelet would leave
// it, its registration on GitHub, and what the demo expects the reaper to
// do with it and why.
type member struct {
	name    string
	pod     bool
	phase   corev1.PodPhase
	term    *corev1.ContainerStateTerminated
	last    *corev1.ContainerStateTerminated
	noState bool
	stamped bool
	reg     string // "", "online", "offline"
	busy    bool
	// org is the organization the pod is labelled with and the runner is
	// registered in; "" is acme, the one configured scope.
	org string
	// job is the run the pool's dispatcher gave the runner
	// (OWNER/REPO/RUN_ID, on the annotation REAPER_JOB_FROM names);
	// running starts it on GitHub, and lying makes GitHub list the runner
	// offline and idle while it runs, its DELETE answered 204.
	job     string
	running bool
	lying   bool
	// wait is the runner container's waiting reason on a pod that never
	// started (Pending, its image not pulled), and waitMsg the kubelet's
	// message with it.
	wait, waitMsg string
	// replicaSet, when set, is the pod's controller: the pods of one
	// ReplicaSet are one group, made from one template.
	replicaSet string

	// fate is what the demo expects the sweeps to report of it, and why is
	// the reason in plain words, which holds only if they do: the demo
	// checks one against the other (explain.go).
	fate fate
	why  string
}

// fate is what the sweeps are expected to report of a runner: the sweep
// (1 or 2) whose action line carries the verdict and the result, or none
// (sweep 0) for a runner left alone. counted names the summary's count
// that includes a runner left alone for the reason given ("" for none).
type fate struct {
	sweep   int
	verdict string
	result  string
	counted string
}

// scopeOf is the GitHub scope the member is registered in.
func (m member) scopeOf() string {
	if m.org == "" {
		return scope
	}
	return "org:" + m.org
}

// brokenSet is the ReplicaSet whose template runs a runner too old to
// start: each of its pods exits 7, ARC's code for a deprecated runner.
const brokenSet = "acme-pool-7d9f8c6b5"

// brokenWhy is the reason of each of brokenSet's pods.
const brokenWhy = "One of three pods of ReplicaSet " + brokenSet + ", each of whose runners exited 7 (a runner version GitHub no longer accepts). Each pod has ended: terminal, gone in sweep 1. But deleting them fixes nothing: the ReplicaSet makes more from the same template. Three reaps of one group with one exit fingerprint make a reap loop (see below)."

func demoFleet() []member {
	exit := func(code int32, reason string) *corev1.ContainerStateTerminated {
		return testenv.Terminated(code, 0, reason)
	}
	terminal := fate{sweep: 1, verdict: "terminal", result: "deleted"}
	ended := "Its pod has ended, which the kubelet's word makes final: terminal, so it went in the first sweep, with no confirmation to wait for."
	return []member{
		{name: "acme-healthy-1", pod: true, reg: "online",
			why: "Its pod runs and GitHub lists it online: healthy, nothing to do."},
		{name: "acme-healthy-2", pod: true, reg: "online",
			why: "Its pod runs and GitHub lists it online: healthy, nothing to do."},
		{name: "acme-busy", pod: true, reg: "online", busy: true, fate: fate{counted: "protected_busy"},
			why: "GitHub lists it busy: a runner on a job is never deleted while its pod runs (the summary counts it in protected_busy)."},
		{name: "acme-zombie-1", pod: true, reg: "offline", fate: fate{sweep: 2, verdict: "zombie", result: "deleted"},
			why: "Its pod runs but GitHub lists its registration offline: a zombie. GitHub's word can be wrong for a while, so sweep 1 only marked it; sweep 2, the mark older than REAPER_CONFIRM_AFTER, deleted the registration, then the pod."},
		{name: "acme-zombie-2", pod: true, reg: "offline", fate: fate{sweep: 2, verdict: "zombie", result: "deleted"},
			why: "As acme-zombie-1: marked in sweep 1, confirmed and deleted in sweep 2."},
		{name: "acme-unregistered", pod: true, fate: fate{sweep: 2, verdict: "unregistered", result: "deleted"},
			why: "Its pod has run past REAPER_REGISTRATION_DEADLINE and no runner of its name ever appeared on GitHub: unregistered, marked in sweep 1, deleted in sweep 2."},
		{name: "acme-stamped", pod: true, stamped: true, reg: "online", fate: fate{sweep: 2, verdict: "orphan-stamped", result: "deleted"},
			why: "The pool stamped its pod claimed (" + stampLabel + ") but no live claim backs the stamp: orphan-stamped. It waited the longer of REAPER_CONFIRM_AFTER and REAPER_STAMP_MAX_AGE, then went, registration first."},
		{name: "acme-done", pod: true, phase: corev1.PodSucceeded, term: exit(0, "Completed"), reg: "offline", fate: terminal,
			why: ended + " Its registration went first, then the pod."},
		{name: "acme-lying", pod: true, reg: "online", job: "acme/api/4711", running: true, lying: true, fate: fate{sweep: 2, verdict: "zombie", result: "protected-job"},
			why: "GitHub's API lists it offline and idle while its job runs (GitHub does this for minutes at a time; the simulator lies the same way), so it looks like a zombie, and sweep 1 marked it. But its pod's " + jobKey + " annotation names the job it was given, and before deleting, sweep 2 asked GitHub about that job. The job's word outranks the offline flag: a running job protects the runner (protected-job), and it stays; later sweeps judge it afresh."},
		{name: "acme-oom", pod: true, phase: corev1.PodFailed, term: exit(137, "OOMKilled"), job: "acme/api/4712", fate: terminal,
			why: ended + " Its job annotation does not hold it: the pod has ended, so no job runs on it."},
		{name: "acme-sigkill", pod: true, phase: corev1.PodFailed, term: exit(137, "Error"), fate: terminal, why: ended},
		{name: "acme-drained", pod: true, phase: corev1.PodFailed, term: exit(143, "Error"), fate: terminal, why: ended},
		{name: "acme-outdated", pod: true, phase: corev1.PodFailed, term: exit(7, "Error"), fate: terminal, why: ended},
		{name: "acme-crashed", pod: true, phase: corev1.PodFailed, last: exit(139, "Error"), fate: terminal,
			why: ended + " Its runner crashed and was waiting to restart; how it ended is read from the container's last state."},
		{name: "acme-vanished", pod: true, phase: corev1.PodFailed, noState: true, fate: terminal, why: ended},
		{name: "acme-pull-backoff", pod: true, wait: "ImagePullBackOff", waitMsg: `Back-off pulling image "ghcr.io/acme/actions-runner:2.3l9.0"`,
			fate: fate{sweep: 2, verdict: "never-started", result: "deleted"},
			why:  "Its pod has waited past REAPER_START_DEADLINE and its runner container never started: the kubelet cannot pull the image (a typo in its tag). It holds a slot that jobs queue behind, and nothing else would ever remove it: never-started, marked in sweep 1; in sweep 2 a look-up by name showed it had never registered, and the pod went."},
		{name: "acme-pool-7d9f8c6b5-4xk2p", pod: true, phase: corev1.PodFailed, term: exit(7, "Error"), replicaSet: brokenSet, fate: terminal, why: brokenWhy},
		{name: "acme-pool-7d9f8c6b5-9zt6m", pod: true, phase: corev1.PodFailed, term: exit(7, "Error"), replicaSet: brokenSet, fate: terminal, why: brokenWhy},
		{name: "acme-pool-7d9f8c6b5-qw3rd", pod: true, phase: corev1.PodFailed, term: exit(7, "Error"), replicaSet: brokenSet, fate: terminal, why: brokenWhy},
		{name: "acme-ghost", reg: "offline", fate: fate{sweep: 2, verdict: "ghost", result: "deleted"},
			why: "A registration with no pod behind it, offline, named with this deployment's REAPER_GHOST_NAME_PREFIX: a ghost, marked in sweep 1, deleted in sweep 2."},
		{name: "build-box-7", reg: "offline",
			why: "Another team's runner in the same org: offline with no pod, but its name does not start with REAPER_GHOST_NAME_PREFIX, so it is not this deployment's, and never a ghost."},
		{name: "contoso-runner-1", org: "contoso", pod: true, reg: "offline", fate: fate{counted: "unscoped_pods"},
			why: "A pod in the same namespace whose runner is registered in org:contoso, which is not in REAPER_SCOPES: the reaper does not list that scope, so it can only ever judge the pod by the kubelet's word (terminal), never by GitHub's (the summary counts it in unscoped_pods)."},
	}
}

func createFleet(ctx context.Context, cs kubernetes.Interface, sim *ghsim.Sim, fleet []member) error {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	scopes := map[string]bool{}
	for _, m := range fleet {
		if !scopes[m.scopeOf()] {
			sim.AddScope(m.scopeOf())
			scopes[m.scopeOf()] = true
		}
		if m.reg != "" {
			r := ghsim.Runner{Name: m.name, Status: m.reg, Busy: m.busy, Ephemeral: true,
				Labels: []ghsim.Label{{Name: "self-hosted", Type: "read-only"}, {Name: "linux", Type: "read-only"}}}
			if m.lying {
				r.Lie = ghsim.Lie{BusyLag: time.Hour, Offline: true}
			}
			sim.AddRunner(m.scopeOf(), r)
		}
		if m.running {
			i := strings.LastIndex(m.job, "/")
			runID, err := strconv.ParseInt(m.job[i+1:], 10, 64)
			if err != nil {
				return fmt.Errorf("job %s of %s: %w", m.job, m.name, err)
			}
			if j := sim.StartJob(m.job[:i], runID, "build (linux)", m.name); j.ID == 0 {
				return fmt.Errorf("start job %s on %s", m.job, m.name)
			}
		}
		if !m.pod {
			continue
		}
		if err := createPod(ctx, cs, m); err != nil {
			return err
		}
	}
	return nil
}

// createPod creates the member's pod as ARC labels it, then writes its
// status as a kubelet would: a runner still running unless it has ended,
// or, after a crash, waiting to be restarted.
func createPod(ctx context.Context, cs kubernetes.Interface, m member) error {
	org := m.org
	if org == "" {
		org = "acme"
	}
	p := testenv.RunnerPod{Name: m.name, Org: org, PodState: testenv.PodState{
		Phase:          m.phase,
		Running:        m.term == nil && m.last == nil,
		Terminated:     m.term,
		LastTerminated: m.last,
		NoStatus:       m.noState,
	}}
	if m.last != nil {
		p.Waiting = "CrashLoopBackOff"
	}
	if m.stamped {
		p.Labels = map[string]string{stampLabel: "job-4711"}
	}
	if m.job != "" {
		p.Annotations = map[string]string{jobKey: m.job}
	}
	if m.replicaSet != "" {
		p.Owner = &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: m.replicaSet,
			UID: "5c0f7e42-demo-4bad-template", Controller: ptrTo(true)}
	}
	if m.wait != "" {
		// Scheduled, and waiting for an image it will never get.
		now := metav1.Now()
		p.Status = &corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "runner", Image: "ghcr.io/acme/actions-runner:2.3l9.0",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: m.wait, Message: m.waitMsg}}}}}
	}
	_, err := testenv.CreateRunnerPod(ctx, cs, namespace, p)
	return err
}

func ptrTo[T any](v T) *T { return &v }
