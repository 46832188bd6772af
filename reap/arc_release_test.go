package reap

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
)

// arcPod is a runner pod that ARC's EphemeralRunner controls, with that
// EphemeralRunner observed (runner id 7 unless the registration says).
func arcPod(v fleet.Verdict, name string, regID int64) reconcile.Candidate {
	c := cand(v, name, regID)
	er := &fleet.EphemeralRunner{Namespace: "ns", Name: name + "-er", UID: "u-" + name + "-er", ResourceVersion: "5",
		ScopeKey: scope.Key(), RunnerID: 7, Finalizers: []string{"ephemeralrunner.actions.github.com/finalizer", fleet.ARCRegistrationFinalizer}}
	if regID != 0 {
		er.RunnerID = regID
	}
	c.Pod.Owner = &fleet.Owner{APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind, Name: er.Name, UID: er.UID}
	c.OwnerRunner, c.RunnerID = er, er.RunnerID
	return c
}

// The act on an ARC runner ends with ARC able to finish: the registration
// goes first (GitHub's 422 still protects a job), then the EphemeralRunner,
// as observed, then ARC's registration finalizer, and only with proof that
// the registration is gone. Without that proof, or for a write that would
// change nothing, the finalizer is left to ARC.
func TestReapReleasesARCRegistrationFinalizer(t *testing.T) {
	stuck := func(absent bool) reconcile.Candidate {
		c := cand(fleet.Ghost, "stuck", 0)
		c.Verdict, c.RegistrationAbsent, c.RunnerID = fleet.ARCStuckDeleting, absent, 9
		c.EphemeralRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: "stuck", UID: "u-stuck", ResourceVersion: "3", RunnerID: 9, ScopeKey: scope.Key(),
			DeletingSince: fleet.StampOf(time.Now().Add(-time.Hour)), Finalizers: []string{fleet.ARCRegistrationFinalizer}}
		return c
	}
	tests := []struct {
		name       string
		c          reconcile.Candidate
		ghResult   fleet.Result
		releaseErr error
		want       fleet.Result
		wantWrites []string
		wantFinal  fleet.Result
		// found answers the re-check by name; wantFind, when set, are the
		// re-checks made.
		found    map[string]*fleet.Registration
		findErr  map[string]error
		wantFind []string
		// wantErr is in the outcome's error, which says why ARC keeps its
		// finalizer where the look-up gave no proof.
		wantErr string
	}{
		{
			name: "offline zombie: registration, EphemeralRunner, finalizer", c: arcPod(fleet.Zombie, "z", 7),
			want: fleet.Deleted, wantFinal: fleet.Deleted,
			wantWrites: []string{"gh:org:acme:7", "er:z-er", "release:z-er"},
		},
		{
			name: "registration 404 after a complete list: gone all the same", c: arcPod(fleet.Zombie, "z", 7), ghResult: fleet.AlreadyGone,
			want: fleet.Deleted, wantFinal: fleet.Deleted,
			wantWrites: []string{"gh:org:acme:7", "er:z-er", "release:z-er"},
		},
		{
			name: "busy: GitHub's 422 spares it, nothing else is written", c: arcPod(fleet.Zombie, "z", 7), ghResult: fleet.Busy,
			want: fleet.SparedBusy, wantWrites: []string{"gh:org:acme:7"},
		},
		{
			name: "registration gone from the complete list: re-checked by name, then released",
			c: func() reconcile.Candidate {
				c := arcPod(fleet.Zombie, "g", 0)
				c.Gone, c.RegistrationAbsent = true, true
				return c
			}(),
			want: fleet.Deleted, wantFinal: fleet.Deleted,
			wantWrites: []string{"er:g-er", "release:g-er"},
		},
		{
			name: "terminal with no proof of the registration's fate: ARC keeps its finalizer",
			c:    arcPod(fleet.Terminal, "t", 0),
			want: fleet.Deleted, wantWrites: []string{"er:t-er"},
		},
		{
			name: "a release that fails fails the action", c: arcPod(fleet.Zombie, "z", 7), releaseErr: errors.New("forbidden"),
			want: fleet.Failed, wantFinal: "",
			wantWrites: []string{"gh:org:acme:7", "er:z-er", "release:z-er"},
		},
		{
			name: "owner already deleting: nothing is written, nothing reported done",
			c: func() reconcile.Candidate {
				c := arcPod(fleet.Zombie, "z", 7)
				c.OwnerRunner.DeletingSince = fleet.StampOf(time.Now())
				return c
			}(),
			want: fleet.AlreadyDeleting,
		},
		{
			name: "EphemeralRunner of another scope: its runner may be busy there, ARC keeps its finalizer",
			c: func() reconcile.Candidate {
				c := arcPod(fleet.Zombie, "g", 0)
				c.Gone, c.RegistrationAbsent = true, true
				c.OwnerRunner.ScopeKey = "org:other"
				return c
			}(),
			want: fleet.Deleted, wantWrites: []string{"er:g-er"},
		},
		{
			name: "a registration that is not the EphemeralRunner's runner proves nothing about it",
			c: func() reconcile.Candidate {
				c := arcPod(fleet.Zombie, "z", 7)
				c.OwnerRunner.RunnerID = 8
				return c
			}(),
			want: fleet.Deleted, wantWrites: []string{"gh:org:acme:7", "er:z-er"},
		},
		{
			name: "stuck deleting with its pod: re-checked by name, then only its finalizer",
			c: func() reconcile.Candidate {
				c := stuck(true)
				c.Pod = &fleet.Pod{Namespace: "ns", Name: "stuck", UID: "u-stuck-pod", RunnerName: "stuck"}
				return c
			}(),
			want: fleet.Deleted, wantWrites: []string{"release:stuck"}, wantFind: []string{"gh-find:stuck"},
		},
		{
			name: "stuck deleting with its pod, re-check finds the runner: left alone",
			c: func() reconcile.Candidate {
				c := stuck(true)
				c.Pod = &fleet.Pod{Namespace: "ns", Name: "stuck", UID: "u-stuck-pod", RunnerName: "stuck"}
				return c
			}(),
			found: map[string]*fleet.Registration{"stuck": {ID: 9, Name: "stuck", Busy: true}},
			want:  fleet.SparedBusy,
		},
		{
			name: "no registration finalizer observed: nothing to release, no request",
			c: func() reconcile.Candidate {
				c := arcPod(fleet.Zombie, "z", 7)
				c.OwnerRunner.Finalizers = []string{"ephemeralrunner.actions.github.com/finalizer"}
				return c
			}(),
			want: fleet.Deleted, wantWrites: []string{"gh:org:acme:7", "er:z-er"},
		},
		{
			name: "stuck deleting, registration proven gone: only its finalizer", c: stuck(true),
			want: fleet.Deleted, wantWrites: []string{"release:stuck"},
		},
		{
			name: "stuck deleting, no proof: reported only", c: stuck(false),
			want: fleet.Reported,
		},
		{
			name: "registration unlisted by a list that moved: the re-check by name proves it gone, then released",
			c: func() reconcile.Candidate {
				c := arcPod(fleet.Zombie, "g", 0)
				c.Gone, c.AbsenceUnproven, c.Pod.RunnerName = true, true, "g-er"
				return c
			}(),
			want: fleet.Deleted, wantFinal: fleet.Deleted,
			wantWrites: []string{"er:g-er", "release:g-er"}, wantFind: []string{"gh-find:g-er"},
		},
		{
			name: "terminal, registration unlisted by a list that moved: looked up by name, not found, released",
			c:    unproven(arcPod(fleet.Terminal, "t", 0)),
			want: fleet.Deleted, wantFinal: fleet.Deleted,
			wantWrites: []string{"er:t-er", "release:t-er"}, wantFind: []string{"gh-find:t-er"},
		},
		{
			name:  "terminal, list moved, the look-up finds a runner of another id: the EphemeralRunner goes, ARC keeps its finalizer",
			c:     unproven(arcPod(fleet.Terminal, "t", 0)),
			found: map[string]*fleet.Registration{"t-er": {ID: 8, Name: "t-er"}}, wantErr: "left to ARC: runner \"t-er\" is registered with id 8",
			want: fleet.Deleted, wantWrites: []string{"er:t-er"}, wantFind: []string{"gh-find:t-er"},
		},
		{
			name:  "terminal, list moved, the look-up finds the runner busy: spared, nothing written",
			c:     unproven(arcPod(fleet.Terminal, "t", 0)),
			found: map[string]*fleet.Registration{"t-er": {ID: 7, Name: "t-er", Busy: true}},
			want:  fleet.SparedBusy, wantFind: []string{"gh-find:t-er"},
		},
		{
			name:  "terminal, list moved, the look-up finds its registration idle: deleted first, then the EphemeralRunner, then released",
			c:     unproven(arcPod(fleet.Terminal, "t", 0)),
			found: map[string]*fleet.Registration{"t-er": {ID: 7, Name: "t-er"}},
			want:  fleet.Deleted, wantFinal: fleet.Deleted,
			wantWrites: []string{"gh:org:acme:7", "er:t-er", "release:t-er"}, wantFind: []string{"gh-find:t-er"},
		},
		{
			name:     "terminal, list moved, the look-up finds its registration, which answers 422: spared",
			c:        unproven(arcPod(fleet.Terminal, "t", 0)),
			found:    map[string]*fleet.Registration{"t-er": {ID: 7, Name: "t-er"}},
			ghResult: fleet.Busy,
			want:     fleet.SparedBusy, wantWrites: []string{"gh:org:acme:7"}, wantFind: []string{"gh-find:t-er"},
		},
		{
			name: "terminal, list moved, its pod says another runner name: no look-up proves anything, ARC keeps its finalizer",
			c: func() reconcile.Candidate {
				c := unproven(arcPod(fleet.Terminal, "t", 0))
				c.Pod.RunnerName = "someone-else"
				return c
			}(),
			want: fleet.Deleted, wantWrites: []string{"er:t-er"}, wantFind: []string{},
		},
		{
			name: "zombie gone from a moved list, its pod says another runner name: re-checked by that name, ARC keeps its finalizer",
			c: func() reconcile.Candidate {
				c := arcPod(fleet.Zombie, "g", 0)
				c.Gone, c.AbsenceUnproven, c.Pod.RunnerName = true, true, "someone-else"
				return c
			}(),
			want: fleet.Deleted, wantWrites: []string{"er:g-er"}, wantFind: []string{"gh-find:someone-else"},
		},
		{
			name:    "terminal, list moved, the look-up fails: the EphemeralRunner goes, ARC keeps its finalizer",
			c:       unproven(arcPod(fleet.Terminal, "t", 0)),
			findErr: map[string]error{"t-er": errors.New("502 Bad Gateway")}, wantErr: "left to ARC: look up runner \"t-er\"",
			want: fleet.Deleted, wantWrites: []string{"er:t-er"}, wantFind: []string{"gh-find:t-er"},
		},
		{
			name: "stuck deleting, list moved: looked up by name, not found, only its finalizer", c: unproven(stuck(false)),
			want: fleet.Deleted, wantWrites: []string{"release:stuck"}, wantFind: []string{"gh-find:stuck"},
		},
		{
			name: "stuck deleting, list moved, the look-up finds the runner: left alone", c: unproven(stuck(false)),
			found: map[string]*fleet.Registration{"stuck": {ID: 9, Name: "stuck"}},
			want:  fleet.SkippedRegistered, wantFind: []string{"gh-find:stuck"},
		},
		{
			name: "stuck deleting, list moved, the look-up fails: failed, nothing written", c: unproven(stuck(false)),
			findErr: map[string]error{"stuck": errors.New("502 Bad Gateway")},
			want:    fleet.Failed, wantFind: []string{"gh-find:stuck"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{releaseErr: tt.releaseErr, ghResult: map[int64]fleet.Result{}, found: tt.found, findErr: tt.findErr}
			if tt.ghResult != "" {
				rec.ghResult[7] = tt.ghResult
			}
			outs := New(rec, rec, opts()).Reap(context.Background(), 10, []reconcile.Candidate{tt.c})
			assert.Equal(t, tt.want, outs[0].Result, "err: %v", outs[0].Err)
			assert.Equal(t, tt.wantWrites, withoutEvents(rec.writes()))
			assert.Equal(t, tt.wantFinal, outs[0].Finalizer)
			if tt.wantFind != nil {
				assert.Equal(t, tt.wantFind, append([]string{}, rec.finds()...))
			}
			if tt.wantErr != "" {
				assert.ErrorContains(t, outs[0].Err, tt.wantErr)
			}
		})
	}
}

// unproven is a candidate whose registration a list that moved did not
// list: its absence is unproven until a look-up by name.
func unproven(c reconcile.Candidate) reconcile.Candidate {
	c.RegistrationAbsent, c.AbsenceUnproven = false, true
	return c
}

// The release is proved in the pre-flight too: a reaper that may not patch
// EphemeralRunners deletes no registration it could not follow through.
func TestReapPreflightProvesTheRelease(t *testing.T) {
	// Only the release is refused: the EphemeralRunner's delete would be
	// allowed.
	rec := &recorder{checkErrWhat: map[string]error{
		"release:z-er": errors.New(`ephemeralrunners.actions.github.com "z-er" is forbidden: cannot patch`)}}
	outs := New(rec, rec, opts()).Reap(context.Background(), 10, []reconcile.Candidate{arcPod(fleet.Zombie, "z", 7)})
	assert.Equal(t, fleet.Failed, outs[0].Result)
	assert.ErrorContains(t, outs[0].Err, "cannot patch")
	assert.Empty(t, rec.writes(), "no registration deleted, nothing written")
}

func withoutEvents(ws []string) []string {
	var out []string
	for _, w := range ws {
		if len(w) > 6 && (w[:6] == "event:" || (len(w) > 9 && w[:9] == "er-event:")) {
			continue
		}
		out = append(out, w)
	}
	return out
}

// finds are the re-checks by name the recorder was asked.
func (r *recorder) finds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.calls {
		if len(c) > 8 && c[:8] == "gh-find:" {
			out = append(out, "gh-find:"+c[strings.LastIndex(c, ":")+1:])
		}
	}
	return out
}

// What an EphemeralRunner stuck deleting gets: ARC's registration finalizer
// released on proof, ARC's finalizers removed only where the operator
// allows it and the registration is not known to be gone, and in every
// other case a report (another controller's finalizer, a registration
// finalizer released already, a pod and a registration both still there).
// REAPER_ARC_REMOVE_FINALIZERS never reaches another controller's
// finalizer (kube's RemoveFinalizers keeps it).
func TestStuckDeletingAction(t *testing.T) {
	stuck := func(absent, reportOnly bool, fins ...string) reconcile.Candidate {
		c := cand(fleet.Ghost, "stuck", 0)
		c.Verdict, c.RegistrationAbsent, c.ReportOnly, c.RunnerID = fleet.ARCStuckDeleting, absent, reportOnly, 9
		c.EphemeralRunner = &fleet.EphemeralRunner{Namespace: "ns", Name: "stuck", UID: "u-stuck", ResourceVersion: "3", RunnerID: 9, ScopeKey: scope.Key(),
			DeletingSince: fleet.StampOf(time.Now().Add(-time.Hour)), Finalizers: fins}
		return c
	}
	const keep = "example.com/keep"
	for _, tc := range []struct {
		name   string
		c      reconcile.Candidate
		remove bool
		want   Action
	}{
		{"registration proven gone: released", stuck(true, false, fleet.ARCFinalizer, fleet.ARCRegistrationFinalizer), true, ReleaseRegistration},
		{"not known gone, removal allowed: ARC's finalizers removed", stuck(false, false, fleet.ARCFinalizer, fleet.ARCRegistrationFinalizer, keep), true, RemoveFinalizers},
		{"not known gone, removal not allowed: reported", stuck(false, false, fleet.ARCFinalizer, fleet.ARCRegistrationFinalizer), false, Report},
		{"registration finalizer released already, ARC's other and a foreign one left: reported, even with removal allowed", stuck(true, false, fleet.ARCFinalizer, keep), true, Report},
		{"only another controller's finalizer: reported", stuck(false, false, keep), true, Report},
		{"its pod and registration still there: reported", stuck(false, true, fleet.ARCFinalizer, fleet.ARCRegistrationFinalizer), true, Report},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := opts()
			o.RemoveFinalizers = tc.remove
			rec := &recorder{}
			r := New(rec, rec, o)
			assert.Equal(t, tc.want, r.Action(tc.c))
			outs := r.Reap(context.Background(), 10, []reconcile.Candidate{tc.c})
			if tc.want == Report {
				assert.Equal(t, fleet.Reported, outs[0].Result)
				assert.Empty(t, withoutEvents(rec.writes()), "a report writes nothing")
			}
		})
	}
}
