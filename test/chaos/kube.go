package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// errAdmission is how an admission webhook's refusal reads.
var errAdmission = errors.New("admission webhook \"policy.example\" denied the request")

// kube is the Kubernetes side: the pod lister the sweep uses and the
// deletes the reaper sends, with real preconditions. It lists what the
// reaper's configuration selects (namespace runners, the runner selector),
// and judges every delete against the truth at the moment it is made.
type kube struct{ w *world }

// ListPods lists the selected pods of the configured namespace.
func (k kube) ListPods(ctx context.Context) ([]fleet.Pod, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := w.top()
	if sc.podListFault {
		sc.mustFail = "pod list failed"
		return nil, errors.New("list pods in runners: the server is currently unable to handle the request")
	}
	var out []fleet.Pod
	for _, p := range w.pods {
		if p.ns == nsRunners && p.selected || w.cfg.Break == ListAllNamespaces {
			out = append(out, p.view())
		}
	}
	sc.managed = len(out)
	return out, nil
}

// lookup finds the pod the request names and checks its preconditions.
func (w *world) lookup(p fleet.Pod) (*kpod, fleet.Result) {
	q := w.byKey[p.Namespace+"/"+p.Name]
	switch {
	case q == nil:
		return nil, fleet.AlreadyGone
	case q.uid != p.UID || strconv.Itoa(q.rv) != p.ResourceVersion:
		return nil, fleet.Changed
	}
	return q, fleet.Deleted
}

// DeletePod of dryKube is the pre-flight. Someone else may get to the pod first
// (deleted, replaced, changed) between the sweep's list and its delete, and
// an admission webhook may refuse.
func (d dryKube) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	k := d.k
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if q := w.byKey[p.Namespace+"/"+p.Name]; q != nil && w.cfg.Hazards.Has(KubeRace) {
		switch x := w.rng.Float64(); {
		case x < 0.03:
			w.kill(q)
		case x < 0.06 && q.er == nil:
			w.replace(q)
		case x < 0.06:
			q.rv++ // ARC's pod is never replaced under its name here
		case x < 0.09:
			q.rv++
		}
	}
	if _, res := w.lookup(p); res != fleet.Deleted {
		return res, nil
	}
	if w.chance(Refuse, 0.02) {
		w.top().mustFail = "pre-flight refused"
		return "", fmt.Errorf("delete pod %s/%s (dry run): %w", p.Namespace, p.Name, errAdmission)
	}
	return fleet.Deleted, nil
}

// DeletePod deletes the pod with its UID and resourceVersion preconditions.
func (k kube) DeletePod(ctx context.Context, p fleet.Pod) (fleet.Result, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.Break == DeferDeletes {
		// The broken reaper of before: every pod delete waits until the
		// GitHub work of all candidates is done.
		sc := w.top()
		sc.deferred = append(sc.deferred, p)
		return fleet.Deleted, nil
	}
	return w.deletePod(p), nil
}

// deletePod judges and carries out one pod delete.
func (w *world) deletePod(p fleet.Pod) fleet.Result {
	q, res := w.lookup(p)
	if q == nil {
		return res
	}
	w.judgePodDelete(q)
	sc := w.top()
	sc.hit(fleet.PodMarkKey(q.uid), w, q)
	if q.er != nil {
		w.violate(WrongTarget, "pod %s deleted directly: ARC owns it, and its EphemeralRunner %s stays", q.key(), q.er.key())
	}
	if w.cfg.Break == LyingDeletes {
		sc.wrote("Pod "+q.key(), false)
		return fleet.Deleted
	}
	sc.wrote("Pod "+q.key(), true)
	sc.podDeletes++
	sc.acted[fleet.PodMarkKey(q.uid)] = true
	w.groupReaped(q, sc)
	if l := w.leaks[fleet.PodMarkKey(q.uid)]; l != nil {
		l.cleaned, l.cleanAt = true, w.now
	}
	w.kill(q)
	return fleet.Deleted
}

func (k kube) DeleteServiceAccount(ctx context.Context, namespace, name string) (fleet.Result, error) {
	return fleet.AlreadyGone, nil
}

func (d dryKube) DeleteServiceAccount(ctx context.Context, namespace, name string) (fleet.Result, error) {
	return fleet.AlreadyGone, nil
}

func (k kube) RecordEvent(ctx context.Context, p fleet.Pod, reason, message string) error {
	return nil
}

// judgePodDelete checks a pod delete against the truth: the first three
// invariants.
func (w *world) judgePodDelete(q *kpod) {
	if !q.managed() {
		w.violate(WrongTarget, "pod %s deleted: another namespace or not matched by the selector", q.key())
		return
	}
	if q.terminal() {
		return
	}
	if r := w.reg(q); r != nil && r.Busy {
		w.killedSaidBusy(fleet.PodMarkKey(q.uid), q, "pod %s deleted while its runner %d runs a job (%s)", q.key(), r.ID, describeJob(q))
		return
	}
	if _, since, ok := w.podLeak(q); !ok {
		why := "a healthy runner"
		switch {
		case q.neverStart && q.startWait.Unschedulable() && !w.cfg.UnschedulableOptIn:
			why = "an Unschedulable pod, which the reaper is not told to delete"
		case q.neverStart:
			why = "a pod waiting to start, before its start deadline"
		case q.stamped && w.now.Before(since):
			why = "a stamped pod younger than the stamp's max age"
		}
		w.violate(HealthyKilled, "pod %s deleted: %s (%s)", q.key(), why, w.describe(q))
	}
}

// describe is the pod's truth, for a violation's detail.
func (w *world) describe(p *kpod) string {
	reg := "no registration"
	if r := w.reg(p); r != nil {
		reg = fmt.Sprintf("registration %d %s busy=%v listed-idle=%v", r.ID, r.Status, r.Busy, r.ListedIdle)
	}
	return fmt.Sprintf("phase %s, running %v, started %s, %s, stamped %v, removed %s, now %s",
		p.phase, p.running, p.started.Format("15:04:05"), reg, p.stamped, p.removedAt.Format("15:04:05"), w.now.Format("15:04:05"))
}

// dryKube is the world's writes sent as server-side dry runs: the
// reaper's pre-flight, which answers as the write would and changes
// nothing.
type dryKube struct{ k kube }

// DryRun is the world's pre-flight.
func (k kube) DryRun() fleet.Writes { return dryKube{k} }
