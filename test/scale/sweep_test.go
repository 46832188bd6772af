package scale_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/kube"
	"github.com/runner-reaper/runner-reaper/state"
	"github.com/runner-reaper/runner-reaper/state/configmap"
	"github.com/runner-reaper/runner-reaper/state/file"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// ledgerNamespace holds the ConfigMap ledgers, one a binary and fleet
// size, apart from the runners.
const ledgerNamespace = "scale-ledger"

// ledgerBackend is where the binaries keep their ledgers (BENCH_LEDGER):
// a ConfigMap, as the shipped CronJob does, or a local file, which costs
// the API server nothing, to tell the ledger's share of a sweep from the
// rest.
type ledgerBackend string

const (
	ledgerConfigMap ledgerBackend = "configmap"
	ledgerFile      ledgerBackend = "file"
)

// sweepTimeout bounds one process: far above any sweep's own deadline
// (REAPER_SWEEP_TIMEOUT, 45 s by default), so that only a hung process
// meets it.
const sweepTimeout = 10 * time.Minute

// binary is one binary the bench sweeps with, and how.
type binary struct {
	// name labels its rows: "current" (built from this tree) or
	// "baseline" (BENCH_BASELINE), with "@" and the timeout when it has
	// one of its own.
	name, path string
	// timeout is REAPER_SWEEP_TIMEOUT; empty leaves the binary's default.
	timeout string
	// memoryLimit, when positive, is the memory limit of the cgroup the
	// binary runs in, as a container's (testenv.RunOptions.MemoryLimit).
	memoryLimit int64
	// variant is a build of this tree measured beside it (stdread): what
	// its sweeps fall short of is shown in the table and fails nothing,
	// so that a read path that does not fit a size (its deadline, its
	// memory limit) does not keep the larger sizes from being measured.
	variant bool
}

// summary is what the bench reads of a sweep's summary line (msg
// "sweep"); see report.summaryAttrs for the contract.
type summary struct {
	Status        int            `json:"status"`
	DurationMS    int64          `json:"duration_ms"`
	Pods          int            `json:"pods_observed"`
	Registrations int            `json:"registrations_observed"`
	Scopes        int            `json:"scopes"`
	Skipped       []string       `json:"scopes_skipped"`
	Deferred      []string       `json:"scopes_deferred"`
	Unobserved    []string       `json:"namespaces_unobserved"`
	Verdicts      map[string]int `json:"verdicts"`
	GitHub        int64          `json:"github_requests"`
	NotModified   int64          `json:"github_not_modified"`
	Kube          int64          `json:"kube_requests"`
	TrimmedLists  int            `json:"ledger_trimmed_lists"`
	TrimmedMarks  int            `json:"ledger_trimmed_marks"`
	Error         string         `json:"error"`
	Stopped       string         `json:"stopped"`
	// KubeBytes is what the sweep read from the API server, as the
	// binary counts it; 0 from one that does not say.
	KubeBytes int64 `json:"kube_bytes"`
}

// sweepRun is one process's sweep: what it cost, what it said, and the
// ledger before and after it.
type sweepRun struct {
	testenv.Run
	summary
	// cold is true for the first sweep on an empty ledger.
	cold bool
	// cachedBefore is how many scopes had a list cache in the ledger the
	// sweep loaded; listed how many scopes it listed (the rest it
	// deferred).
	cachedBefore, listed int
	// ledgerBytes is the ledger's size after the sweep: a ConfigMap's
	// keys and values, as the ledger's size limit counts them, or a
	// file's bytes.
	ledgerBytes int
	// problem is how the sweep fell short of what the world makes
	// certain (see check); nil when it did not.
	problem error
}

// sweeper runs sweeps of one fleet size: each binary against its own
// ledger, so that one binary's list cache never answers for another's.
type sweeper struct {
	w          *world
	kubeconfig string
	// size is the fleet's size these sweeps must observe.
	size int
	// ledger is the ledgers' backend; dir holds them when they are files.
	ledger ledgerBackend
	dir    string
}

// ledgerName is the ledger of bin at this size: fresh for each size, so
// that each size's first sweep is cold.
func (s sweeper) ledgerName(bin binary) string {
	return fmt.Sprintf("ledger-%d-%s", s.size, strings.ToLower(strings.ReplaceAll(bin.name, "@", "-")))
}

// ledgerPath is the file ledger of bin at this size.
func (s sweeper) ledgerPath(bin binary) string {
	return filepath.Join(s.dir, s.ledgerName(bin)+".json")
}

// ledgerArg is the REAPER_LEDGER of bin at this size.
func (s sweeper) ledgerArg(bin binary) string {
	if s.ledger == ledgerFile {
		return "file:" + s.ledgerPath(bin)
	}
	return "configmap:" + ledgerNamespace + "/" + s.ledgerName(bin)
}

// loadLedger reads bin's ledger as its next sweep will find it.
func (s sweeper) loadLedger(ctx context.Context, bin binary) (state.Ledger, error) {
	var (
		l   state.Ledger
		err error
	)
	if s.ledger == ledgerFile {
		l, _, err = file.New(s.ledgerPath(bin)).Load(ctx)
	} else {
		cms := s.w.env.Client.CoreV1().ConfigMaps(ledgerNamespace)
		l, _, err = configmap.New(cms, ledgerNamespace, s.ledgerName(bin), nil).Load(ctx)
	}
	return l, err
}

// ledgerBytes is the size of bin's ledger (see sweepRun.ledgerBytes); 0
// when there is none: a sweep that failed before its save leaves none.
func (s sweeper) ledgerBytes(ctx context.Context, bin binary) (int, error) {
	if s.ledger == ledgerFile {
		fi, err := os.Stat(s.ledgerPath(bin))
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return int(fi.Size()), nil
	}
	cm, err := s.w.env.Client.CoreV1().ConfigMaps(ledgerNamespace).Get(ctx, s.ledgerName(bin), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for k, v := range cm.Data {
		n += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		n += len(k) + len(v)
	}
	return n, nil
}

// env is the binary's environment: every scope and namespace, ARC leaks
// on, its own ledger, and otherwise the defaults an operator gets.
func (s sweeper) env(bin binary) map[string]string {
	env := map[string]string{
		"KUBECONFIG":        s.kubeconfig,
		"REAPER_SCOPES":     strings.Join(s.w.scopeKeys(), ","),
		"REAPER_NAMESPACES": strings.Join(s.w.namespaces, ","),
		"REAPER_ARC_LEAKS":  "true",
		// Ghosts judged too: every registration is this deployment's.
		"REAPER_GHOST_NAME_PREFIX": "runner-",
		"REAPER_GITHUB_API_URL":    s.w.simURL,
		"REAPER_GITHUB_TOKEN":      token,
		"REAPER_LEDGER":            s.ledgerArg(bin),
	}
	if bin.timeout != "" {
		env["REAPER_SWEEP_TIMEOUT"] = bin.timeout
	}
	return env
}

// sweep runs one sweep of bin and checks that it observed the whole fleet,
// found nothing to do and cost exactly the requests it should (see
// wantKube and check): a sweep that falls short is returned with its
// problem, measured like any other (a sweep stopped by its deadline costs
// what it cost); the error is for a sweep that could not be run or read.
func (s sweeper) sweep(ctx context.Context, bin binary, cold bool) (sweepRun, error) {
	ledger, err := s.loadLedger(ctx, bin)
	if err != nil {
		return sweepRun{}, fmt.Errorf("load the ledger before the sweep: %w", err)
	}
	out := sweepRun{cold: cold}
	if cold && (len(ledger.Lists) > 0 || len(ledger.Marks) > 0) {
		return out, fmt.Errorf("%s's cold sweep: its ledger %s is not empty", bin.name, s.ledgerArg(bin))
	}
	ctx, cancel := context.WithTimeout(ctx, sweepTimeout)
	defer cancel()
	out.Run, err = testenv.RunBinaryWith(ctx, bin.path, s.env(bin), testenv.RunOptions{MemoryLimit: bin.memoryLimit}, "sweep")
	if err != nil {
		return out, fmt.Errorf("run %s: %w", bin.name, err)
	}
	if out.OOMKilled {
		// Measured and kept: the size fails.
		out.problem = fmt.Errorf("killed for its memory, over its limit of %s MiB", testenv.MiB(bin.memoryLimit))
		return out, nil
	}
	if out.summary, err = summaryOf(out.Run); err != nil {
		return out, fmt.Errorf("%s: %w", bin.name, err)
	}
	deferred := make(map[string]bool, len(out.Deferred))
	for _, k := range out.Deferred {
		deferred[k] = true
	}
	out.listed = out.Scopes - len(out.Deferred)
	for key := range ledger.Lists {
		if !deferred[key] {
			out.cachedBefore++
		}
	}
	if out.ledgerBytes, err = s.ledgerBytes(ctx, bin); err != nil {
		return out, fmt.Errorf("read the ledger after %s's sweep: %w", bin.name, err)
	}
	// The baseline's rows, "baseline" and "baseline@10m" (see
	// measureSize), may be a binary from before the EphemeralRunners'
	// watch-list.
	out.problem = s.check(out, strings.HasPrefix(bin.name, "baseline"), bin.variant)
	return out, nil
}

// kind names a sweep in messages.
func kind(cold bool) string {
	if cold {
		return "cold"
	}
	return "warm"
}

// wantKube is the Kubernetes requests of a sweep that acts on nothing:
// for the ConfigMap ledger its get and save, for a file ledger none (see
// ledgerRequests); per namespace one pod watch-list (the API server gives
// one) and one EphemeralRunner watch-list, or, for a baseline from before
// that watch-list (ersInPages), the EphemeralRunners in pages of
// kube.DefaultPageSize (one page even when there are none).
func (s sweeper) wantKube(ersInPages bool) int64 {
	if !ersInPages {
		return s.ledgerRequests() + 2*namespaces
	}
	n := s.ledgerRequests()
	for i := range namespaces {
		ers := int64(s.size / namespaces)
		if i < s.size%namespaces {
			ers++
		}
		n += 1 + max(1, (ers+kube.DefaultPageSize-1)/kube.DefaultPageSize)
	}
	return n
}

// ledgerRequests is what the ledger costs the API server a sweep: for the
// ConfigMap ledger its get and save; a file ledger, none.
func (s sweeper) ledgerRequests() int64 {
	if s.ledger == ledgerFile {
		return 0
	}
	return 2
}

// check holds a sweep to what the world makes certain: it completed with
// nothing to do, observed every pod, listed every scope it did not defer
// with one request (a 304 where the ledger held the scope's list cache),
// saw every registration of those, and sent exactly wantKube requests to
// the API server (a baseline: those or, from a binary before the
// EphemeralRunners' watch-list, the pages' count; the reflectors' read
// path: those and its two reads of the resourceVersion).
func (s sweeper) check(r sweepRun, baseline, reflectors bool) error {
	var errs []error
	if r.Code != 0 || r.Status != 0 || r.Error != "" || r.Stopped != "" {
		errs = append(errs, fmt.Errorf("exit %d, status %d, error %q, stopped %q; want a complete sweep", r.Code, r.Status, r.Error, r.Stopped))
	}
	if r.Pods != s.size {
		errs = append(errs, fmt.Errorf("%d pods observed, want %d", r.Pods, s.size))
	}
	if r.Scopes != len(s.w.scopes) || len(r.Skipped) > 0 || r.listed < 1 {
		errs = append(errs, fmt.Errorf("%d scopes, %d listed, skipped %v; want %d, at least one listed, none skipped", r.Scopes, r.listed, r.Skipped, len(s.w.scopes)))
	}
	if r.Registrations != perScope*r.listed {
		errs = append(errs, fmt.Errorf("%d registrations observed in %d listed scopes, want %d", r.Registrations, r.listed, perScope*r.listed))
	}
	if r.GitHub != int64(r.listed) || r.NotModified != int64(r.cachedBefore) {
		errs = append(errs, fmt.Errorf("%d GitHub requests (%d answered 304), want one a listed scope, %d, answered 304 for the %d whose list the ledger held",
			r.GitHub, r.NotModified, r.listed, r.cachedBefore))
	}
	want := s.wantKube(false)
	if reflectors {
		// The reflectors' read proves its stores fresh with one small
		// consistent read of each resource's resourceVersion.
		want += 2
	}
	if r.Kube != want && !(baseline && r.Kube == s.wantKube(true)) {
		errs = append(errs, fmt.Errorf("%d Kubernetes requests, want %d (%d for the %s ledger, and per namespace a pod watch-list and the EphemeralRunners' watch-list; a baseline may read them in pages, %d)", r.Kube, want, s.ledgerRequests(), s.ledger, s.wantKube(true)))
	}
	if len(r.Verdicts) > 0 || len(r.Unobserved) > 0 {
		errs = append(errs, fmt.Errorf("verdicts %v, namespaces unobserved %v; want none in a healthy fleet", r.Verdicts, r.Unobserved))
	}
	return errors.Join(errs...)
}

// summaryOf decodes the run's summary line.
func summaryOf(run testenv.Run) (summary, error) {
	var out summary
	err := run.Summary(&out)
	return out, err
}

// rotation is how many sweeps list every scope at the fewest any of runs
// listed; 0 when one of them listed none (it failed before its lists).
func rotation(runs []sweepRun, scopes int) int {
	fewest := slices.MinFunc(runs, func(a, b sweepRun) int { return a.listed - b.listed }).listed
	if fewest <= 0 {
		return 0
	}
	return (scopes + fewest - 1) / fewest
}
