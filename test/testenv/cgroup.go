package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

var cgroupSeq atomic.Int64

// A cgroupFS is where newCgroup looks for cgroups: the host's
// (hostCgroups), or a test's stand-in.
type cgroupFS struct {
	// v2 is where cgroup v2 is mounted on a unified host.
	v2 string
	// mountinfo and self are the files that say where the cgroup v1
	// hierarchies are mounted (/proc/self/mountinfo) and which of their
	// cgroups this process is in (/proc/self/cgroup).
	mountinfo, self string
}

// hostCgroups is where this host's cgroups are.
func hostCgroups() cgroupFS {
	return cgroupFS{v2: "/sys/fs/cgroup", mountinfo: "/proc/self/mountinfo", self: "/proc/self/cgroup"}
}

// A runCgroup is the memory cgroup that one run's program is started in,
// and nothing else: made for the run by newCgroup, removed by finish.
type runCgroup struct {
	dir string
	// v1 is a cgroup v1 memory cgroup, which a process can only be moved
	// into (testdata/rusage has it move itself before its exec); a v2 one
	// it is started in (CLONE_INTO_CGROUP).
	v1 bool
}

// String is which version of cgroup it is and where, for Run.Cgroup.
func (c *runCgroup) String() string {
	if c.v1 {
		return "v1 " + c.dir
	}
	return "v2 " + c.dir
}

// newCgroup makes a fresh memory cgroup for one run, limited to limit
// bytes when limit is positive: a cgroup v2 one where the host has the
// memory controller on v2 (see newCgroupV2), otherwise a cgroup v1 one
// where the v1 memory hierarchy is mounted and writable (see
// newCgroupV1), as on a hybrid host, where v2 is mounted beside v1
// without the memory controller. Without either it returns nil and why.
func (fs cgroupFS) newCgroup(limit int64) (*runCgroup, string) {
	dir, why2 := fs.newCgroupV2()
	cg := &runCgroup{dir: dir}
	if dir == "" {
		dir, why1 := fs.newCgroupV1()
		if dir == "" {
			return nil, why2 + "; " + why1
		}
		cg = &runCgroup{dir: dir, v1: true}
	}
	if limit <= 0 {
		return cg, ""
	}
	if err := cg.setLimit(limit); err != nil {
		cg.remove()
		return nil, fmt.Sprintf("limit cgroup %s to %d bytes: %v", cg.dir, limit, err)
	}
	return cg, ""
}

// newCgroupV2 makes a fresh cgroup v2 leaf for one run, directly under
// the root: /sys/fs/cgroup/runner-reaper-testenv-PID-N. It changes no
// cgroup it did not make: it needs the memory controller to be there
// already and enabled for the root's children (cgroup.subtree_control),
// which is how a host that runs containers on cgroup v2 has it. Without
// that (not root, a cgroup v1 or hybrid host, a container whose cgroup
// namespace holds processes at its top) it returns "" and the reason.
func (fs cgroupFS) newCgroupV2() (dir, why string) {
	has := func(file string) bool {
		b, err := os.ReadFile(filepath.Join(fs.v2, file))
		return err == nil && slices.Contains(strings.Fields(string(b)), "memory")
	}
	switch {
	case !has("cgroup.controllers"):
		return "", "no cgroup v2 memory controller at " + fs.v2
	case !has("cgroup.subtree_control"):
		return "", "the memory controller is not enabled in " + fs.v2 + "/cgroup.subtree_control"
	}
	dir = filepath.Join(fs.v2, fmt.Sprintf("runner-reaper-testenv-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "cgroup v2: " + err.Error()
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.peak")); err != nil {
		_ = os.Remove(dir)
		return "", "no memory.peak (Linux 5.19 or later has it)"
	}
	return dir, ""
}

// newCgroupV1 makes a fresh cgroup v1 memory cgroup for one run, below
// the one this process is in: <mount><own path>/runner-reaper-testenv-PID-N.
// Below it rather than at the hierarchy's top, although v1 would allow
// either, so that the run stays inside whatever this process is held to:
// its cgroup's limit (v1 charges a cgroup's pages to its ancestors too)
// and the cgroup its supervisor kills or removes once done with it (a
// cgroup can only be removed once its children are: finish removes this
// one). It needs to be root, or to own that cgroup.
//
// The cgroup must not move charges with a task that enters it
// (memory.move_charge_at_immigrate 0, the default, and the only setting
// Linux 6.x still has): testdata/rusage moves a copy of itself in just
// before that copy execs the program, and its pages, charged to its old
// cgroup, must stay there.
func (fs cgroupFS) newCgroupV1() (dir, why string) {
	mountinfo, err := os.ReadFile(fs.mountinfo)
	if err != nil {
		return "", "cgroup v1: " + err.Error()
	}
	self, err := os.ReadFile(fs.self)
	if err != nil {
		return "", "cgroup v1: " + err.Error()
	}
	parent, err := memoryV1Dir(string(mountinfo), string(self))
	if err != nil {
		return "", "cgroup v1: " + err.Error()
	}
	dir = filepath.Join(parent, fmt.Sprintf("runner-reaper-testenv-%d-%d", os.Getpid(), cgroupSeq.Add(1)))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "cgroup v1: " + err.Error()
	}
	fail := func(why string) (string, string) {
		_ = os.Remove(dir)
		return "", "cgroup v1: " + why
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.max_usage_in_bytes")); err != nil {
		return fail("no memory.max_usage_in_bytes in " + dir)
	}
	move := filepath.Join(dir, "memory.move_charge_at_immigrate")
	if b, err := os.ReadFile(move); err == nil && strings.TrimSpace(string(b)) != "0" {
		if err := os.WriteFile(move, []byte("0"), 0); err != nil {
			return fail("stop it moving charges: " + err.Error())
		}
	}
	return dir, ""
}

// memoryV1Dir is the directory of this process's cgroup in the cgroup v1
// memory hierarchy, from /proc/self/mountinfo (where the hierarchy is
// mounted, and which of its cgroups the mount shows at its top: not its
// root in a container) and /proc/self/cgroup (the process's cgroup in
// that hierarchy).
func memoryV1Dir(mountinfo, self string) (string, error) {
	var path string
	for _, l := range strings.Split(self, "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "memory") {
			path = f[2]
			break
		}
	}
	if path == "" {
		return "", errors.New("this process is in no cgroup v1 memory cgroup")
	}
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for _, l := range strings.Split(mountinfo, "\n") {
		// ID parent major:minor root mount-point options [optional...] - type source super-options
		pre, post, ok := strings.Cut(l, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" || !slices.Contains(strings.Split(g[2], ","), "memory") {
			continue
		}
		root, mount := unescape.Replace(f[3]), unescape.Replace(f[4])
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue // a mount of a cgroup this process is not in
		}
		return filepath.Join(mount, rel), nil
	}
	return "", fmt.Errorf("the memory cgroup %s is in no cgroup v1 mount", path)
}

// setLimit has the cgroup hold its processes to limit bytes before one is
// in it. It limits memory, not swap (v2 memory.swap.max, v1
// memory.memsw.limit_in_bytes are left as they are): on a host with swap
// a run over the limit is pushed to swap before it is OOM-killed, as a
// pod with a memory limit is. On v1 it makes sure the kernel kills a
// process over the limit rather than pausing it until there is room
// (memory.oom_control, which a cgroup takes from its parent).
func (c *runCgroup) setLimit(limit int64) error {
	n := []byte(strconv.FormatInt(limit, 10))
	if !c.v1 {
		return os.WriteFile(filepath.Join(c.dir, "memory.max"), n, 0)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "memory.limit_in_bytes"), n, 0); err != nil {
		return err
	}
	if disabled, _ := c.counter("memory.oom_control", "oom_kill_disable"); disabled != 0 {
		return os.WriteFile(filepath.Join(c.dir, "memory.oom_control"), []byte("0"), 0)
	}
	return nil
}

// counter reads the "key N" line of a flat-keyed cgroup file, and says
// whether it has one.
func (c *runCgroup) counter(file, key string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+" "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// A cgroupEnd is what finish read from a run's cgroup.
type cgroupEnd struct {
	// Peak is its peak charge in bytes (v2 memory.peak, v1
	// memory.max_usage_in_bytes).
	Peak int64
	// OOMKills is how many of its processes the kernel killed for
	// being over its limit, and HasOOMKills whether the kernel counts
	// them (Linux 4.13 or later).
	OOMKills    int64
	HasOOMKills bool
}

// finish reads the cgroup's figures and removes it. Its process has been
// reaped, unless a killed rusage left it to die of Pdeathsig, which takes
// a moment, or it left a process of its own behind (a daemon, the
// grandchild of a killed shell): the removal is retried for a second
// while the cgroup is busy, the processes still in it killed.
func (c *runCgroup) finish() (cgroupEnd, error) {
	var end cgroupEnd
	events := "memory.events"
	if c.v1 {
		events = "memory.oom_control"
	}
	var err error
	end.Peak, err = c.peak()
	end.OOMKills, end.HasOOMKills = c.counter(events, "oom_kill")
	rmErr := os.Remove(c.dir)
	for i := 0; i < 100 && errors.Is(rmErr, syscall.EBUSY); i++ {
		c.killLeft()
		time.Sleep(10 * time.Millisecond)
		rmErr = os.Remove(c.dir)
	}
	return end, errors.Join(err, rmErr)
}

// peak is the cgroup's peak charge so far, in bytes (v2 memory.peak, v1
// memory.max_usage_in_bytes).
func (c *runCgroup) peak() (int64, error) {
	file := "memory.peak"
	if c.v1 {
		file = "memory.max_usage_in_bytes"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, file))
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/%s: %w", c.dir, file, err)
	}
	return n, nil
}

// killLeft kills what is still in the cgroup once the run is over: with
// its own cgroup.kill on v2 (Linux 5.14 or later), otherwise one by one.
func (c *runCgroup) killLeft() {
	if !c.v1 && os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// remove removes a cgroup no process was started in.
func (c *runCgroup) remove() {
	if c != nil {
		_ = os.Remove(c.dir)
	}
}
