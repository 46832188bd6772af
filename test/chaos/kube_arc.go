package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// The ARC side of the Kubernetes fakes: the EphemeralRunner list and the
// writes on EphemeralRunners, with the API server's preconditions and
// answers (kube/arc.go's), each real write judged against the truth when it
// is made.

// ListEphemeralRunners lists every EphemeralRunner of the runners
// namespace.
func (k kube) ListEphemeralRunners(ctx context.Context, _ []fleet.Pod) ([]fleet.EphemeralRunner, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := w.top()
	if sc.erListFault {
		sc.mustFail = "ephemeralrunner list failed"
		return nil, errors.New("list ephemeralrunners in runners: the server is currently unable to handle the request")
	}
	out := make([]fleet.EphemeralRunner, 0, len(w.arc.ers))
	for _, e := range w.arc.ers {
		out = append(out, e.view())
	}
	return out, nil
}

// erLookup finds the EphemeralRunner a write names and checks its
// preconditions: the UID, and the resourceVersion when holdRV.
func (w *world) erLookup(ns, name, uid, rv string, holdRV bool) (*ker, fleet.Result) {
	e := w.arc.byKey[ns+"/"+name]
	switch {
	case e == nil:
		return nil, fleet.AlreadyGone
	case e.uid != uid || holdRV && strconv.Itoa(e.rv) != rv:
		return nil, fleet.Changed
	}
	return e, fleet.Deleted
}

// holdRV says whether a delete holds to the resourceVersion observed; the
// broken DeleteByUIDOnly holds to the UID alone, as the owner's delete did
// before the EphemeralRunner was observed.
func (w *world) holdRV() bool { return w.cfg.Break != DeleteByUIDOnly }

// wrote records whether a real write changed anything, for the no-op
// invariant; a write that changed something once in the sweep counts as
// changing.
func (sc *sweepCtx) wrote(key string, changed bool) {
	if sc.writes == nil {
		sc.writes = map[string]bool{}
	}
	sc.writes[key] = sc.writes[key] || changed
}

// deleteER deletes an EphemeralRunner that passed its preconditions: it
// starts deleting, held by its finalizers. One deleting already is
// answered as the API server does (200, the object as it is) and nothing
// changes.
func (w *world) deleteER(e *ker) fleet.Result {
	sc := w.top()
	if !e.deletingSince.IsZero() {
		sc.wrote(e.object(), false)
		return fleet.Deleted
	}
	w.judgeERWrite(e, "deleted")
	sc.acted[e.actKey()] = true
	if e.podAlive() {
		sc.podDeletes++
		if l := w.leaks[fleet.PodMarkKey(e.pod.uid)]; l != nil {
			l.cleaned, l.cleanAt = true, w.now
		}
	}
	e.deletingSince = w.now
	e.rv++
	sc.wrote(e.object(), true)
	w.touch(e)
	return fleet.Deleted
}

// judgeERWrite checks a write that ends an EphemeralRunner (its delete,
// the release of its registration finalizer, the removal of its
// finalizers) against the truth. Each is called as the write is made.
func (w *world) judgeERWrite(e *ker, what string) {
	var p *kpod
	if e.podAlive() {
		p = e.pod
	}
	w.top().hit(e.actKey(), w, p)
	if e.podAlive() {
		q := e.pod
		if !q.managed() {
			w.violate(WrongTarget, "EphemeralRunner %s %s: its pod is another namespace's or not selected", e.key(), what)
			return
		}
		if r := w.reg(q); r != nil && r.Busy {
			w.killedSaidBusy(e.actKey(), q, "EphemeralRunner %s %s while its runner %d runs a job (%s)", e.key(), what, r.ID, describeJob(q))
			return
		}
		if r := w.erReg(e); r != nil && r.Busy {
			w.killedSaidBusy(e.actKey(), q, "EphemeralRunner %s %s while its registration %d runs a job (%s)", e.key(), what, r.ID, describeJob(q))
			return
		}
		if q.terminal() {
			return
		}
		if _, since, ok := w.podLeak(q); !ok && e.deletingSince.IsZero() {
			why := "a healthy runner"
			if q.stamped && w.now.Before(since) {
				why = "a stamped pod younger than the stamp's max age"
			}
			w.violate(HealthyKilled, "EphemeralRunner %s %s: %s (%s)", e.key(), what, why, w.describe(q))
		}
		return
	}
	if r := w.erReg(e); r != nil && r.Busy {
		w.killedSaidBusy(e.actKey(), e.pod, "EphemeralRunner %s %s while its registration %d runs a job", e.key(), what, r.ID)
	}
}

// arcRace is what may happen to an EphemeralRunner between the sweep's
// list and its write (the hazard KubeRace): the listener writes a job's
// fields on its status, or someone starts deleting it.
func (w *world) arcRace(ns, name string) {
	e := w.arc.byKey[ns+"/"+name]
	if e == nil || !w.cfg.Hazards.Has(KubeRace) {
		return
	}
	switch x := w.rng.Float64(); {
	case x < 0.03:
		e.rv++
	case x < 0.08 && e.deletingSince.IsZero():
		e.deletingSince = w.now
		e.rv++
	}
}

func (w *world) refuse(what string) error {
	if w.chance(Refuse, 0.02) {
		w.top().mustFail = "pre-flight refused"
		return fmt.Errorf("%s (dry run): %w", what, errAdmission)
	}
	return nil
}

// DeleteEphemeralRunner deletes with the UID and resourceVersion
// preconditions.
func (k kube) DeleteEphemeralRunner(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	e, res := w.erLookup(er.Namespace, er.Name, er.UID, er.ResourceVersion, w.holdRV())
	if e == nil {
		return res, nil
	}
	return w.deleteER(e), nil
}

func (d dryKube) DeleteEphemeralRunner(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	w := d.k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.arcRace(er.Namespace, er.Name)
	if _, res := w.erLookup(er.Namespace, er.Name, er.UID, er.ResourceVersion, w.holdRV()); res != fleet.Deleted {
		return res, nil
	}
	if err := w.refuse("delete ephemeralrunner " + er.Namespace + "/" + er.Name); err != nil {
		return "", err
	}
	return fleet.Deleted, nil
}

// DeleteOwner deletes the ARC owner of a pod by the owner reference's UID
// alone.
func (k kube) DeleteOwner(ctx context.Context, namespace string, o fleet.Owner) (fleet.Result, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if o.Kind != fleet.EphemeralRunnerKind {
		w.violate(WrongTarget, "owner %s %s/%s deleted: the world has no such object", o.Kind, namespace, o.Name)
		return "", errors.New("no such owner kind")
	}
	e, res := w.erLookup(namespace, o.Name, o.UID, "", false)
	if e == nil {
		return res, nil
	}
	return w.deleteER(e), nil
}

func (d dryKube) DeleteOwner(ctx context.Context, namespace string, o fleet.Owner) (fleet.Result, error) {
	w := d.k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.arcRace(namespace, o.Name)
	if _, res := w.erLookup(namespace, o.Name, o.UID, "", false); res != fleet.Deleted {
		return res, nil
	}
	if err := w.refuse("delete owner " + namespace + "/" + o.Name); err != nil {
		return "", err
	}
	return fleet.Deleted, nil
}

// RemoveFinalizers clears every finalizer of a deleting EphemeralRunner
// held to its resourceVersion: it goes at once, and the garbage collector
// takes its pod and its secret.
func (k kube) RemoveFinalizers(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if er.DeletingSince.IsZero() {
		return "", fmt.Errorf("remove finalizers of ephemeralrunner %s/%s: it was not being deleted when observed, refusing", er.Namespace, er.Name)
	}
	e, res := w.erLookup(er.Namespace, er.Name, er.UID, er.ResourceVersion, true)
	if e == nil {
		return res, nil
	}
	w.judgeERWrite(e, "had its finalizers removed")
	sc := w.top()
	sc.acted[e.actKey()] = true
	sc.wrote(e.object(), len(e.finalizers) > 0)
	w.touch(e)
	e.finalizers = nil
	if e.podAlive() {
		w.kill(e.pod)
	}
	e.secret = false
	w.removeER(e)
	return fleet.Deleted, nil
}

func (d dryKube) RemoveFinalizers(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	w := d.k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if er.DeletingSince.IsZero() {
		return "", fmt.Errorf("remove finalizers of ephemeralrunner %s/%s (dry run): it was not being deleted when observed, refusing", er.Namespace, er.Name)
	}
	_, res := w.erLookup(er.Namespace, er.Name, er.UID, er.ResourceVersion, true)
	return res, nil
}

// release is kube.ReleaseRegistration's reading of the object: gone or
// without the finalizer is AlreadyGone, another UID Changed, and a live
// one refused unless dry.
func (w *world) release(er fleet.EphemeralRunner, dry bool) (*ker, fleet.Result, error) {
	e := w.arc.byKey[er.Namespace+"/"+er.Name]
	switch {
	case e == nil:
		return nil, fleet.AlreadyGone, nil
	case e.uid != er.UID:
		return nil, fleet.Changed, nil
	case e.deletingSince.IsZero() && !dry:
		return nil, "", fmt.Errorf("release the registration finalizer of ephemeralrunner %s/%s: it is not being deleted, refusing", er.Namespace, er.Name)
	case !e.has(fleet.ARCRegistrationFinalizer):
		return nil, fleet.AlreadyGone, nil
	}
	return e, fleet.Deleted, nil
}

// ReleaseRegistration removes ARC's registration finalizer and no other.
// Released while the registration runs a job, it lets ARC delete the pod
// under the job.
func (k kube) ReleaseRegistration(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	w := k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	e, res, err := w.release(er, false)
	if e == nil {
		return res, err
	}
	sc := w.top()
	if w.cfg.Break == ReleaseNothing {
		// Today's order of before: the reaper believes it released.
		sc.wrote("release "+e.object(), false)
		return fleet.Deleted, nil
	}
	w.judgeERWrite(e, "released (its registration finalizer removed)")
	sc.acted[e.actKey()] = true
	e.drop(fleet.ARCRegistrationFinalizer)
	sc.wrote("release "+e.object(), true)
	w.touch(e)
	return fleet.Deleted, nil
}

func (d dryKube) ReleaseRegistration(ctx context.Context, er fleet.EphemeralRunner) (fleet.Result, error) {
	w := d.k.w
	w.mu.Lock()
	defer w.mu.Unlock()
	_, res, err := w.release(er, true)
	if err != nil || res != fleet.Deleted {
		return res, err
	}
	if err := w.refuse("release the registration finalizer of ephemeralrunner " + er.Namespace + "/" + er.Name); err != nil {
		return "", err
	}
	return fleet.Deleted, nil
}

func (k kube) RecordEphemeralRunnerEvent(context.Context, fleet.EphemeralRunner, string, string) error {
	return nil
}
