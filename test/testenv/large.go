package testenv

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// LargeOptions configure a control plane for a fleet of a hundred thousand
// runners (see StartLarge).
type LargeOptions struct {
	// QuotaBackendBytes is etcd's --quota-backend-bytes; 0 is
	// DefaultLargeQuota.
	QuotaBackendBytes int64
	// MaxRequestsInflight and MaxMutatingRequestsInflight are the API
	// server's limits of the same names; 0 is 2000 and 1000. Priority and
	// fairness divides them among its levels; an administrator's requests
	// (system:masters) are exempt from them either way.
	MaxRequestsInflight, MaxMutatingRequestsInflight int
	// APIServerMemoryLimit is the API server's GOMEMLIMIT, in bytes; 0 is
	// five eighths of the machine's memory.
	APIServerMemoryLimit int64
}

// DefaultLargeQuota is etcd's backend quota for StartLarge: 8 GiB. Etcd's
// default, 2 GiB, is what a world of 100,000 runner pods and as many
// EphemeralRunners outgrows: each pod is about 11 KB stored and each
// EphemeralRunner about 8 KB, both written twice (create, then status),
// and etcd keeps every revision until the API server's compaction (every
// 5 minutes) frees them for reuse: up to 100,000 × 2 × 19 KB = 3.8 GB
// before a compaction (measured: 1.13 GB at 30,000 runners), on a
// database file that never shrinks.
const DefaultLargeQuota int64 = 8 << 30

// StartLarge is Start for benchmarks of fleets of up to a few hundred
// thousand objects on one machine:
//   - etcd with a quota big enough for them, without fsync (the data is
//     thrown away; fsync on every commit is what would otherwise bound the
//     build's write rate), and a snapshot every 10,000 writes rather than
//     100,000: etcd keeps the raft log since its last snapshot in memory,
//     whole objects, about 1 GB of pods by the default;
//   - an API server whose in-flight limits do not queue the dozens of
//     writers that build the fleet, without the PodSecurity admission
//     plugin (it keeps an informer's copy of every pod: about 1.8 GB at
//     100,000 runner pods, and a decode of each write), and run with a
//     GOMEMLIMIT: its watch cache holds every pod and EphemeralRunner
//     decoded, with the recent versions the build left (about 150 KB a
//     runner measured at 30,000, most of it the EphemeralRunners as maps,
//     managed fields included), and Go's default heap goal of twice that
//     would not fit beside etcd on the machine; the limit makes it
//     collect harder near it instead.
//
// Nothing else differs from Start: the same binaries, RBAC, ARC's CRDs.
// Never for a test of durability: a crash of etcd loses what it
// acknowledged.
func StartLarge(o LargeOptions) (*Env, error) {
	quota := o.QuotaBackendBytes
	if quota == 0 {
		quota = DefaultLargeQuota
	}
	inflight, mutating := o.MaxRequestsInflight, o.MaxMutatingRequestsInflight
	if inflight == 0 {
		inflight = 2000
	}
	if mutating == 0 {
		mutating = 1000
	}
	limit := o.APIServerMemoryLimit
	if limit == 0 {
		total, err := memTotal()
		if err != nil {
			return nil, err
		}
		limit = total / 8 * 5
	}
	// envtest starts the API server with this process's environment and
	// no way to add to it: a script that sets the limit and execs it, in
	// the same process (its name and parent stay the API server's).
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "testenv-large-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir) // exec'd by the time start returns
	script := filepath.Join(dir, "kube-apiserver")
	body := fmt.Sprintf("#!/bin/sh\nGOMEMLIMIT=%d exec %q \"$@\"\n", limit, filepath.Join(AssetsDir(root), "kube-apiserver"))
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return nil, fmt.Errorf("API server wrapper: %w", err)
	}
	return start(func(e *envtest.Environment) {
		api := e.ControlPlane.GetAPIServer()
		api.Path = script
		if e.ControlPlane.Etcd == nil {
			e.ControlPlane.Etcd = &envtest.Etcd{}
		}
		etcd := e.ControlPlane.Etcd.Configure()
		etcd.Set("quota-backend-bytes", strconv.FormatInt(quota, 10))
		etcd.Set("unsafe-no-fsync", "true")
		etcd.Set("snapshot-count", "10000")
		flags := api.Configure()
		flags.Set("max-requests-inflight", strconv.Itoa(inflight))
		flags.Set("max-mutating-requests-inflight", strconv.Itoa(mutating))
		flags.Set("disable-admission-plugins", "ServiceAccount", "PodSecurity")
	})
}

// memTotal is the machine's memory, from /proc/meminfo.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("machine memory: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			if n := kB(strings.TrimSpace(v)); n > 0 {
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("machine memory: no MemTotal in /proc/meminfo")
}

// PlaneUsage is what the control plane's processes hold at one moment.
type PlaneUsage struct {
	// APIServerRSS and EtcdRSS are each process's resident set now
	// (VmRSS), in bytes; the Peak ones its highest so far (VmHWM).
	APIServerRSS, APIServerPeakRSS int64
	EtcdRSS, EtcdPeakRSS           int64
	// EtcdDBBytes is the size of etcd's database file; EtcdDBInUseBytes
	// the part of it that holds live revisions (the rest is free pages
	// that compacted revisions left, which etcd reuses but never returns).
	EtcdDBBytes, EtcdDBInUseBytes int64
}

// Usage reads the control plane's processes' memory from /proc (they are
// this process's children) and etcd's database size from its metrics, on
// loopback.
func (e *Env) Usage(ctx context.Context) (PlaneUsage, error) {
	var u PlaneUsage
	procs, err := childrenMemory()
	if err != nil {
		return u, err
	}
	api, ok := procs["kube-apiserver"]
	if !ok {
		return u, fmt.Errorf("control plane usage: no kube-apiserver among this process's children")
	}
	etcd, ok := procs["etcd"]
	if !ok {
		return u, fmt.Errorf("control plane usage: no etcd among this process's children")
	}
	u.APIServerRSS, u.APIServerPeakRSS = api[0], api[1]
	u.EtcdRSS, u.EtcdPeakRSS = etcd[0], etcd[1]
	metrics, err := etcdMetrics(ctx, e.env.ControlPlane.Etcd.URL.String()+"/metrics",
		"etcd_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_use_in_bytes")
	if err != nil {
		return u, err
	}
	u.EtcdDBBytes, u.EtcdDBInUseBytes = metrics[0], metrics[1]
	return u, nil
}

// childrenMemory is VmRSS and VmHWM, in bytes, of each of this process's
// children, by name. There is one control plane a process, so one child
// of each name.
func childrenMemory() (map[string][2]int64, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*/status")
	if err != nil {
		return nil, err
	}
	self := strconv.Itoa(os.Getpid())
	out := map[string][2]int64{}
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited since the glob
		}
		var name, ppid string
		var rss, hwm int64
		for _, line := range strings.Split(string(b), "\n") {
			key, val, _ := strings.Cut(line, ":")
			val = strings.TrimSpace(val)
			switch key {
			case "Name":
				name = val
			case "PPid":
				ppid = val
			case "VmRSS":
				rss = kB(val)
			case "VmHWM":
				hwm = kB(val)
			}
		}
		if ppid == self {
			out[name] = [2]int64{rss, hwm}
		}
	}
	return out, nil
}

// kB reads a /proc size ("1234 kB") in bytes; 0 when it is not one.
func kB(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64)
	if err != nil {
		return 0
	}
	return n << 10
}

// etcdMetrics reads the named gauges from etcd's Prometheus text metrics.
func etcdMetrics(ctx context.Context, url string, names ...string) ([]int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read etcd metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read etcd metrics: %s", resp.Status)
	}
	want := make(map[string]int, len(names))
	for i, n := range names {
		want[n] = i
	}
	out := make([]int64, len(names))
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		i, wanted := want[name]
		if !ok || !wanted {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("etcd metric %s: %w", name, err)
		}
		out[i] = int64(f)
		found++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read etcd metrics: %w", err)
	}
	if found < len(names) {
		return nil, fmt.Errorf("etcd metrics: only %d of %v found", found, names)
	}
	return out, nil
}
