package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/textwrap"
	"github.com/runner-reaper/runner-reaper/test/ghsim"
)

// swept is one sweep's output, as the reaper wrote it: its action lines,
// its warnings and its summary line, each decoded.
type swept struct {
	actions  []map[string]any
	warnings []map[string]any
	summary  map[string]any
}

// parseSweep decodes a sweep's JSON lines; a sweep with no summary line
// is an error, since every sweep writes one.
func parseSweep(r ran) (swept, error) {
	var s swept
	for _, line := range strings.Split(r.Stdout, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		switch {
		case m["msg"] == "action":
			s.actions = append(s.actions, m)
		case m["msg"] == "sweep":
			s.summary = m
		case m["level"] == "WARN":
			s.warnings = append(s.warnings, m)
		}
	}
	if s.summary == nil {
		return s, fmt.Errorf("the sweep wrote no summary line (exit status %d): %s", r.Code, r.Stderr)
	}
	return s, nil
}

// actionOf is the action line naming the runner, or nil.
func (s swept) actionOf(name string) map[string]any {
	for _, a := range s.actions {
		if a["pod"] == name || (a["pod"] == "" && a["runner_name"] == name) {
			return a
		}
	}
	return nil
}

// warning is the first warning with this message, or nil.
func (s swept) warning(msg string) map[string]any {
	for _, w := range s.warnings {
		if w["msg"] == msg {
			return w
		}
	}
	return nil
}

// count is a number of the summary line; -1 when it has none by that name.
func (s swept) count(key string) int {
	n, ok := s.summary[key].(float64)
	if !ok {
		return -1
	}
	return int(n)
}

// exitMeanings say in a few words what each exit fingerprint class of the
// action lines means (docs/design.md's table says more).
var exitMeanings = map[string]string{
	"clean":    "a clean exit",
	"oom-host": "the container hit its memory limit",
	"sigkill":  "killed with SIGKILL, not by the container's memory limit (an OOM inside a VM, say)",
	"sigterm":  "stopped with SIGTERM: a drain or a deleted pod",
	"outdated": "ARC's exit code for a runner version too old to run",
	"crash":    "a crash: a segfault, an abort, an unhandled error",
	"unknown":  "no end recorded: the node or VM died first",
}

// explainer checks what the sweeps reported against what the demo
// expects of each runner, and says why each fared as it did; a claim the
// sweeps do not bear out is collected, never printed as though it held.
type explainer struct {
	fleet    []member
	sweeps   [2]swept
	problems []string
	defaults map[string]string
}

func (e *explainer) wrong(format string, args ...any) {
	e.problems = append(e.problems, fmt.Sprintf(format, args...))
}

// explainFleet prints each runner's fate and reason, and returns what did
// not match.
func explainFleet(ctx context.Context, cs kubernetes.Interface, sim *ghsim.Sim, fleet []member, sweeps [2]swept) []string {
	e := &explainer{fleet: fleet, sweeps: sweeps, defaults: map[string]string{}}
	vars, err := config.Variables()
	if err != nil {
		e.wrong("the reaper's variables: %v", err)
	}
	for _, v := range vars {
		e.defaults[v.Names[0]] = config.Plain(v.Default)
	}
	pods, regs, err := survivors(ctx, cs, sim, fleet)
	if err != nil {
		e.wrong("what is left: %v", err)
	}
	say("What happened to each runner, and why (checked against the sweeps' action and summary lines)")
	for _, m := range fleet {
		e.explainMember(m, pods, regs)
	}
	e.explainMassSuspicion()
	e.explainLoop(ctx, cs)
	return e.problems
}

func (e *explainer) explainMember(m member, pods, regs map[string]bool) {
	var line map[string]any
	sweep := 0
	for i, s := range e.sweeps {
		if a := s.actionOf(m.name); a != nil {
			line, sweep = a, i+1
			break
		}
	}
	want := m.fate
	var fate string
	switch {
	case line == nil && want.sweep == 0:
		fate = "left alone"
	case line == nil:
		e.wrong("%s: expected %s -> %s in sweep %d, but no sweep reported an action on it", m.name, want.verdict, want.result, want.sweep)
		fate = "NOT ACTED ON, unlike what the demo expects"
	case want.sweep == 0:
		e.wrong("%s: expected to be left alone, but sweep %d reported %v -> %v", m.name, sweep, line["verdict"], line["result"])
		fate = fmt.Sprintf("%v -> %v in sweep %d, UNLIKE what the demo expects", line["verdict"], line["result"], sweep)
	case sweep != want.sweep || line["verdict"] != want.verdict || line["result"] != want.result:
		e.wrong("%s: expected %s -> %s in sweep %d, but sweep %d reported %v -> %v", m.name, want.verdict, want.result, want.sweep, sweep, line["verdict"], line["result"])
		fate = fmt.Sprintf("%v -> %v in sweep %d, UNLIKE what the demo expects", line["verdict"], line["result"], sweep)
	default:
		fate = fmt.Sprintf("%v in sweep %d: %v", line["result"], sweep, line["verdict"])
	}
	if want.counted != "" {
		wanted := 0
		for _, o := range e.fleet {
			if o.fate.counted == want.counted {
				wanted++
			}
		}
		for i, s := range e.sweeps {
			if n := s.count(want.counted); n != wanted {
				e.wrong("%s: sweep %d's summary has %s=%d, where the demo counts %d runner(s) like it", m.name, i+1, want.counted, n, wanted)
				fate += fmt.Sprintf(", but sweep %d's summary has %s=%d, UNLIKE what the demo expects", i+1, want.counted, n)
			}
		}
	}
	e.checkSurvival(m, pods, regs)

	fmt.Printf("    %-18s %s\n", m.name, fate)
	fmt.Println(wrap(m.why, "        "))
	if line == nil {
		return
	}
	if ev, _ := line["evidence"].(string); ev != "" {
		fmt.Println(wrap("evidence: "+ev, "        "))
	}
	if class, ok := line["exit_class"].(string); ok {
		meaning := exitMeanings[class]
		if meaning == "" {
			meaning = "see the exit fingerprint in docs/design.md"
		}
		fmt.Println(wrap(fmt.Sprintf("exit fingerprint %s: %s", class, meaning), "        "))
	}
	if repo, ok := line["job_repository"]; ok {
		job := fmt.Sprintf("its job: %v run %v", repo, line["job_run_id"])
		if st, ok := line["job_status"]; ok {
			job += fmt.Sprintf(", which GitHub says is %v", st)
		} else {
			job += "; GitHub was not asked about it"
		}
		fmt.Println(wrap(job, "        "))
	}
}

// checkSurvival holds the member's fate to what is left on the cluster
// and on GitHub: what was deleted is gone, and the rest is still there.
func (e *explainer) checkSurvival(m member, pods, regs map[string]bool) {
	gone := m.fate.result == "deleted"
	if m.pod && pods[m.name] == gone {
		e.wrong("%s: its pod is %s at the end", m.name, map[bool]string{true: "still there", false: "gone"}[pods[m.name]])
	}
	if m.reg != "" && regs[m.name] == gone {
		e.wrong("%s: its registration is %s at the end", m.name, map[bool]string{true: "still there", false: "gone"}[regs[m.name]])
	}
}

// explainMassSuspicion says what sweep 1's mass-suspicion warning meant,
// from the warning itself, and that the reaper went on acting, from sweep
// 2's action lines.
func (e *explainer) explainMassSuspicion() {
	say("The mass-suspicion warning in sweep 1")
	w := e.sweeps[0].warning("mass suspicion")
	if w == nil {
		e.wrong("sweep 1 wrote no mass-suspicion warning, though most of org:acme's running pods turned suspect in it")
		fmt.Println("    Sweep 1 raised no mass-suspicion alarm, UNLIKE what the demo expects.")
		return
	}
	confirmed := 0
	for _, a := range e.sweeps[1].actions {
		if a["verdict"] != "terminal" && a["result"] == "deleted" {
			confirmed++
		}
	}
	if confirmed == 0 {
		e.wrong("sweep 2 deleted none of the runners marked in sweep 1: the alarm may now stop the reaper, which the demo does not say")
	}
	fmt.Println(wrap(fmt.Sprintf("%v of %v's %v running pods turned suspect in one sweep: at least REAPER_MASS_SUSPICION_MIN (%s) of them, "+
		"and at least REAPER_MASS_SUSPICION_FRACTION (%s) of the scope's running pods. So many runners dying at once is more often GitHub, "+
		"or the reaper's view of it, being wrong than a real mass death, so the reaper says so loudly: this warning, the summary's "+
		"mass_suspicion_scopes, the metric runner_reaper_sweep_mass_suspicion_scopes and the shipped alert RunnerReaperMassSuspicion.",
		w["newly_suspect"], w["scope"], w["pods"], e.defaults["REAPER_MASS_SUSPICION_MIN"], e.defaults["REAPER_MASS_SUSPICION_FRACTION"]), "    "))
	if confirmed == 0 {
		fmt.Println(wrap(fmt.Sprintf("Its effect, as the warning says: %q. But sweep 2 deleted none of the runners sweep 1 marked, "+
			"UNLIKE what the demo expects.", w["effect"]), "    "))
		return
	}
	fmt.Println(wrap(fmt.Sprintf("It does not stop the reaper. As the warning's effect says: %q. Nothing marked goes before REAPER_CONFIRM_AFTER, "+
		"and no sweep removes more than REAPER_MAX_ACTIONS or REAPER_MAX_FRACTION of the pods, so a false alarm drains slowly enough to be "+
		"stopped, and a real one, as here, is cleaned up: sweep 2 deleted %d of the runners sweep 1 marked.", w["effect"], confirmed), "    "))
}

// survivors are the members' pods and registrations still there.
func survivors(ctx context.Context, cs kubernetes.Interface, sim *ghsim.Sim, fleet []member) (pods, regs map[string]bool, err error) {
	pods, regs = map[string]bool{}, map[string]bool{}
	list, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list the pods: %w", err)
	}
	for _, p := range list.Items {
		pods[p.Name] = true
	}
	scopes := map[string]bool{}
	for _, m := range fleet {
		if !scopes[m.scopeOf()] {
			scopes[m.scopeOf()] = true
			for _, r := range sim.Runners(m.scopeOf()) {
				regs[r.Name] = true
			}
		}
	}
	return pods, regs, nil
}

// wrap breaks text into lines of at most 78 characters where it can, each
// starting with indent.
func wrap(text, indent string) string { return textwrap.Wrap(text, 78, indent) }

// explainLoop says what sweep 1's reap-loop warning meant, from the
// warning itself and the Event on the ReplicaSet.
func (e *explainer) explainLoop(ctx context.Context, cs kubernetes.Interface) {
	say("The reap-loop warning in sweep 1")
	w := e.sweeps[0].warning("reap loop")
	want := "ReplicaSet " + namespace + "/" + brokenSet
	switch {
	case w == nil:
		e.wrong("sweep 1 wrote no reap-loop warning, though it deleted every pod of %s, each ended the same way", brokenSet)
		fmt.Println("    Sweep 1 reported no reap loop, UNLIKE what the demo expects.")
		return
	case w["group"] != want || w["fingerprint"] != "outdated":
		e.wrong("sweep 1's reap-loop warning names group %v, fingerprint %v; the demo expects %s, outdated", w["group"], w["fingerprint"], want)
	}
	evs, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=ReplicaSet,involvedObject.name=" + brokenSet})
	switch {
	case err != nil:
		e.wrong("list the Events on ReplicaSet %s: %v", brokenSet, err)
	case !hasReason(evs.Items, "RunnerReapLoop"):
		e.wrong("no RunnerReapLoop Event was recorded on ReplicaSet %s", brokenSet)
	}
	fmt.Println(wrap(fmt.Sprintf("Sweep 1 reaped %v pods of %v within REAPER_LOOP_WINDOW, every one with the exit fingerprint %v: "+
		"the same failure over and over, which deleting the pods does not fix (the demo sets REAPER_LOOP_THRESHOLD to 3; the default is %s). "+
		"So the reaper says what to fix, in the warning, in an Event on the ReplicaSet, in the metric runner_reaper_reap_loops and the "+
		"shipped alert RunnerReaperReapLoop: %q. While the loop stands, the group's ended pods still go, and of its runners that need "+
		"confirmation (never-started, unregistered, zombie) one a sweep, so the churn slows and the fault stays visible.",
		w["count"], w["group"], w["fingerprint"], e.defaults["REAPER_LOOP_THRESHOLD"], w["fix"]), "    "))
}

func hasReason(evs []corev1.Event, reason string) bool {
	for _, ev := range evs {
		if ev.Reason == reason {
			return true
		}
	}
	return false
}
