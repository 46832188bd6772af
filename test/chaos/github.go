package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

const (
	simToken = "chaos-token"
	// simBase is where the client believes GitHub is; no socket is ever
	// opened, the transport calls the simulator's handler directly.
	simBase = "http://127.0.0.1/"
)

// transport serves the real GitHub client's requests by calling the
// simulator's handler in process: deterministic and fast, with GitHub's
// pagination, ETags, 422s, faults and rate limits as the simulator gives
// them. It sees every request, so it judges every registration delete
// against the truth, and it is where the world changes under a sweep
// between two GitHub calls (pages shifting, a runner registering between
// its re-check and its pod's delete).
type transport struct {
	w       *world
	handler http.Handler
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) { //nolint:gocyclo // each GitHub call's check and change of the world, under one lock
	w := t.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if req.Body != nil {
		_ = req.Body.Close()
	}
	scope, id, kind := parsePath(req.Method, req.URL.Path)
	name := req.URL.Query().Get("name")
	page, _ := strconv.Atoi(req.URL.Query().Get("page"))
	if page == 0 {
		page = 1
	}
	sc := w.top()
	pageList := kind == ghsim.EndpointList && name == ""
	strict := sc.org.strict
	if strict != nil && (!pageList || scope != strict.scope) {
		strict = nil
	}
	if strict != nil && !strict.before(page) {
		return notSent(req), nil
	}
	w.busyRequest(sc, pageList && scope == busyScope)

	// The re-check race: the runner whose absence was just confirmed
	// registers and takes a job before the next GitHub call.
	if n := w.raceArmed; n != "" {
		w.raceArmed = ""
		// Only a bare pod's runner: an ARC runner's JIT config names
		// one registration, which it cannot make again under a new id.
		if p := w.byKey[nsRunners+"/"+n]; p != nil && p.regID == 0 && p.running && !p.terminal() && p.er == nil {
			w.register(p)
			w.landJob(p)
			sc.raced = append(sc.raced, p.uid)
		}
	}

	switch {
	case kind == ghsim.EndpointJob || kind == ghsim.EndpointRunJobs:
		// The job guard reads the job a runner's evidence names, in
		// whatever repository that is: a read, never a write.
		if req.Method != http.MethodGet {
			w.violate(WrongTarget, "%s %s: a write to a job", req.Method, req.URL.Path)
		}
	case scope != "" && !isConfigured(scope):
		w.violate(WrongTarget, "%s %s: a scope that is not configured", req.Method, req.URL.Path)
	}
	var before *ghsim.Runner
	if kind == ghsim.EndpointDelete {
		before = w.judgeRegistrationDelete(scope, id)
	}

	rec := httptest.NewRecorder()
	t.handler.ServeHTTP(rec, req)
	resp := rec.Result()
	resp.Request = req
	if strict != nil {
		strict.after(resp)
	}
	if pageList && scope == busyScope && page == 1 && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusNotModified) {
		sc.org.pages = lastPage(resp.Header.Get("Link"))
	}

	switch {
	case kind == ghsim.EndpointDelete:
		if armed := sc.deleteFault; armed && resp.StatusCode >= 500 {
			sc.deleteFault = false
			// A terminal pod goes on without its registration; anything
			// else fails its action.
			// ARC's terminal pods are not spared it: ARC may have
			// given their owner a new pod on the same registration.
			if p := w.owner[id]; p == nil || p.gone || !p.terminal() || p.er != nil {
				sc.mustFail = "registration delete answered " + resp.Status
			}
		}
		if resp.StatusCode == http.StatusNoContent && before != nil {
			w.hitRegistration(sc, scope, id)
			if before.Busy {
				// The simulator answers a busy runner's DELETE 204
				// only under its Lie (jobs.go).
				w.killedByDelete(sc, scope, id, before.Name)
			}
			key := fleet.RegistrationMarkKey(scope, id)
			if p := w.owner[id]; p != nil && !p.gone {
				key = fleet.PodMarkKey(p.uid)
				p.regID, p.removedAt, p.regReaped = 0, w.now, true
				delete(w.owner, id)
			} else if e := w.erOfRunner(scope, id); e != nil {
				key = fleet.EphemeralRunnerMarkKey(e.uid)
			} else if l := w.leaks[key]; l != nil {
				l.cleaned, l.cleanAt = true, w.now
			}
			sc.acted[key] = true
		}
	case kind == ghsim.EndpointList && name != "":
		w.stats.BusyOrg.AllLookups++
		if scope == busyScope {
			w.stats.BusyOrg.Lookups++
		}
		// A by-name re-check that found nothing arms the race.
		if resp.StatusCode == http.StatusOK && w.cfg.Hazards.Has(RecheckRace) && w.rng.Float64() < 0.5 {
			if p := w.byKey[nsRunners+"/"+name]; p != nil && p.regID == 0 && p.er == nil {
				w.raceArmed = name
			}
		}
	case kind == ghsim.EndpointList:
		if f, ok := sc.listFault[scope]; ok && page == 1 {
			delete(sc.listFault, scope)
			switch f {
			case faultRate:
				sc.noteFault(scope)
				sc.rateLimited = true
			case faultShift:
				// Movement, not a broken answer: the list is
				// served as moved.
				if w.shift(scope) {
					sc.shifted = true
					w.stats.Shifts++
				}
			case faultShort:
				sc.noteFault(scope)
				sc.shortPage = true
			case faultRepeat:
				sc.noteFault(scope)
				sc.repeatPage = true
				w.stats.Repeats++
			default:
				sc.noteFault(scope)
				sc.skipFault = true
			}
		}
	}
	return resp, nil
}

// lastPage is the page number a Link header gives as rel="last"; 1 when
// it gives none (a list of one page).
func lastPage(link string) int {
	for _, part := range strings.Split(link, ",") {
		target, rel, _ := strings.Cut(part, ";")
		if !strings.Contains(rel, `rel="last"`) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil {
			return 1
		}
		n, _ := strconv.Atoi(u.Query().Get("page"))
		return max(n, 1)
	}
	return 1
}

// shift removes a registration from the first page and adds one at the
// end, so that one runner slides from page 2 to page 1 unseen: total_count,
// the pages and the items all still agree.
func (w *world) shift(scope string) bool {
	regs := w.sim.Runners(scope)
	if len(regs) <= 100 {
		return false
	}
	for _, r := range regs[:100] {
		// Another team's runner, a busy org's too (which sit on page 1
		// once its first runners have come and gone).
		if strings.HasPrefix(r.Name, "theirs-") || strings.HasPrefix(r.Name, busyPrefix) {
			w.sim.RemoveRunner(scope, r.ID)
			w.busyGone(r.ID)
			w.addTheirs(scope)
			w.top().slid = append(w.top().slid, slid{scope: scope, id: regs[100].ID})
			return true
		}
	}
	return false
}

// judgeRegistrationDelete checks a registration delete against the truth
// before it is served, and returns the registration as it was.
func (w *world) judgeRegistrationDelete(scope string, id int64) *ghsim.Runner {
	var before *ghsim.Runner
	for _, r := range w.sim.Runners(scope) {
		if r.ID == id {
			before = &r
			break
		}
	}
	if before == nil {
		return nil
	}
	if !strings.HasPrefix(before.Name, ourPrefix) {
		w.violate(WrongTarget, "registration %d %q of another team deleted in %s", id, before.Name, scope)
		return before
	}
	if p := w.owner[id]; p != nil && !p.gone && !p.terminal() && !before.Busy {
		if _, _, ok := w.podLeak(p); !ok {
			w.violate(HealthyKilled, "registration %d of healthy runner pod %s deleted", id, p.key())
		}
	}
	return before
}

// parsePath reads the scope, runner id and endpoint from a request path.
func parsePath(method, path string) (scope string, id int64, endpoint string) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(seg) >= 3 && seg[0] == "orgs":
		scope, rest = "org:"+seg[1], seg[2:]
	case len(seg) >= 4 && seg[0] == "repos":
		scope, rest = "repo:"+seg[1]+"/"+seg[2], seg[3:]
	case len(seg) >= 3 && seg[0] == "enterprises":
		scope, rest = "enterprise:"+seg[1], seg[2:]
	default:
		return "", 0, ""
	}
	scope = strings.ToLower(scope)
	switch {
	case strings.HasPrefix(scope, "repo:") && len(rest) == 3 && rest[0] == "actions" && rest[1] == "jobs":
		return scope, 0, ghsim.EndpointJob
	case strings.HasPrefix(scope, "repo:") && len(rest) == 4 && rest[0] == "actions" && rest[1] == "runs" && rest[3] == "jobs":
		return scope, 0, ghsim.EndpointRunJobs
	case len(rest) == 2:
		return scope, 0, ghsim.EndpointList
	case len(rest) == 3:
		id, _ = strconv.ParseInt(rest[2], 10, 64)
		if method == http.MethodDelete {
			return scope, id, ghsim.EndpointDelete
		}
		return scope, id, ghsim.EndpointGet
	}
	return scope, 0, ""
}

// hiddenBusy is the broken classifier's view: a RunnerLister that trusts
// busy:false by hiding busy altogether, so nothing is protected by the list.
type hiddenBusy struct{ inner runnerLister }

type runnerLister interface {
	ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error)
}

func (h hiddenBusy) ListRunners(ctx context.Context, scope fleet.Scope, cache *state.ListCache) ([]fleet.Registration, *state.ListCache, error) {
	regs, c, err := h.inner.ListRunners(ctx, scope, cache)
	for i := range regs {
		regs[i].Busy = false
	}
	return regs, c, err
}
