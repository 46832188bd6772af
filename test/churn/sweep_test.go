package churn_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// processTimeout bounds one process: far above any sweep's own deadline,
// so that only a hung process meets it.
const processTimeout = 5 * time.Minute

// summary is what the bench reads of a sweep's summary line (msg
// "sweep"). scopes_moved is absent from binaries that skipped a moved
// list instead.
type summary struct {
	Status        int            `json:"status"`
	DurationMS    int64          `json:"duration_ms"`
	Registrations int            `json:"registrations_observed"`
	Skipped       []string       `json:"scopes_skipped"`
	Deferred      []string       `json:"scopes_deferred"`
	Moved         *[]string      `json:"scopes_moved"`
	Verdicts      map[string]int `json:"verdicts"`
	Results       map[string]int `json:"results"`
	GitHub        int64          `json:"github_requests"`
	NotModified   int64          `json:"github_not_modified"`
	Error         string         `json:"error"`
	Stopped       string         `json:"stopped"`
}

// requests is one sweep's GitHub requests, from the simulator's log.
type requests struct {
	// pages are page-list requests answered 200: a full read of a page.
	pages int
	// notModified are page-list requests answered 304.
	notModified int
	// again are the page-list requests (either answer) for a page this
	// sweep had already asked for: revalidations and reads again.
	again int
	// byName are look-ups of one runner by name (a name= query).
	byName int
	// deletes are registration deletes.
	deletes int
	// other is everything else: a get by id, an error answer.
	other int
}

func (r requests) total() int { return r.pages + r.notModified + r.byName + r.deletes + r.other }

// split counts a sweep's requests by kind. A list request is a look-up
// by name when it has a name; otherwise it is a page, 200 or 304, and a
// page asked for before in the same sweep counts in again too.
func split(log []ghsim.Request) requests {
	var out requests
	seen := map[string]bool{}
	for _, r := range log {
		q, _ := url.ParseQuery(r.Query)
		switch {
		case r.Endpoint == ghsim.EndpointList && q.Has("name"):
			out.byName++
		case r.Endpoint == ghsim.EndpointList && (r.Status == 200 || r.Status == 304):
			if r.Status == 200 {
				out.pages++
			} else {
				out.notModified++
			}
			page := q.Get("page")
			if page == "" {
				page = "1"
			}
			if seen[page] {
				out.again++
			}
			seen[page] = true
		case r.Endpoint == ghsim.EndpointDelete:
			out.deletes++
		default:
			out.other++
		}
	}
	return out
}

// sweepRun is one process's sweep.
type sweepRun struct {
	testenv.Run
	summary
	requests
	// started and ended are when the process started and ended, from the
	// row's first sweep's start.
	started, ended time.Duration
	// judged is whether the sweep judged the scope: it listed it, and
	// neither skipped nor deferred it.
	judged bool
	// zombie and unregistered are whether those pods were still there
	// after the sweep.
	zombie, unregistered bool
}

// row is one binary's sweeps of one org size at one rate.
type row struct {
	size int
	rate float64
	bin  string
	// sweeps are the row's sweeps, in order.
	sweeps []sweepRun
	// zombieAt and unregisteredAt are the sweep (from 1) after which
	// each planted pod was gone, 0 while it stayed; their times are
	// when that sweep ended, from the first sweep's start.
	zombieAt, unregisteredAt     int
	zombieTime, unregisteredTime time.Duration
	// adds, removes and flips are what the churn did during the row.
	adds, removes, flips int
	// took is the row's sweeping, first start to last end.
	took time.Duration
	// problems are what went wrong: a survivor deleted, a sweep that
	// could not be read.
	problems []string
}

// runRow builds a world of size runners, starts its churn at rate, and
// sweeps it with bin every sweepEvery (or at once after a longer sweep)
// until both planted pods are gone and minSweeps have run, or maxSweeps
// have. A failure is recorded in the row and fails the test; the rows
// after it still run.
func runRow(ctx context.Context, t *testing.T, env *testenv.Env, s settings, bin binary, size int, rate float64, seed int64) row {
	out := row{size: size, rate: rate, bin: bin.name}
	fail := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		out.problems = append(out.problems, msg)
		t.Error(msg)
	}
	w, err := newWorld(ctx, env, size, seed)
	if err != nil {
		fail("build the world: %v", err)
		return out
	}
	defer w.close(ctx)
	// The unregistered pod must be past its deadline at the first sweep.
	time.Sleep(registrationDeadline + 200*time.Millisecond)
	penv := map[string]string{
		"KUBECONFIG":                   s.kubeconfig,
		"REAPER_SCOPES":                scope,
		"REAPER_NAMESPACES":            w.ns,
		"REAPER_GITHUB_API_URL":        w.url,
		"REAPER_GITHUB_TOKEN":          token,
		"REAPER_LEDGER":                "configmap:" + w.ns + "/runner-reaper-ledger",
		"REAPER_CONFIRM_AFTER":         confirmAfter.String(),
		"REAPER_REGISTRATION_DEADLINE": registrationDeadline.String(),
		// Four pods: the default 0.25 of them would bound a sweep to
		// one action.
		"REAPER_MAX_FRACTION": "1",
	}
	if s.timeout != "" {
		penv["REAPER_SWEEP_TIMEOUT"] = s.timeout
	}

	w.churn.start(rate)
	first := time.Now()
	for i := 1; i <= s.maxSweeps; i++ {
		if i > s.minSweeps && out.zombieAt > 0 && out.unregisteredAt > 0 {
			break
		}
		if next := first.Add(time.Duration(i-1) * sweepEvery); time.Until(next) > 0 {
			time.Sleep(time.Until(next))
		}
		w.sim.ResetRequests()
		r, err := sweepOnce(ctx, bin, penv, w, first)
		if err != nil {
			fail("sweep %d: %v", i, err)
			break
		}
		out.sweeps = append(out.sweeps, r)
		if !r.zombie && out.zombieAt == 0 {
			out.zombieAt, out.zombieTime = i, r.ended
		}
		if !r.unregistered && out.unregisteredAt == 0 {
			out.unregisteredAt, out.unregisteredTime = i, r.ended
		}
		t.Logf("sweep %d: exit %d in %s, judged %t (skipped %v, moved %v), verdicts %v, results %v; GitHub: %d pages 200, %d 304 (%d of them again), %d by name, %d deletes, %d other (the binary counted %d, %d 304); zombie there %t, unregistered there %t",
			i, r.Code, r.Wall.Round(time.Millisecond), r.judged, r.Skipped, movedText(r.Moved), r.Verdicts, r.Results,
			r.pages, r.notModified, r.again, r.byName, r.deletes, r.other, r.GitHub, r.NotModified, r.zombie, r.unregistered)
		if r.Error != "" || r.Stopped != "" {
			t.Logf("sweep %d: error %q, stopped %q", i, r.Error, r.Stopped)
		}
		for _, l := range warnings(r.Run, 5) {
			t.Logf("sweep %d: %s", i, l)
		}
		if int64(r.total()) != r.GitHub {
			fail("sweep %d: the simulator served %d requests, the binary's summary counts %d", i, r.total(), r.GitHub)
		}
	}
	w.churn.stop()
	if n := len(out.sweeps); n > 0 {
		out.took = out.sweeps[n-1].ended
	}
	out.adds, out.removes, out.flips = w.churn.counts()

	// What must survive every sweep.
	for _, name := range []string{healthyPod, busyPod} {
		there, err := w.podExists(ctx, name)
		switch {
		case err != nil:
			fail("read pod %s: %v", name, err)
		case !there:
			fail("pod %s, which must stay, was deleted", name)
		}
	}
	for name, id := range map[string]int64{healthyPod: w.healthyID, busyPod: w.busyID} {
		if !w.registered(id) {
			fail("the registration of %s, which must stay, was deleted", name)
		}
	}
	if out.zombieAt > 0 && w.registered(w.zombieID) {
		fail("the zombie's pod went, its registration stayed")
	}
	return out
}

// sweepOnce runs one sweep of bin, then reads what it did: its summary,
// its requests from the simulator's log, and which planted pods remain.
func sweepOnce(ctx context.Context, bin binary, env map[string]string, w *world, first time.Time) (sweepRun, error) {
	pctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()
	var out sweepRun
	out.started = time.Since(first)
	run, err := testenv.RunBinary(pctx, bin.path, env, "sweep")
	out.ended = time.Since(first)
	if err != nil {
		return out, err
	}
	out.Run = run
	if out.summary, err = summaryOf(run); err != nil {
		return out, err
	}
	out.requests = split(w.sim.Requests())
	out.judged = out.Registrations > 0 && !slices.Contains(out.Skipped, scope) && !slices.Contains(out.Deferred, scope)
	if out.zombie, err = w.podExists(ctx, zombiePod); err != nil {
		return out, err
	}
	if out.unregistered, err = w.podExists(ctx, unregisteredPod); err != nil {
		return out, err
	}
	return out, nil
}

// summaryOf decodes the run's summary line.
func summaryOf(run testenv.Run) (summary, error) {
	var out summary
	err := run.Summary(&out)
	return out, err
}

// warnings are the first n of the run's warning and error lines, each cut
// to 400 bytes: what explains a sweep that did less than it could.
func warnings(run testenv.Run, n int) []string {
	var out []string
	for _, l := range strings.Split(run.Stdout+"\n"+run.Stderr, "\n") {
		if len(out) == n {
			break
		}
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			if len(l) > 400 {
				l = l[:400] + "..."
			}
			out = append(out, l)
		}
	}
	return out
}

// movedText is a summary's scopes_moved for a log line, "-" when the
// binary does not report it.
func movedText(m *[]string) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprint(*m)
}
