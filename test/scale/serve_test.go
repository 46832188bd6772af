package scale_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// The serve rows: after a size's CronJob rows, two `runner-reaper serve`
// replicas on that world (one leads, both keep their stores), the world
// churning at each BENCH_SERVE_CHURN rate; what the leader costs a minute,
// how long a planted zombie takes to go, and the same across a kill -9 of
// the leader.
const (
	defaultServeSizes   = "10000,100000"
	defaultServeChurn   = "0.1,1,10"
	defaultServeMinutes = 3
	// serveMemoryLimit is each replica's cgroup limit: the Deployment's
	// shipped memory limit.
	serveMemoryLimit = 256 << 20
	// defaultConfirmAfter and defaultInterval are the binary's own
	// REAPER_CONFIRM_AFTER and REAPER_INTERVAL (docs/configuration.md),
	// which the CronJob rows run with; leaseDuration its
	// REAPER_LEASE_DURATION.
	defaultConfirmAfter = 5 * time.Minute
	defaultInterval     = time.Minute
	leaseDuration       = 15 * time.Second
	// startupTimeout bounds the wait for the first leader's first
	// complete sweep: both replicas' first lists of the whole fleet, at
	// once, on the API server's two cores.
	startupTimeout = 20 * time.Minute
	// zombieGrace is how long past its goal a planted zombie is waited
	// for before the row goes on without it (a MISS).
	zombieGrace = 2 * time.Minute
	// pollEvery is how often the replicas' output is read.
	pollEvery = 250 * time.Millisecond
	// gogcRow is the GOGC of the extra row at the largest serve size and
	// 1% churn: the CronJob's own setting, to see what it would cost a
	// long-running process.
	gogcRow = "10"
)

// serveSettings are the serve rows' environment (see the package doc).
type serveSettings struct {
	sizes   []int
	churn   []float64
	minutes int
	// confirmAfter is the replicas' REAPER_CONFIRM_AFTER; set says it was
	// asked for (BENCH_SERVE_CONFIRM_AFTER), else they run with their own.
	confirmAfter time.Duration
	set          bool
}

// parseServeSettings reads BENCH_SERVE_*. Sizes must be among the
// CronJob's (sizes): each serve row runs on the world that size built.
// Unset, the default sizes that are among them are taken; "none" takes
// none.
func parseServeSettings(sizes []int) (serveSettings, error) {
	st := serveSettings{minutes: defaultServeMinutes, confirmAfter: defaultConfirmAfter}
	v, asked := os.LookupEnv("BENCH_SERVE_SIZES")
	if v != "none" {
		list, err := parseSizes(cmp.Or(v, defaultServeSizes))
		if err != nil {
			return st, fmt.Errorf("BENCH_SERVE_SIZES=%q: want ascending fleet sizes among BENCH_SIZES, or none", v)
		}
		for _, n := range list {
			switch {
			case slices.Contains(sizes, n):
				st.sizes = append(st.sizes, n)
			case asked && v != "":
				return st, fmt.Errorf("BENCH_SERVE_SIZES=%q: %d is not among BENCH_SIZES %v, whose worlds the serve rows run on", v, n, sizes)
			}
		}
	}
	for _, f := range strings.Split(cmp.Or(os.Getenv("BENCH_SERVE_CHURN"), defaultServeChurn), ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 || r > 100 {
			return st, fmt.Errorf("BENCH_SERVE_CHURN=%q: want percentages of the runners replaced a minute, each above 0 and at most 100, such as 0.1,1,10", os.Getenv("BENCH_SERVE_CHURN"))
		}
		st.churn = append(st.churn, r)
	}
	if v := os.Getenv("BENCH_SERVE_MINUTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return st, fmt.Errorf("BENCH_SERVE_MINUTES=%q: want a positive whole number of minutes, such as 3", v)
		}
		st.minutes = n
	}
	if v := os.Getenv("BENCH_SERVE_CONFIRM_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return st, fmt.Errorf("BENCH_SERVE_CONFIRM_AFTER=%q: want a positive duration, such as 1m", v)
		}
		st.confirmAfter, st.set = d, true
	}
	return st, nil
}

// serveCase is one serve row to run: the churn asked for, in percent of
// the runners a minute, and the replicas' GOGC ("" for their own).
type serveCase struct {
	churn float64
	gogc  string
}

// cases are the rows at size n: every churn rate, and at the largest
// serve size, with 1% among the rates, the GOGC row too.
func (st serveSettings) cases(n int) []serveCase {
	var out []serveCase
	for _, r := range st.churn {
		out = append(out, serveCase{churn: r})
	}
	if n == st.sizes[len(st.sizes)-1] && slices.Contains(st.churn, 1) {
		out = append(out, serveCase{churn: 1, gogc: gogcRow})
	}
	return out
}

// serveRow is one serve row's measurements.
type serveRow struct {
	size int
	serveCase
	// achieved is the churn done, in percent of the runners a minute,
	// over the measured minutes.
	achieved float64
	minutes  []serveMinute
	// fullRead is the CronJob's bytes from the API server a sweep at this
	// size (its warm sweeps' median), 0 when unknown.
	fullRead int64
	// startup is from the replicas' start to the leader's first complete
	// sweep.
	startup time.Duration
	// hwm and cgroupPeak are the leader's peak resident set (VmHWM) and
	// its cgroup's peak charge at the end of the measured minutes: since
	// its start, its first list of the fleet included. standby* are the
	// other replica's.
	hwm, cgroupPeak               int64
	standbyHWM, standbyCgroupPeak int64
	// standbyCPU is the standby's processor time a minute, its store kept
	// up to date.
	standbyCPU float64
	oom        bool
	// zombie is from the first zombie's planting to its action line;
	// failover from the leader's kill to the other replica's first
	// complete sweep; zombieAfter from the second zombie's planting, just
	// before the kill, to its action line. 0: not seen in time.
	zombie, failover, zombieAfter time.Duration
	// goal is what the zombie is held to: confirm-after and two
	// intervals.
	goal time.Duration
	// problems are broken invariants (the bench fails); notes say why a
	// figure is missing.
	problems, notes []string
}

// serveMinute is one measured minute of the leader.
type serveMinute struct {
	from, to time.Time
	cpu      time.Duration
	// kubeBytes and github are the summary lines' kube_bytes and
	// github_requests of the sweeps that ended in the minute; bytesKnown
	// says every one of them had kube_bytes.
	kubeBytes, github int64
	bytesKnown        bool
	sweeps            int
}

// serveSummary is what the bench reads of a serve sweep's summary line.
type serveSummary struct {
	Time       time.Time `json:"time"`
	Status     int       `json:"status"`
	DurationMS int64     `json:"duration_ms"`
	Pods       int       `json:"pods_observed"`
	Unobserved []string  `json:"namespaces_unobserved"`
	GitHub     int64     `json:"github_requests"`
	Kube       int64     `json:"kube_requests"`
	KubeBytes  *int64    `json:"kube_bytes"`
	Error      string    `json:"error"`
	Stopped    string    `json:"stopped"`
}

// complete says the sweep observed everything and finished.
func (s serveSummary) complete() bool {
	return s.Status == 0 && s.Error == "" && s.Stopped == "" && len(s.Unobserved) == 0 && s.Pods > 0
}

// serveAction is what the bench reads of an action line.
type serveAction struct {
	Time   time.Time `json:"time"`
	Pod    string    `json:"pod"`
	Action string    `json:"action"`
	Object string    `json:"object"`
	Result string    `json:"result"`
}

// replica is one `runner-reaper serve` process and what it has said.
type replica struct {
	name string
	port int
	p    *testenv.Measured
	// seen is how many of its lines are read.
	seen    int
	sweeps  []serveSummary
	actions []serveAction
	// errors are its last error lines, for a row's notes.
	errors []string
	// killed is when the bench killed it; zero while it was not.
	killed time.Time
}

// poll reads the replica's new lines.
func (r *replica) poll() {
	lines := r.p.Lines(r.seen)
	r.seen += len(lines)
	for _, l := range lines {
		var head struct {
			Msg   string `json:"msg"`
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(l), &head) != nil {
			continue
		}
		switch {
		case head.Msg == "sweep":
			var s serveSummary
			if json.Unmarshal([]byte(l), &s) == nil {
				r.sweeps = append(r.sweeps, s)
			}
		case head.Msg == "action":
			var a serveAction
			if json.Unmarshal([]byte(l), &a) == nil {
				r.actions = append(r.actions, a)
			}
		case head.Level == "ERROR":
			r.errors = append(r.errors, short(l, 300))
			if len(r.errors) > 5 {
				r.errors = r.errors[1:]
			}
		}
	}
}

// exited says whether the process has ended.
func (r *replica) exited() bool {
	select {
	case <-r.p.Done():
		return true
	default:
		return false
	}
}

// firstComplete is its first complete sweep that ended after t.
func (r *replica) firstComplete(after time.Time) (serveSummary, bool) {
	for _, s := range r.sweeps {
		if s.Time.After(after) && s.complete() {
			return s, true
		}
	}
	return serveSummary{}, false
}

// actedOn is its first action on pod whose result is deleted.
func (r *replica) actedOn(pod string) (serveAction, bool) {
	for _, a := range r.actions {
		if a.Pod == pod && a.Result == "deleted" {
			return a, true
		}
	}
	return serveAction{}, false
}

// leaderGauge reads runner_reaper_leader from the replica's /metrics:
// 1 leading, 0 standby; ok false when it could not be read.
func (r *replica) leaderGauge(ctx context.Context) (float64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", r.port), nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || (name != "runner_reaper_leader" && !strings.HasPrefix(name, "runner_reaper_leader{")) {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		return f, err == nil
	}
	return 0, false
}

// freePort is a loopback port free now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// serveEnv is a replica's environment: the CronJob rows' (sweeper.env),
// its own listener and identity, the row's Lease, and the settings.
func (s sweeper) serveEnv(bin binary, lease, identity string, port int, st serveSettings, interval time.Duration, gogc string) map[string]string {
	env := s.env(bin)
	env["REAPER_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", port)
	env["REAPER_LEASE_NAME"] = lease
	env["REAPER_LEASE_NAMESPACE"] = ledgerNamespace
	env["REAPER_IDENTITY"] = identity
	if interval != defaultInterval {
		env["REAPER_INTERVAL"] = interval.String()
	}
	if st.set {
		env["REAPER_CONFIRM_AFTER"] = st.confirmAfter.String()
	}
	if gogc != "" {
		env["GOGC"] = gogc
	}
	return env
}

// serveInterval is the replicas' REAPER_INTERVAL: their own, unless the
// CronJob rows' REAPER_SWEEP_TIMEOUT (BENCH_SWEEP_TIMEOUT) does not fit
// in it; then a quarter-minute past that.
func serveInterval(timeout string) (time.Duration, error) {
	if timeout == "" {
		return defaultInterval, nil
	}
	d, err := time.ParseDuration(timeout)
	if err != nil {
		return 0, fmt.Errorf("BENCH_SWEEP_TIMEOUT=%q: %w", timeout, err)
	}
	if d < defaultInterval {
		return defaultInterval, nil
	}
	return d + 15*time.Second, nil
}

// measureServe runs the serve rows at s.size on the world as the CronJob
// rows left it, and leaves the world as it found it in shape (every slot
// a runner, every scope its registrations), for the next size.
func measureServe(ctx context.Context, b *testing.B, w *world, s sweeper, bin string, timeout string, st serveSettings, fullRead int64) []serveRow {
	interval, err := serveInterval(timeout)
	if err != nil {
		b.Fatal(err)
	}
	var rows []serveRow
	for i, c := range st.cases(s.size) {
		row := runServe(ctx, b, w, s, bin, timeout, st, c, i+1, interval)
		row.fullRead = fullRead
		rows = append(rows, row)
		b.Logf("serve row %s: %s", row.label(), row.logLine())
		for _, p := range row.problems {
			b.Errorf("serve row %s: %s", row.label(), p)
		}
		for _, n := range row.notes {
			b.Logf("serve row %s: %s", row.label(), n)
		}
		if err := w.checkWorld(); err != nil {
			b.Errorf("serve row %s left the world broken: %v", row.label(), err)
			row.problems = append(row.problems, err.Error())
		}
		if len(row.problems) > 0 {
			// A world the row may have left broken is not measured on.
			break
		}
	}
	return rows
}

// label names a row in messages.
func (r serveRow) label() string {
	l := fmt.Sprintf("runners=%d churn=%s%%", r.size, fmtPct(r.churn))
	if r.gogc != "" {
		l += " GOGC=" + r.gogc
	}
	return l
}

// runServe runs one serve row: the replicas, the leader's first complete
// sweep, st.minutes measured minutes of churn with a zombie planted at
// their start (waited for past them if need be), then a second zombie and
// a kill -9 of the leader, and the other replica's takeover. Broken
// invariants are the row's problems; figures it could not get, notes.
func runServe(ctx context.Context, b *testing.B, w *world, s sweeper, bin, timeout string, st serveSettings, c serveCase, n int, interval time.Duration) (row serveRow) { //nolint:gocyclo // one row from start to failover, each step measured in order on the same two processes
	row = serveRow{size: s.size, serveCase: c, goal: st.confirmAfter + 2*interval}
	problem := func(format string, args ...any) { row.problems = append(row.problems, fmt.Sprintf(format, args...)) }
	note := func(format string, args ...any) { row.notes = append(row.notes, fmt.Sprintf(format, args...)) }
	// Bounds the replicas (ctx ends them) should the row hang.
	rowCtx, cancel := context.WithTimeout(ctx, startupTimeout+time.Duration(st.minutes)*time.Minute+2*(row.goal+zombieGrace)+10*time.Minute)
	defer cancel()

	sb := binary{name: fmt.Sprintf("serve%d", n), path: bin, timeout: timeout}
	lease := fmt.Sprintf("serve-%d-%d", s.size, n)
	var reps []*replica
	for _, name := range []string{"a", "b"} {
		port, err := freePort()
		if err != nil {
			problem("a port for replica %s: %v", name, err)
			return row
		}
		env := s.serveEnv(sb, lease, "bench-"+name, port, st, interval, c.gogc)
		p, err := testenv.StartMeasured(rowCtx, bin, env, testenv.RunOptions{MemoryLimit: serveMemoryLimit}, "serve")
		if err != nil {
			problem("start replica %s: %v", name, err)
			return row
		}
		r := &replica{name: name, port: port, p: p}
		reps = append(reps, r)
		defer func() {
			if !r.exited() {
				_ = r.p.Signal(syscall.SIGKILL)
				<-r.p.Done()
			}
		}()
	}
	pollAll := func() {
		for _, r := range reps {
			r.poll()
		}
	}
	sleep := func() bool {
		select {
		case <-rowCtx.Done():
			return false
		case <-time.After(pollEvery):
			return true
		}
	}

	// The leader: the replica whose gauge says so and whose first
	// complete sweep is done. Only the leader sweeps, so a sweep line is
	// also how it is known where the gauge cannot be read.
	began := time.Now()
	var leader, standby *replica
	for leader == nil {
		pollAll()
		for i, r := range reps {
			if _, ok := r.firstComplete(time.Time{}); ok {
				leader, standby = r, reps[1-i]
			}
			if r.exited() {
				row.exitedEarly(r, "before the first sweep")
				return row
			}
		}
		if time.Since(began) > startupTimeout || !sleep() {
			problem("no replica completed a sweep within %s of their start; errors: a %v, b %v", startupTimeout, reps[0].errors, reps[1].errors)
			return row
		}
	}
	first, _ := leader.firstComplete(time.Time{})
	row.startup = first.Time.Sub(began)
	if g, ok := leader.leaderGauge(rowCtx); !ok || g != 1 {
		note("replica %s sweeps but its runner_reaper_leader reads %v (read: %t)", leader.name, g, ok)
	}
	if g, ok := standby.leaderGauge(rowCtx); !ok || g != 0 {
		note("the standby %s's runner_reaper_leader reads %v (read: %t)", standby.name, g, ok)
	}

	// Churn, a zombie planted at its start, the measured minutes.
	perMinute := c.churn / 100 * float64(s.size)
	ch := w.startChurn(ctx, perMinute)
	stopped := false
	stopChurn := func() {
		if !stopped {
			stopped = true
			if err := ch.stop(); err != nil {
				problem("the churn failed, the world is broken: %v", err)
			}
		}
	}
	defer stopChurn()
	t0 := ch.start
	var zombies []zombie
	defer func() {
		for _, z := range zombies {
			if err := w.clearZombie(ctx, z); err != nil {
				problem("%v", err)
			}
		}
	}()
	z1, err := w.plantZombie(ctx)
	if err != nil {
		problem("%v", err)
		return row
	}
	zombies = append(zombies, z1)
	usage := func(r *replica) testenv.ProcUsage {
		u, err := r.p.Usage()
		if err != nil {
			note("read replica %s: %v", r.name, err)
		}
		return u
	}
	last, lastStandby, lastAt := usage(leader), usage(standby), time.Now()
	standbyFrom, standbyCPU := lastAt, time.Duration(0)
	z1Deadline := z1.planted.Add(row.goal + zombieGrace)
	for {
		pollAll()
		if a, ok := leader.actedOn(z1.name); ok && row.zombie == 0 {
			row.zombie = a.Time.Sub(z1.planted)
			// What ARC's controller does next: its pod goes, and its
			// EphemeralRunner's finalizers (it would otherwise run on,
			// its registration gone: a zombie again).
			if err := w.clearZombie(ctx, z1); err != nil {
				problem("%v", err)
			}
		}
		k := len(row.minutes)
		if now := time.Now(); k < st.minutes && !now.Before(t0.Add(time.Duration(k+1)*time.Minute)) {
			u, us := usage(leader), usage(standby)
			row.minutes = append(row.minutes, serveMinute{from: lastAt, to: now, cpu: u.CPU - last.CPU})
			standbyCPU += us.CPU - lastStandby.CPU
			last, lastStandby, lastAt = u, us, now
			if k+1 == st.minutes {
				row.hwm, row.cgroupPeak = u.HWM, u.CgroupPeak
				row.standbyHWM, row.standbyCgroupPeak = us.HWM, us.CgroupPeak
				row.standbyCPU = standbyCPU.Seconds() / now.Sub(standbyFrom).Minutes()
			}
		}
		if len(row.minutes) == st.minutes && (row.zombie > 0 || time.Now().After(z1Deadline)) {
			break
		}
		if leader.exited() || standby.exited() {
			for _, r := range reps {
				if r.exited() {
					row.exitedEarly(r, "during the measured minutes")
				}
			}
			return row
		}
		if !sleep() {
			problem("the row ran out of time")
			return row
		}
	}
	measuredEnd := t0.Add(time.Duration(st.minutes) * time.Minute)
	row.achieved = float64(ch.between(t0, measuredEnd)) / float64(st.minutes) / float64(s.size) * 100
	if row.zombie == 0 {
		note("zombie %s not cleaned within %s of its planting (goal %s)", z1.name, row.goal+zombieGrace, row.goal)
	}
	row.fillMinutes(leader.sweeps)

	// Failover: a second zombie, then the leader killed as a node's
	// failure kills it.
	if len(row.problems) == 0 {
		z2, err := w.plantZombie(ctx)
		if err != nil {
			problem("%v", err)
			return row
		}
		zombies = append(zombies, z2)
		leader.killed = time.Now()
		if err := leader.p.Signal(syscall.SIGKILL); err != nil {
			problem("kill the leader: %v", err)
			return row
		}
		deadline := leader.killed.Add(leaseDuration + row.goal + zombieGrace)
		for row.failover == 0 || row.zombieAfter == 0 {
			pollAll()
			if s, ok := standby.firstComplete(leader.killed); ok && row.failover == 0 {
				row.failover = s.Time.Sub(leader.killed)
			}
			if a, ok := standby.actedOn(z2.name); ok && row.zombieAfter == 0 {
				row.zombieAfter = a.Time.Sub(z2.planted)
				if err := w.clearZombie(ctx, z2); err != nil {
					problem("%v", err)
				}
			}
			if standby.exited() {
				row.exitedEarly(standby, "after the leader's kill")
				return row
			}
			if time.Now().After(deadline) {
				note("after the kill: first complete sweep of %s after %s, zombie %s cleaned after %s (0: not within %s)", standby.name, row.failover, z2.name, row.zombieAfter, deadline.Sub(leader.killed).Round(time.Second))
				break
			}
			if !sleep() {
				problem("the row ran out of time")
				return row
			}
		}
	}
	stopChurn()

	// The survivor shuts down in order: exit 0, its Lease released.
	for _, r := range reps {
		if !r.exited() {
			if err := r.p.Signal(syscall.SIGTERM); err != nil {
				problem("SIGTERM to replica %s: %v", r.name, err)
			}
		}
	}
	for _, r := range reps {
		run, err := r.p.Wait()
		if err != nil {
			problem("replica %s: %v", r.name, err)
			continue
		}
		r.poll()
		switch {
		case run.OOMKilled:
			row.oom = true
			note("replica %s was killed for its memory (limit %s MiB)", r.name, testenv.MiB(serveMemoryLimit))
		case r.killed.IsZero() && run.Code != 0:
			problem("replica %s exited %d on SIGTERM, want 0; errors %v\n%s", r.name, run.Code, r.errors, tail(run.Stderr, 2048))
		}
		if r == leader {
			// Up to its kill: the exit's figures include the failover's
			// minutes, which the measured ones do not.
			row.hwm, row.cgroupPeak = max(row.hwm, run.MaxRSS), max(row.cgroupPeak, run.CgroupPeak)
		}
	}
	row.check(reps, zombies)
	return row
}

// exitedEarly records a replica that ended on its own: killed for its
// memory is a figure (the row misses its memory goal), any other end a
// problem.
func (r *serveRow) exitedEarly(rep *replica, when string) {
	run, err := rep.p.Wait()
	switch {
	case err != nil:
		r.problems = append(r.problems, fmt.Sprintf("replica %s ended %s: %v", rep.name, when, err))
	case run.OOMKilled:
		r.oom = true
		r.notes = append(r.notes, fmt.Sprintf("replica %s was killed for its memory %s (limit %s MiB, peak %s MiB)", rep.name, when, testenv.MiB(serveMemoryLimit), testenv.MiB(run.CgroupPeak)))
	default:
		r.problems = append(r.problems, fmt.Sprintf("replica %s exited %d %s; errors %v\n%s%s", rep.name, run.Code, when, rep.errors, tail(run.Stdout, 2048), tail(run.Stderr, 2048)))
	}
}

// fillMinutes adds to each measured minute the sweeps that ended in it.
func (r *serveRow) fillMinutes(sweeps []serveSummary) {
	for i := range r.minutes {
		m := &r.minutes[i]
		m.bytesKnown = true
		for _, s := range sweeps {
			if s.Time.Before(m.from) || !s.Time.Before(m.to) {
				continue
			}
			m.sweeps++
			m.github += s.GitHub
			if s.KubeBytes == nil {
				m.bytesKnown = false
			} else {
				m.kubeBytes += *s.KubeBytes
			}
		}
	}
}

// check holds the row to what must never happen: an action on anything
// but a planted zombie, a zombie acted on twice, two replicas sweeping at
// once; and to the world's shape afterwards (every scope its
// registrations).
func (r *serveRow) check(reps []*replica, zombies []zombie) {
	planted := map[string]int{}
	for _, z := range zombies {
		planted[z.name] = 0
	}
	for _, rep := range reps {
		for _, a := range rep.actions {
			n, ok := planted[a.Pod]
			if !ok {
				r.problems = append(r.problems, fmt.Sprintf("replica %s acted on %q (%s, %s, %s), which was not planted", rep.name, a.Pod, a.Action, a.Object, a.Result))
				continue
			}
			if a.Result == "deleted" {
				planted[a.Pod] = n + 1
			}
		}
	}
	for name, n := range planted {
		if n > 1 {
			r.problems = append(r.problems, fmt.Sprintf("zombie %s was deleted %d times", name, n))
		}
	}
	span := func(s serveSummary) (time.Time, time.Time) {
		return s.Time.Add(-time.Duration(s.DurationMS) * time.Millisecond), s.Time
	}
	for _, a := range reps[0].sweeps {
		for _, b := range reps[1].sweeps {
			a0, a1 := span(a)
			b0, b1 := span(b)
			if a0.Before(b1) && b0.Before(a1) {
				r.problems = append(r.problems, fmt.Sprintf("both replicas swept at once: %s from %s to %s, %s from %s to %s",
					reps[0].name, a0.Format(time.TimeOnly), a1.Format(time.TimeOnly), reps[1].name, b0.Format(time.TimeOnly), b1.Format(time.TimeOnly)))
				return
			}
		}
	}
}

// checkWorld holds the world to its shape after the serve rows: every
// scope its registrations, none lost to a wrong delete or a half-done
// replacement.
func (w *world) checkWorld() error {
	var errs []error
	for _, s := range w.scopes {
		if n := len(w.sim.Runners(s.String())); n != perScope {
			errs = append(errs, fmt.Errorf("scope %s has %d registrations, want %d", s, n, perScope))
		}
	}
	return errors.Join(errs...)
}

// The row's figures, as the table and the log show them.

// cpuPerMinute is the leader's processor seconds a minute.
func (r serveRow) cpuPerMinute() (float64, bool) {
	var cpu, wall time.Duration
	for _, m := range r.minutes {
		cpu += m.cpu
		wall += m.to.Sub(m.from)
	}
	if wall <= 0 {
		return 0, false
	}
	return cpu.Seconds() / wall.Minutes(), true
}

// bytesPerMinute is the leader's bytes from the API server a minute.
func (r serveRow) bytesPerMinute() (float64, bool) {
	if len(r.minutes) == 0 {
		return 0, false
	}
	var n int64
	for _, m := range r.minutes {
		if !m.bytesKnown {
			return 0, false
		}
		n += m.kubeBytes
	}
	return float64(n) / float64(len(r.minutes)), true
}

// githubPerMinute is the leader's GitHub requests a minute.
func (r serveRow) githubPerMinute() (float64, bool) {
	if len(r.minutes) == 0 {
		return 0, false
	}
	var n int64
	for _, m := range r.minutes {
		n += m.github
	}
	return float64(n) / float64(len(r.minutes)), true
}

// verdict judges the row against the goals (set at 100,000 runners and
// 1% churn, judged on every row): CPU under 1 s a minute, API bytes under
// 1% of the CronJob's full read, within the 256 MiB limit, the zombie
// within its goal. "PASS", or "MISS" and what missed; "?" for what could
// not be judged.
func (r serveRow) verdict() string {
	var miss, unknown []string
	if cpu, ok := r.cpuPerMinute(); !ok {
		unknown = append(unknown, "cpu")
	} else if cpu >= 1 {
		miss = append(miss, "cpu")
	}
	if b, ok := r.bytesPerMinute(); !ok || r.fullRead <= 0 {
		unknown = append(unknown, "api")
	} else if b >= float64(r.fullRead)/100 {
		miss = append(miss, "api")
	}
	if r.oom || max(r.hwm, r.cgroupPeak) >= serveMemoryLimit {
		miss = append(miss, "mem")
	}
	if r.zombie <= 0 || r.zombie > r.goal {
		miss = append(miss, "zombie")
	}
	switch {
	case len(miss) > 0:
		return "MISS(" + strings.Join(append(miss, unknown...), ",") + ")"
	case len(unknown) > 0:
		return "?(" + strings.Join(unknown, ",") + ")"
	}
	return "PASS"
}

// logLine is the row's figures in one line.
func (r serveRow) logLine() string {
	cpu, _ := r.cpuPerMinute()
	bytes, bytesOK := r.bytesPerMinute()
	gh, _ := r.githubPerMinute()
	var per []string
	for i, m := range r.minutes {
		per = append(per, fmt.Sprintf("minute %d: %.2f s CPU, %d sweeps, %s kube bytes (known %t), %d GitHub", i+1, m.cpu.Seconds(), m.sweeps, strconv.FormatInt(m.kubeBytes, 10), m.bytesKnown, m.github))
	}
	return fmt.Sprintf("startup %s; churn %.3f%%/min achieved; leader %.2f s CPU/min, %s API MB/min (known %t), %.0f GitHub/min, VmHWM %s MiB, cgroup peak %s MiB; standby %.2f s CPU/min, VmHWM %s MiB, cgroup peak %s MiB; zombie %s, failover %s, zombie after failover %s (goal %s); %s; %s",
		r.startup.Round(time.Second), r.achieved, cpu, fmtMB(bytes), bytesOK, gh, testenv.MiB(r.hwm), testenv.MiB(r.cgroupPeak),
		r.standbyCPU, testenv.MiB(r.standbyHWM), testenv.MiB(r.standbyCgroupPeak),
		r.zombie.Round(time.Second), r.failover.Round(time.Second), r.zombieAfter.Round(time.Second), r.goal, r.verdict(), strings.Join(per, "; "))
}

// fmtPct is a churn rate as the table shows it: 0.1, 1, 10.
func fmtPct(p float64) string { return strconv.FormatFloat(p, 'f', -1, 64) }

// fmtMB is bytes in MB (10^6) to two places.
func fmtMB(b float64) string { return strconv.FormatFloat(b/1e6, 'f', 2, 64) }
