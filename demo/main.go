// Command demo shows runner-reaper at work on a machine with nothing but Go:
// a local control plane (kube-apiserver and etcd), a simulated GitHub, a
// fleet with a runner in every failure state, and the real binary run the
// way a CronJob runs it: an audit, a sweep that marks, a sweep that reaps,
// and the audit again; each sweep pushes its metrics to a real Pushgateway,
// which a real Prometheus scrapes and evaluates the shipped alerts over.
// It stops everything it started.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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

func main() {
	bin := flag.String("binary", "bin/runner-reaper", "the runner-reaper binary to run")
	flag.Parse()
	if err := run(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(bin string) error {
	say("Starting a local control plane (kube-apiserver and etcd) with ARC's CRDs")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping the control plane and the simulated GitHub")
		_ = env.Stop()
	}()
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

	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	rules := filepath.Join(root, "charts", "runner-reaper", "files", "monitoring", "rules.yaml")
	mon, err := testenv.LaunchMonitoring(dir, rules)
	if err != nil {
		return fmt.Errorf("start the Pushgateway and Prometheus: %w", err)
	}
	defer mon.Stop()
	say("A Pushgateway at " + mon.Pushgateway + ", scraped by Prometheus at " + mon.Prometheus + " with the shipped alerts")

	say("Creating a fleet in namespace " + namespace + ": healthy, busy, and one of every leak")
	if err := createFleet(context.Background(), env.Client, sim); err != nil {
		return err
	}
	printFleet(context.Background(), env.Client, sim)
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
		"REAPER_MAX_ACTIONS":           "10",
		"REAPER_MAX_FRACTION":          "0.5",
		"REAPER_PUSHGATEWAY_URL":       mon.Pushgateway,
		"REAPER_METRICS_INSTANCE":      "demo",
	}
	say("The reaper's configuration (short durations so the demo is quick; the defaults are 5m and 10m):")
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

	ctx := context.Background()
	step := func(title string, args ...string) error {
		say(title + ":  runner-reaper " + strings.Join(args, " "))
		r, err := testenv.RunBinary(ctx, bin, reaper, args...)
		if err != nil {
			return err
		}
		if strings.Contains(r.Stdout+r.Stderr, token) {
			return fmt.Errorf("the token appeared in the reaper's output")
		}
		if args[0] == "audit" {
			fmt.Print(indent(r.Stdout))
		} else {
			printSweep(r)
		}
		fmt.Printf("    exit status %d\n", r.Code)
		return nil
	}
	if err := step("Audit before: what a sweep would do, and when (changes nothing)", "audit"); err != nil {
		return err
	}
	if err := step("Sweep 1: terminal pods go now (the kubelet's word is final); GitHub-based verdicts are marked", "sweep"); err != nil {
		return err
	}
	say(fmt.Sprintf("Waiting %s so the marks mature (REAPER_CONFIRM_AFTER)", confirmAfter+time.Second))
	time.Sleep(confirmAfter + time.Second)
	if err := step("Sweep 2: marks held for confirm-after; registrations deleted first, then pods", "sweep"); err != nil {
		return err
	}
	if err := step("Audit after", "audit"); err != nil {
		return err
	}
	say("What is left")
	printFleet(ctx, env.Client, sim)
	return printMetrics(ctx, mon)
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
func printSweep(r testenv.Run) {
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
		case "sweep", "mass suspicion", "scope skipped":
			fmt.Println("    " + line)
		}
	}
	if r.Stderr != "" {
		fmt.Print(indent(r.Stderr))
	}
}

func printFleet(ctx context.Context, cs kubernetes.Interface, sim *ghsim.Sim) {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Println("    list pods:", err)
		return
	}
	fmt.Printf("    pods (%d):", len(pods.Items))
	for _, p := range pods.Items {
		fmt.Print(" ", p.Name)
	}
	regs := sim.Runners(scope)
	fmt.Printf("\n    registrations on GitHub (%d):", len(regs))
	for _, r := range regs {
		busy := ""
		if r.Busy {
			busy = ",busy"
		}
		fmt.Printf(" %s(%s%s)", r.Name, r.Status, busy)
	}
	fmt.Println()
}

// member is one runner of the demo fleet: its pod as a kubelet would leave
// it, and its registration on GitHub.
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
	// job is the run the pool's dispatcher gave the runner
	// (OWNER/REPO/RUN_ID, on the annotation REAPER_JOB_FROM names);
	// running starts it on GitHub, and lying makes GitHub list the runner
	// offline and idle while it runs, its DELETE answered 204.
	job     string
	running bool
	lying   bool
}

func createFleet(ctx context.Context, cs kubernetes.Interface, sim *ghsim.Sim) error {
	exit := func(code int32, reason string) *corev1.ContainerStateTerminated {
		return testenv.Terminated(code, 0, reason)
	}
	fleet := []member{
		{name: "acme-healthy-1", pod: true, reg: "online"},
		{name: "acme-healthy-2", pod: true, reg: "online"},
		{name: "acme-busy", pod: true, reg: "online", busy: true},
		{name: "acme-zombie-1", pod: true, reg: "offline"},
		{name: "acme-zombie-2", pod: true, reg: "offline"},
		{name: "acme-unregistered", pod: true},
		{name: "acme-stamped", pod: true, stamped: true, reg: "online"},
		{name: "acme-done", pod: true, phase: corev1.PodSucceeded, term: exit(0, "Completed"), reg: "offline"},
		{name: "acme-lying", pod: true, reg: "online", job: "acme/api/4711", running: true, lying: true},
		{name: "acme-oom", pod: true, phase: corev1.PodFailed, term: exit(137, "OOMKilled"), job: "acme/api/4712"},
		{name: "acme-sigkill", pod: true, phase: corev1.PodFailed, term: exit(137, "Error")},
		{name: "acme-drained", pod: true, phase: corev1.PodFailed, term: exit(143, "Error")},
		{name: "acme-outdated", pod: true, phase: corev1.PodFailed, term: exit(7, "Error")},
		{name: "acme-crashed", pod: true, phase: corev1.PodFailed, last: exit(139, "Error")},
		{name: "acme-vanished", pod: true, phase: corev1.PodFailed, noState: true},
		{name: "acme-ghost", reg: "offline"},
		{name: "build-box-7", reg: "offline"}, // another team's runner: never touched
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	sim.AddScope(scope)
	for _, m := range fleet {
		if m.reg != "" {
			r := ghsim.Runner{Name: m.name, Status: m.reg, Busy: m.busy, Ephemeral: true,
				Labels: []ghsim.Label{{Name: "self-hosted", Type: "read-only"}, {Name: "linux", Type: "read-only"}}}
			if m.lying {
				r.Lie = ghsim.Lie{BusyLag: time.Hour, Offline: true}
			}
			sim.AddRunner(scope, r)
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
	p := testenv.RunnerPod{Name: m.name, Org: "acme", PodState: testenv.PodState{
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
	_, err := testenv.CreateRunnerPod(ctx, cs, namespace, p)
	return err
}
