// Command demo shows runner-reaper at work on a machine with nothing but Go
// (`make demo`): a local control plane (kube-apiserver and etcd), a
// simulated GitHub, a fleet with a runner in every failure state, and the
// real binary run the way a CronJob runs it: an audit, a sweep that marks, a
// sweep that reaps, and the audit again; then each runner's fate and the
// reason for it, checked against what the sweeps reported, so that the demo
// fails rather than explain what the reaper no longer does. With
// --monitoring (`make demo-monitoring`) each sweep also pushes its metrics
// to a real Pushgateway, which a real Prometheus scrapes and evaluates the
// shipped alerts over. It stops everything it started.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	namespace    = "arc-runners"
	scope        = "org:acme"
	token        = "ghp_demo_token_never_printed"
	stampLabel   = "pool.example.com/claimed-by"
	jobKey       = "pool.example.com/job"
	confirmAfter = 5 * time.Second
)

// options are the demo's flags.
type options struct {
	bin        string
	monitoring bool
	// began is when `make demo` began, for the time to the first sweep;
	// zero for when the demo itself began.
	began time.Time
}

func main() {
	bin := flag.String("binary", "bin/runner-reaper", "the runner-reaper binary to run")
	monitoring := flag.Bool("monitoring", false, "push each sweep's metrics to a real Pushgateway that a real Prometheus scrapes with the shipped alerts (make prometheus-tools builds them)")
	began := flag.Int64("began", 0, "when make demo began, in Unix seconds, to say how long the first sweep took to come")
	flag.Parse()
	o := options{bin: *bin, monitoring: *monitoring, began: time.Now()}
	if *began > 0 {
		o.began = time.Unix(*began, 0)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	say("Starting a local control plane (kube-apiserver and etcd) with ARC's CRDs")
	t := time.Now()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the control plane and the simulated GitHub")
		_ = env.Stop()
	}()
	fmt.Printf("    up in %s\n", time.Since(t).Round(100*time.Millisecond))
	sim := ghsim.New(ghsim.Options{Token: token})
	url, err := sim.Start()
	if err != nil {
		return fmt.Errorf("start GitHub simulator: %w", err)
	}
	defer sim.Close()
	say("Simulated GitHub API at " + url)

	dir, err := os.MkdirTemp("", "runner-reaper-demo-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a temporary directory left behind is no failure of the demo
	kubeconfig, err := env.Kubeconfig(dir)
	if err != nil {
		return err
	}

	var mon *testenv.Monitoring
	if o.monitoring {
		root, err := testenv.RepoRoot()
		if err != nil {
			return err
		}
		rules := filepath.Join(root, "charts", "runner-reaper", "files", "monitoring", "rules.yaml")
		mon, err = testenv.LaunchMonitoring(dir, rules)
		if err != nil {
			return fmt.Errorf("start the Pushgateway and Prometheus: %w", err)
		}
		defer mon.Stop()
		say("A Pushgateway at " + mon.Pushgateway + ", scraped by Prometheus at " + mon.Prometheus + " with the shipped alerts")
	}

	ctx := context.Background()
	fleet := demoFleet()
	say("Creating a fleet in namespace " + namespace + ": healthy, busy, one of every leak, and two runners that are not this deployment's")
	if err := createFleet(ctx, env.Client, sim, fleet); err != nil {
		return err
	}
	printFleet(ctx, env.Client, sim, fleet)
	time.Sleep(1500 * time.Millisecond) // let the unregistered pod pass its 1s registration deadline

	reaper := map[string]string{
		"KUBECONFIG":                   kubeconfig,
		"REAPER_SCOPES":                scope,
		"REAPER_NAMESPACES":            namespace,
		"REAPER_GITHUB_API_URL":        url,
		"REAPER_GITHUB_TOKEN":          token,
		"REAPER_LEDGER":                "configmap:" + namespace + "/runner-reaper-ledger",
		"REAPER_OWNER_STAMP_LABEL":     stampLabel,
		"REAPER_JOB_FROM":              "annotation:" + jobKey,
		"REAPER_GHOST_NAME_PREFIX":     "acme-",
		"REAPER_CONFIRM_AFTER":         confirmAfter.String(),
		"REAPER_STAMP_MAX_AGE":         confirmAfter.String(),
		"REAPER_REGISTRATION_DEADLINE": "1s",
		"REAPER_START_DEADLINE":        "1s",
		"REAPER_LOOP_THRESHOLD":        "3",
		"REAPER_MAX_ACTIONS":           "10",
		"REAPER_MAX_FRACTION":          "0.5",
	}
	if mon != nil {
		reaper["REAPER_PUSHGATEWAY_URL"] = mon.Pushgateway
		reaper["REAPER_METRICS_INSTANCE"] = "demo"
	}
	say("The reaper's configuration (short durations so the demo is quick; the defaults are 5m and 10m; `runner-reaper help sweep` lists every variable):")
	keys := make([]string, 0, len(reaper))
	for k := range reaper {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := reaper[k]
		if k == "REAPER_GITHUB_TOKEN" {
			v = "(secret)"
		}
		if k != "KUBECONFIG" {
			fmt.Printf("    %s=%s\n", k, v)
		}
	}

	var sweeps [2]swept
	step := func(title string, args ...string) (ran, error) {
		say(title + ":  runner-reaper " + strings.Join(args, " "))
		r, err := runReaper(ctx, o.bin, reaper, args...)
		if err != nil {
			return r, err
		}
		if strings.Contains(r.Stdout+r.Stderr, token) {
			return r, errors.New("the token appeared in the reaper's output")
		}
		// An audit's table is on stdout; its JSON lines, on stderr, are the
		// sweep's own and shown only when it fails.
		if args[0] == "audit" {
			fmt.Print(indent(r.Stdout))
			if r.Code != 0 && r.Stderr != "" {
				fmt.Print(indent(r.Stderr))
			}
		} else {
			printSweep(r)
		}
		fmt.Printf("    exit status %d\n", r.Code)
		return r, nil
	}
	if _, err := step("Audit before: what a sweep would do, and when (changes nothing)", "audit"); err != nil {
		return err
	}
	for i, title := range []string{
		"Sweep 1: terminal pods go now (the kubelet's word is final); GitHub-based verdicts are marked",
		"Sweep 2: marks held for REAPER_CONFIRM_AFTER act; registrations deleted first, then pods",
	} {
		if i == 1 {
			say(fmt.Sprintf("Waiting %s so the marks mature (REAPER_CONFIRM_AFTER)", confirmAfter+time.Second))
			time.Sleep(confirmAfter + time.Second)
		}
		r, err := step(title, "sweep")
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Printf("    (the first sweep, %s after make demo began)\n", time.Since(o.began).Round(time.Second))
		}
		if sweeps[i], err = parseSweep(r); err != nil {
			return fmt.Errorf("sweep %d: %w", i+1, err)
		}
	}
	if _, err := step("Audit after", "audit"); err != nil {
		return err
	}
	say("What is left")
	printFleet(ctx, env.Client, sim, fleet)

	problems := explainFleet(ctx, env.Client, sim, fleet, sweeps)
	if mon != nil {
		if err := printMetrics(ctx, mon); err != nil {
			return err
		}
	} else {
		say("Metrics and alerts, opt-in: make demo-monitoring")
		fmt.Println(wrap("runs the same demo with each sweep pushing its metrics to a real Pushgateway, which a real Prometheus scrapes "+
			"and evaluates the shipped alerts over; it builds Prometheus and the Pushgateway the first time (several minutes more on two cores).", "    "))
	}
	if len(problems) > 0 {
		say("The demo's explanations no longer match what the reaper did")
		for _, p := range problems {
			fmt.Println(wrap(p, "    "))
		}
		return fmt.Errorf("%d explanation(s) contradicted by the sweeps: the reaper's behaviour changed, so demo/main.go and demo/fleet.go must say what it does now", len(problems))
	}
	return nil
}

// ran is one run of the reaper: its exit status and what it wrote.
type ran struct {
	Code           int
	Stdout, Stderr string
}

// runReaper runs the binary as the CronJob would, with the environment env
// and nothing else of the demo's own (a stray REAPER_ variable must not
// steer it), and returns its exit status and output.
func runReaper(ctx context.Context, bin string, env map[string]string, args ...string) (ran, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := ran{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	case err != nil:
		return r, fmt.Errorf("run %s %v: %w", bin, args, err)
	}
	return r, nil
}

// printMetrics shows the series the last sweep pushed, as the Pushgateway
// holds them, and what the shipped alerts say of them once Prometheus has
// scraped and evaluated them.
func printMetrics(ctx context.Context, mon *testenv.Monitoring) error {
	say("The series the last sweep pushed (the Pushgateway's /metrics, runner_reaper_* only)")
	resp, err := http.Get(mon.Pushgateway + "/metrics")
	if err != nil {
		return fmt.Errorf("read the Pushgateway: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read whole: nothing to report
	if err != nil {
		return fmt.Errorf("read the Pushgateway: %w", err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "runner_reaper_") {
			fmt.Println("    " + l)
		}
	}
	// Prometheus scrapes and evaluates every second: wait until it has
	// the last sweep's time, then a moment for the rules.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := testenv.WaitPromQuery(wctx, mon.Prometheus, `runner_reaper_last_sweep_timestamp_seconds{instance="demo"}`,
		func(s []testenv.PromSample) bool { return len(s) > 0 }); err != nil {
		return fmt.Errorf("prometheus did not scrape the push: %w", err)
	}
	time.Sleep(2500 * time.Millisecond)
	rules, err := testenv.PromAlertRules(wctx, mon.Prometheus)
	if err != nil {
		return err
	}
	say("The shipped alerts over these sweeps (pending: firing once its `for` has passed; inactive: quiet)")
	for _, r := range rules {
		hold := ""
		if r.For > 0 {
			hold = fmt.Sprintf(" (for %s)", time.Duration(r.For*float64(time.Second)))
		}
		fmt.Printf("    %-32s %s%s\n", r.Name, r.State, hold)
	}
	return nil
}

func say(s string) { fmt.Printf("\n==> %s\n", s) }

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// printSweep shows each action line in a column a person can read, then the
// warnings and the summary line as the reaper wrote them.
func printSweep(r ran) {
	for _, line := range strings.Split(r.Stdout, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch m["msg"] {
		case "action":
			target := fmt.Sprint(m["namespace"], "/", m["pod"])
			if m["pod"] == "" {
				target = fmt.Sprint("registration ", m["runner_name"])
			}
			extra := ""
			switch c, ok := m["exit_class"]; {
			case ok && c == "unknown":
				extra = "  exit unknown (no terminated state)"
			case ok:
				extra = fmt.Sprintf("  exit %v (%v, code %v)", c, m["reason"], m["exit_code"])
			}
			if repo, ok := m["job_repository"]; ok {
				extra += fmt.Sprintf("  job %v run %v", repo, m["job_run_id"])
				if st, ok := m["job_status"]; ok {
					extra += fmt.Sprintf(" (%v)", st)
				}
			}
			fmt.Printf("    %-15v %-36s %-30v -> %v%s\n", m["verdict"], target, m["action"], m["result"], extra)
		case "sweep", "mass suspicion", "scope skipped", "reap loop":
			fmt.Println("    " + line)
		}
	}
	if r.Stderr != "" {
		fmt.Print(indent(r.Stderr))
	}
}

func printFleet(ctx context.Context, cs kubernetes.Interface, sim *ghsim.Sim, fleet []member) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Println("    list pods:", err)
		return
	}
	fmt.Printf("    pods (%d):", len(pods.Items))
	for _, p := range pods.Items {
		fmt.Print(" ", p.Name)
	}
	fmt.Println()
	// The simulator's truth, and what its API lists where the two differ,
	// as GitHub's do while a job runs.
	seen := map[string]bool{}
	for _, m := range fleet {
		sc := m.scopeOf()
		if seen[sc] {
			continue
		}
		seen[sc] = true
		regs := sim.Runners(sc)
		configured := ""
		if sc != scope {
			configured = ", not a configured scope"
		}
		fmt.Printf("    registrations in %s%s (%d):", sc, configured, len(regs))
		for _, r := range regs {
			busy := ""
			if r.Busy {
				busy = ",busy"
			}
			lie := ""
			if r.Lie.Offline && r.Busy {
				lie = "; listed offline,idle"
			}
			fmt.Printf(" %s(%s%s%s)", r.Name, r.Status, busy, lie)
		}
		fmt.Println()
	}
}
