package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// Jobs in the world, and GitHub's lies about them.
//
// Every job the world lands is a real job of a workflow run in the
// simulator (ghsim.StartJob), in a repository of the runner's scope: the
// repository itself for a repository scope, ORG/app under an org. The
// jobs endpoints tell the truth about it, so the reaper's job guard
// (reap.Options.Jobs, the real ghclient.Client.JobStatus) is served by
// the simulator through the chaos transport, as every other GitHub call.
//
// Job evidence, as the product reads it:
//   - a bare pod of the pool whose dispatcher writes the job it gives the
//     runner as the pod's annotation (REAPER_JOB_FROM=annotation:KEY;
//     kube.Mapping.job fills fleet.Pod.Job from it): half the bare pods,
//     drawn per pod; the annotation is written when the job starts, with
//     the job id half the time (OWNER/REPO/RUN_ID[/JOB_ID]);
//   - an ARC runner: ARC's listener writes the job on its
//     EphemeralRunner's status once the job's JobStarted message reaches
//     it, 1-30 s after the runner took the job (fleet.EphemeralRunner.Job):
//     the repository, the run, the request id and the display name, and
//     the REST job id for the set that stands for a newer ARC;
//   - the other bare pods carry none.
//
// Under hazard BusyLies one job in four starts with a ghsim.Lie, as the field
// reports say GitHub lies: busy listed false for 25-60 s after the job
// starts, or for minutes from one to twelve minutes into it, a DELETE
// answered 204 in either window; or listed offline for as long as it
// runs. A job with a window of lies in its middle runs past the window.
//
// A job killed by a registration delete that GitHub answered 204 because
// it lied (the only way the simulator answers 204 for a busy runner) is a
// JobKilled violation where the runner had job evidence, and is measured
// where it had none (JobKillStats.NoEvidence): GitHub's flags and its 422
// are then all the reaper can go by. Any other kill (a pod or an
// EphemeralRunner deleted while its registration runs a job, after GitHub
// said busy by list or by 422) is a violation with or without evidence.

// jobWorld is the job side's state: its own random source (so that its
// draws do not move the world's other events) and the run ids given out.
type jobWorld struct {
	rng *rand.Rand
	run int64
}

func newJobWorld(seed uint64) *jobWorld {
	return &jobWorld{rng: rand.New(rand.NewPCG(seed^0x6a09e667f3bcc908, seed+0xbb67ae8584caa73b)), run: 9000}
}

// annotates draws whether a new bare pod belongs to the dispatching pool.
func (j *jobWorld) annotates() bool { return j.rng.IntN(2) == 0 }

func (j *jobWorld) within(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(j.rng.Int64N(int64(hi-lo)))
}

// lie draws how GitHub misreports one job under hazard BusyLies.
func (j *jobWorld) lie() ghsim.Lie {
	var l ghsim.Lie
	if j.rng.IntN(4) != 0 {
		return l
	}
	if j.rng.Float64() < 0.6 {
		l.BusyLag = j.within(25*time.Second, 60*time.Second)
	}
	if j.rng.Float64() < 0.35 {
		l.IdleAfter, l.IdleFor = j.within(time.Minute, 12*time.Minute), j.within(2*time.Minute, 10*time.Minute)
	}
	if j.rng.Float64() < 0.3 {
		l.Offline = true
	}
	return l
}

// jobRepo is the repository the jobs of a scope's runners belong to.
func jobRepo(scope string) (owner, repo string) {
	kind, name, _ := strings.Cut(scope, ":")
	if kind == "repo" {
		owner, repo, _ = strings.Cut(name, "/")
		return owner, repo
	}
	return name, "app"
}

// startJob starts a job of a new run on the pod's runner, in the simulator
// (its registration turns busy and online), with the lag of hazard JobLag
// (listedIdle) and the lie of hazard BusyLies, and writes the evidence the
// pod's pool writes.
func (w *world) startJob(p *kpod, listedIdle bool) {
	jw := w.jobs
	var lie ghsim.Lie
	if w.cfg.Hazards.Has(BusyLies) {
		lie = jw.lie()
		if lie.IdleFor > 0 {
			// The lie is in the middle of the job: it runs on after.
			p.jobUntil = maxTime(p.jobUntil, w.now.Add(lie.IdleAfter+lie.IdleFor+jw.within(time.Minute, 5*time.Minute)))
		}
		if lie != (ghsim.Lie{}) {
			w.stats.JobKills.Lied++
		}
	}
	w.sim.SetRunner(p.scope, p.regID, func(r *ghsim.Runner) { r.ListedIdle, r.Lie = listedIdle, lie })
	jw.run++
	owner, repo := jobRepo(p.scope)
	sj := w.sim.StartJob(owner+"/"+repo, jw.run, "build", p.name)
	if sj.ID == 0 {
		// The simulator refuses a second job on a registration: the
		// world never gives one, so this is the world's own fault.
		panic(fmt.Sprintf("chaos: the simulator refused a job on runner %s", p.name))
	}
	p.simJob = sj.ID
	p.logJob = w.logJobStarted(p)
	w.stats.JobKills.Jobs++
	ref := &fleet.Job{Owner: owner, Repo: repo, RunID: jw.run}
	switch {
	case p.er != nil:
		// ARC's listener writes it on the JobStarted message, which
		// reaches it up to half a minute after the runner took the job
		// (advanceTo writes it then).
		e := p.er
		ref.Name, ref.RequestID = "build", 100000+sj.ID
		if e.set.fixed404 {
			ref.JobID = sj.ID
		}
		e.jobNext, e.jobAt = ref, w.now.Add(jw.within(time.Second, 30*time.Second))
		w.stats.JobKills.WithEvidence++
	case p.annotated:
		if jw.rng.IntN(2) == 0 {
			ref.JobID = sj.ID
		}
		p.job = ref
		p.rv++
		w.stats.JobKills.WithEvidence++
	}
}

// endJob completes the pod's running job, if any, as its runner ends.
func (w *world) endJob(p *kpod, t fleet.Termination) {
	if p.simJob == 0 {
		return
	}
	conclusion := "success"
	if t.ExitCode != 0 || t.Signal != 0 {
		conclusion = "failure"
	}
	w.sim.FinishJob(p.simJob, conclusion)
	w.logJobEnded(p, t)
	p.simJob = 0
}

// evidence reports whether the reaper can know of the pod's job: its
// EphemeralRunner's status, or its pool's annotation.
func (w *world) evidence(p *kpod) bool {
	if p == nil {
		return false
	}
	if p.er != nil {
		return p.er.job != nil
	}
	return p.job != nil
}

func cloneJob(j *fleet.Job) *fleet.Job {
	if j == nil {
		return nil
	}
	c := *j
	return &c
}

// killKind is how a job was killed.
type killKind int

const (
	// killLied: a registration delete GitHub answered 204 under a lie.
	killLied killKind = iota
	// killSaidBusy: an object deleted while GitHub's registration of it
	// was busy, as its list or its 422 said.
	killSaidBusy
)

// jobKill is one job killed in a sweep: the candidate key its act counts
// under, and whether the reaper could have known of the job.
type jobKill struct {
	key      string
	kind     killKind
	evidence bool
}

// killedByDelete records a registration delete answered 204 while a job
// ran on it (GitHub's lie): a violation where the runner had job evidence.
func (w *world) killedByDelete(sc *sweepCtx, scope string, id int64, name string) {
	p := w.owner[id]
	key := fleet.RegistrationMarkKey(scope, id)
	switch {
	case p != nil && !p.gone:
		key = fleet.PodMarkKey(p.uid)
	case w.erOfRunner(scope, id) != nil:
		key = w.erOfRunner(scope, id).actKey()
	}
	ev := w.evidence(p)
	// A bare runner's log, read whole and clean in this sweep, that said
	// it runs a job told the product of it.
	logSaid := p != nil && p.er == nil && sc.logEvidence(p)
	sc.jobKills = append(sc.jobKills, jobKill{key: key, kind: killLied, evidence: ev || logSaid})
	switch {
	case ev:
		w.violate(JobKilled, "registration %d %q deleted while it runs a job, answered 204 under GitHub's lie, though the job was known (%s)", id, name, describeJob(p))
	case logSaid:
		w.violate(JobKilled, "registration %d %q deleted while it runs a job, answered 204 under GitHub's lie, though its runner's log, read in this sweep, said it runs job %q", id, name, p.logJob)
	}
}

// actHit is what an act's first write in a sweep met on its runner: a
// live one (its pod there, not ended, its runner container running),
// whether the reaper could know of a job on it, and whether one ran.
type actHit struct {
	live, evidence, running bool
}

// hit records what the act under key met on the pod's runner as its first
// write of the sweep is made; p is nil where the act has no pod alive.
func (sc *sweepCtx) hit(key string, w *world, p *kpod) {
	if _, ok := sc.hits[key]; ok {
		return
	}
	if sc.hits == nil {
		sc.hits = map[string]actHit{}
	}
	h := actHit{}
	if p != nil && !p.gone && !p.terminal() && p.running {
		h = actHit{live: true, evidence: w.evidence(p), running: p.simJob != 0}
	}
	sc.hits[key] = h
}

// hitRegistration records a registration delete GitHub answered 204, under
// the key its act counts under (the pod's, the EphemeralRunner's, or the
// registration's own), before the world takes it in.
func (w *world) hitRegistration(sc *sweepCtx, scope string, id int64) {
	if p := w.owner[id]; p != nil && !p.gone {
		sc.hit(fleet.PodMarkKey(p.uid), w, p)
		return
	}
	if e := w.erOfRunner(scope, id); e != nil {
		var p *kpod
		if e.podAlive() {
			p = e.pod
		}
		sc.hit(e.actKey(), w, p)
		return
	}
	sc.hit(fleet.RegistrationMarkKey(scope, id), w, nil)
}

// killedSaidBusy records, and reports, a kill after GitHub said busy.
func (w *world) killedSaidBusy(key string, p *kpod, format string, args ...any) {
	if len(w.stack) > 0 {
		sc := w.top()
		sc.jobKills = append(sc.jobKills, jobKill{key: key, kind: killSaidBusy, evidence: w.evidence(p)})
	}
	w.violate(JobKilled, format, args...)
}

func describeJob(p *kpod) string {
	j := p.job
	if p.er != nil {
		j = p.er.job
	}
	if j == nil {
		return "no job evidence"
	}
	return fmt.Sprintf("job %s/%s run %d job %d", j.Owner, j.Repo, j.RunID, j.JobID)
}

// finishedJobs is the Jobs port of the broken product NoJobGuard: every job
// it is asked about is over, so that nothing but busy, status and the 422
// protects a runner, as before the guard.
type finishedJobs struct{}

func (finishedJobs) JobStatus(ctx context.Context, job fleet.Job, runnerName string) (fleet.JobStatus, error) {
	return fleet.JobStatus{Status: "completed", Conclusion: "success", RunnerName: runnerName, JobID: job.JobID}, nil
}

var _ reap.Jobs = finishedJobs{}

// JobKillStats is what the run's jobs met: how many ran, with evidence
// and under a lie, and the jobs killed, per verdict of the act that
// killed them, beside the acts of that verdict that wrote anything.
type JobKillStats struct {
	// Jobs counts the jobs landed; WithEvidence those the reaper could
	// know of (annotation or EphemeralRunner); Lied those GitHub lied
	// about (hazard BusyLies).
	Jobs, WithEvidence, Lied int
	// Checks counts the job guard's answers (outcomes with a job status),
	// Protected the runners it protected (protected-job), Unchecked those
	// it held for want of an answer (job-unchecked).
	Checks, Protected, Unchecked int
	// Actions counts, per verdict, the acts that wrote something: a
	// registration deleted, or the object's delete done.
	Actions map[string]int
	// Evidence counts, per verdict, jobs killed under GitHub's lie on a
	// runner with job evidence (JobKilled violations); NoEvidence those
	// on a runner without (measured, not violations); SaidBusy jobs
	// killed after GitHub said busy (violations, evidence or not).
	Evidence, NoEvidence, SaidBusy map[string]int
	// Blind counts, per verdict, the acts whose first write met a live
	// runner the reaper could know no job of (no pool annotation, no job
	// on its EphemeralRunner); BlindRunning those of them whose runner was
	// in fact running a job. BlindRunning over Blind is the no-evidence
	// kill rate: how often an act that only GitHub's word allowed hit a
	// runner at work.
	Blind, BlindRunning map[string]int
}

func (s *JobKillStats) add(m *map[string]int, v string) {
	if *m == nil {
		*m = map[string]int{}
	}
	(*m)[v]++
}

// afterJobs counts one finished sweep's acts and kills by verdict.
func (w *world) afterJobs(sc *sweepCtx, res sweep.Result) {
	js := &w.stats.JobKills
	verdict := map[string]string{}
	for _, o := range res.Outcomes {
		v := string(o.Candidate.Verdict)
		if o.Job != nil {
			js.Checks++
		}
		switch o.Result {
		case fleet.ProtectedJob:
			js.Protected++
		case fleet.JobUnchecked:
			js.Unchecked++
		}
		if o.Registration == fleet.Deleted || o.ObjectResult == fleet.Deleted && o.Result == fleet.Deleted {
			js.add(&js.Actions, v)
			verdict[o.Candidate.Key] = v
			if h := sc.hits[o.Candidate.Key]; h.live && !h.evidence {
				js.add(&js.Blind, v)
				if h.running {
					js.add(&js.BlindRunning, v)
				}
			}
		}
	}
	for _, k := range sc.jobKills {
		v, ok := verdict[k.key]
		if !ok {
			v = "unattributed"
		}
		switch {
		case k.kind == killSaidBusy:
			js.add(&js.SaidBusy, v)
		case k.evidence:
			js.add(&js.Evidence, v)
		default:
			js.add(&js.NoEvidence, v)
		}
	}
}

// JobSummary is the jobs' lines: the jobs, the guard's answers, and the
// kills per verdict, each beside the acts of its verdict; a no-evidence
// kill's rate is per act of its verdict that wrote something, and per
// thousand sweeps.
func (s *Stats) JobSummary() string {
	js := s.JobKills
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: jobs: %d landed, %d with evidence (annotation or EphemeralRunner), %d under GitHub's lies; job guard: %d answers, %d protected, %d held unchecked\n",
		js.Jobs, js.WithEvidence, js.Lied, js.Checks, js.Protected, js.Unchecked)
	order := sortedVerdicts(js.Actions, js.Evidence, js.NoEvidence, js.SaidBusy)
	fmt.Fprintf(&b, "  %-18s %7s %9s %9s %11s %9s %11s\n", "verdict", "acts", "wrongful", "said-busy", "no-evidence", "per act", "per 1k sw")
	for _, v := range order {
		n, ne := js.Actions[v], js.NoEvidence[v]
		fmt.Fprintf(&b, "  %-18s %7d %9d %9d %11d %9s %11s\n", v, n, js.Evidence[v], js.SaidBusy[v], ne, ratio(ne, n, 1), ratio(ne, s.Sweeps, 1000))
	}
	b.WriteString(s.BlindSummary())
	return b.String()
}

// BlindSummary is the no-evidence kill rate per verdict: of the acts on a
// live runner with no job evidence, those whose runner was running a job.
func (s *Stats) BlindSummary() string {
	js := s.JobKills
	var b strings.Builder
	fmt.Fprintf(&b, "chaos: no job evidence: %d of %d acts on a live runner the reaper could know no job of hit one running a job (%s)\n",
		Sum(js.BlindRunning), Sum(js.Blind), ratio(Sum(js.BlindRunning), Sum(js.Blind), 1))
	fmt.Fprintf(&b, "  %-18s %11s %12s %9s\n", "verdict", "no-ev acts", "running job", "rate")
	for _, v := range sortedVerdicts(js.Blind) {
		fmt.Fprintf(&b, "  %-18s %11d %12d %9s\n", v, js.Blind[v], js.BlindRunning[v], ratio(js.BlindRunning[v], js.Blind[v], 1))
	}
	return b.String()
}

// sortedVerdicts is the verdicts of the maps' keys in the act order, then
// by name.
func sortedVerdicts(ms ...map[string]int) []string {
	seen := map[string]bool{}
	for _, m := range ms {
		for v := range m {
			seen[v] = true
		}
	}
	order := make([]string, 0, len(seen))
	for v := range seen {
		order = append(order, v)
	}
	sort.Slice(order, func(i, j int) bool {
		pi, pj := fleet.Verdict(order[i]).Priority(), fleet.Verdict(order[j]).Priority()
		if pi != pj {
			return pi < pj
		}
		return order[i] < order[j]
	})
	return order
}

func ratio(n, d int, per float64) string {
	if d == 0 {
		return "-"
	}
	if per == 1 {
		return fmt.Sprintf("%.2f%%", 100*float64(n)/float64(d))
	}
	return fmt.Sprintf("%.2f", per*float64(n)/float64(d))
}

// Sum is the total of a per-verdict count.
func Sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// lying reports whether GitHub may be lying about the pod's registration
// now: a job runs on it with a Lie. A verdict of absence on it is GitHub's
// doing, not a list read wrong.
func (w *world) lying(p *kpod, r *ghsim.Runner) bool {
	return p.simJob != 0 && r.Lie != (ghsim.Lie{})
}

// listenerWrites is ARC's listener writing the job on the EphemeralRunner
// status, once its JobStarted message has come (by t).
func (w *world) listenerWrites(p *kpod, t time.Time) {
	e := p.er
	if e == nil || e.jobNext == nil || t.Before(e.jobAt) {
		return
	}
	e.job, e.jobNext = e.jobNext, nil
	e.rv++
}
