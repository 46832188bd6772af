package testenv

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// A real single-node cluster: the envtest control plane plus the
// kube-controller-manager (CronJob, Job, ServiceAccount, root CA and garbage
// collector controllers), the kube-scheduler, a kubelet and containerd with
// runc. Everything runs inside a network, mount and PID namespace the test
// run creates (ClusterMain), so no test traffic leaves it: the node address
// is a documentation address on a veth interface that exists only there,
// and what containerd and the kubelet write under /run and /var/log stays
// in that mount namespace and vanishes with it.

const (
	// ClusterNodeIP is the kubelet's --node-ip (RFC 5737 TEST-NET-1), on a
	// veth interface inside the test's network namespace. The API server
	// dials the kubelet there to serve pods/log (the reaper's read of a
	// runner's log); that traffic too stays in the namespace, which is why
	// StartCluster refuses to run anywhere else.
	ClusterNodeIP = "192.0.2.10"
	// ClusterNodeName is the one node's name.
	ClusterNodeName = "reaper-test-node"
	// PauseImage is the sandbox image, built here from ./pause: no
	// registry can be reached, so nothing may need pulling.
	PauseImage = "localhost/runner-reaper-test/pause:1"

	// insideEnv marks the re-executed test binary that runs inside the
	// namespaces.
	insideEnv = "RUNNER_REAPER_CLUSTER_INSIDE"
)

// auditPolicy records who did what that the tests ask about: every pod
// deletion with its DeleteOptions (so a test can tell the garbage
// collector's delete from the reaper's, and a server-side dry run, which
// changes nothing, from a delete), and every request a ServiceAccount makes
// (the reaper's, with its token's pod).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Request
    verbs: ["delete", "deletecollection"]
    resources: [{group: "", resources: ["pods"]}]
  - level: Metadata
    userGroups: ["system:serviceaccounts"]
  - level: Metadata
    verbs: ["delete", "deletecollection"]
    resources: [{group: "", resources: ["pods"]}]
  - level: None
`

// kernelTunables are the global (not namespaced) sysctls the kubelet sets
// when it starts; the cluster puts back what they were when it stops.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// Cluster is a running single-node cluster.
type Cluster struct {
	*Env
	// Dir holds everything the cluster writes.
	Dir string
	// APIServerHost and APIServerPort are the API server's loopback
	// address, which a hostNetwork pod reaches directly.
	APIServerHost, APIServerPort string
	// PodLogs is the kubelet's pod log directory (podLogsDir).
	PodLogs string
	// AuditLog is the API server's audit log (JSON lines): every request
	// by a ServiceAccount, and every pod deletion by anyone.
	AuditLog string

	cgroupRoot string
	sock       string
	procs      []*process
	sysctls    map[string]string
}

// ClusterAssetsDir is where `make cluster-assets` puts kubelet,
// kube-scheduler and kube-controller-manager (beside kube-apiserver);
// REAPER_CLUSTER_ASSETS overrides it.
func ClusterAssetsDir(root string) string {
	if d := os.Getenv("REAPER_CLUSTER_ASSETS"); d != "" {
		return d
	}
	return filepath.Join(root, ".cache", "bin")
}

// ClusterMain runs a package's tests against one real cluster, started
// once and torn down completely, inside namespaces of the run's own. Use it
// from TestMain. Without root it fails, naming what is missing: a suite
// that skips proves nothing. images runs inside, before the kubelet starts,
// and returns docker-archive tarballs to import into containerd.
func ClusterMain(m *testing.M, c **Cluster, images func(dir string) ([]string, error)) {
	// make unit (-short) runs no cluster: it says so and runs nothing.
	// make test never passes -short, so there the cluster always runs.
	flag.Parse()
	if testing.Short() {
		fmt.Println("real cluster: skipped in -short; `make test` runs it")
		os.Exit(0)
	}
	if os.Getenv(insideEnv) == "" {
		os.Exit(reexecInNamespaces())
	}
	// Inside means PID 1 of the namespaces reexecInNamespaces made: a stray
	// environment variable must never make the host's own /run, /var/log
	// and network the cluster's.
	if os.Getpid() != 1 {
		fmt.Fprintf(os.Stderr, "real cluster: %s is set but this is not the namespaces' first process; refusing to touch the host's mounts and network\n", insideEnv)
		os.Exit(1)
	}
	code, err := runInside(m, c, images)
	if err != nil {
		fmt.Fprintln(os.Stderr, "real cluster:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// reexecInNamespaces runs this test binary again as PID 1 of new network,
// mount and PID namespaces. When it exits, the kernel ends every process
// left in them and the namespaces' mounts and network go with them, so
// even a test that panics leaves nothing running behind.
func reexecInNamespaces() int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "real cluster: these tests run a kubelet and containerd, which need root; "+
			"run them as root (make test does), they are never skipped")
		return 1
	}
	for _, tool := range []string{"unshare", "ip", "containerd", "runc", "ctr"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "real cluster: %s not found (make cluster-assets installs containerd and runc from Debian): %v\n", tool, err)
			return 1
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "real cluster:", err)
		return 1
	}
	args := append([]string{"--net", "--mount", "--propagation", "private", "--pid", "--fork",
		"--mount-proc", "--kill-child", "--", exe}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(os.Environ(), insideEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(os.Stderr, "real cluster: enter namespaces:", err)
		return 1
	}
	return 0
}

func runInside(m *testing.M, c **Cluster, images func(dir string) ([]string, error)) (int, error) {
	if err := privateRuntimeDirs(); err != nil {
		return 1, err
	}
	if err := nodeNetwork(); err != nil {
		return 1, err
	}
	dir, err := os.MkdirTemp("", "runner-reaper-cluster-")
	if err != nil {
		return 1, err
	}
	cl, err := StartCluster(dir, images)
	if err != nil {
		if cl != nil {
			err = errors.Join(err, cl.Stop())
		}
		return 1, err
	}
	*c = cl
	code := m.Run()
	return code, cl.Stop()
}

// privateRuntimeDirs mounts fresh tmpfs over /run and /var/log in this
// mount namespace: containerd, runc and the kubelet write there by fixed
// paths (shim sockets, /var/log/containers), and none of it may reach the
// machine.
func privateRuntimeDirs() error {
	for _, d := range []string{"/run", "/var/log"} {
		if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("mount a private tmpfs on %s: %w", d, err)
		}
	}
	return nil
}

// insideTestNamespaces refuses a process that is not the first of the
// namespaces ClusterMain made: outside them the kubelet's address and the
// API server's connections to it, /run and /var/log would be the host's.
func insideTestNamespaces() error {
	if os.Getenv(insideEnv) == "" || os.Getpid() != 1 {
		return errors.New("real cluster: StartCluster runs only as the first process of the test's own namespaces (ClusterMain), never on the host's network and mounts")
	}
	return nil
}

// nodeNetwork brings up loopback and the node's interface in the new
// network namespace.
func nodeNetwork() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// A veth pair with both ends here: this kernel has no dummy
		// interfaces, and a pair has a carrier without leaving the
		// namespace.
		{"link", "add", "reaper-node", "type", "veth", "peer", "name", "reaper-peer"},
		{"addr", "add", ClusterNodeIP + "/32", "dev", "reaper-node"},
		{"link", "set", "reaper-peer", "up"},
		{"link", "set", "reaper-node", "up"},
		// The kubelet looks for a default route to choose addresses;
		// through the veth pair it leads nowhere.
		{"route", "add", "default", "dev", "reaper-node"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// StartCluster starts the cluster's processes under dir. images returns
// docker-archive tarballs to import besides the pause image. On error, the
// returned Cluster (when not nil) must still be stopped.
func StartCluster(dir string, images func(dir string) ([]string, error)) (*Cluster, error) {
	if err := insideTestNamespaces(); err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bins := ClusterAssetsDir(root)
	for _, b := range []string{"kubelet", "kube-scheduler", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(bins, b)); err != nil {
			return nil, fmt.Errorf("%s missing from %s (run `make cluster-assets`): %w", b, bins, err)
		}
	}
	var certDir string
	policy := filepath.Join(dir, "audit-policy.yaml")
	auditLog := filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	env, err := start(func(e *envtest.Environment) {
		args := e.ControlPlane.GetAPIServer().Configure()
		// envtest turns the ServiceAccount admission plugin off; a real
		// cluster needs it to give pods their projected token volume.
		args.Set("disable-admission-plugins", "")
		args.Set("audit-policy-file", policy)
		args.Set("audit-log-path", auditLog)
		args.Set("audit-log-format", "json")
		// pods/log (and exec, attach) go from the API server to the
		// kubelet: by the node's InternalIP, since nothing here resolves
		// the node's name.
		args.Set("kubelet-preferred-address-types", "InternalIP")
	})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Env: env, Dir: dir, PodLogs: filepath.Join(dir, "pod-logs"), AuditLog: auditLog,
		cgroupRoot: "/" + filepath.Base(dir)}
	api := env.env.ControlPlane.APIServer
	certDir = api.CertDir
	c.APIServerHost, c.APIServerPort = api.SecureServing.Address, api.SecureServing.Port

	for _, d := range []string{"logs", "containerd", "cni/net.d", "cni/bin", "kubelet", c.PodLogs} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return c, err
		}
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, env.Config.CAData, 0o644); err != nil {
		return c, err
	}
	kubeconfig, err := env.Kubeconfig(dir)
	if err != nil {
		return c, err
	}

	if err := c.startContainerd(); err != nil {
		return c, err
	}
	tarballs, err := pauseImage(root, dir)
	if err != nil {
		return c, err
	}
	if images != nil {
		more, err := images(dir)
		if err != nil {
			return c, err
		}
		tarballs = append(tarballs, more...)
	}
	for _, t := range tarballs {
		if out, err := c.ctr("images", "import", t); err != nil {
			return c, fmt.Errorf("import %s into containerd: %w: %s", t, err, out)
		}
	}

	if err := c.startProcess("kube-controller-manager", filepath.Join(bins, "kube-controller-manager"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "kcm-certs"),
		"--service-account-private-key-file="+filepath.Join(certDir, "sa-signer.key"),
		"--root-ca-file="+caFile, "--use-service-account-credentials=false",
		"--controllers=*", "--concurrent-cron-job-syncs=1", "-v=2"); err != nil {
		return c, err
	}
	if err := c.startProcess("kube-scheduler", filepath.Join(bins, "kube-scheduler"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1",
		"--cert-dir="+filepath.Join(dir, "scheduler-certs"), "-v=2"); err != nil {
		return c, err
	}
	if err := c.startKubelet(bins, kubeconfig); err != nil {
		return c, err
	}
	return c, c.waitReady()
}

func (c *Cluster) ctr(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, "ctr", append([]string{"--address", c.sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

// process is one of the cluster's processes; done closes when it exits.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// startProcess starts a cluster process with its output in logs/NAME.log.
func (c *Cluster) startProcess(name, bin string, args ...string) error {
	logf, err := os.Create(filepath.Join(c.Dir, "logs", name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return nil
}

// startContainerd runs containerd with a configuration of its own: the
// cgroupfs driver, runc (crun cannot run on this cgroup hybrid), OOM score
// adjustments kept within what it may set, the local pause image, and its
// root, state and socket under Dir.
func (c *Cluster) startContainerd() error {
	d := filepath.Join(c.Dir, "containerd")
	c.sock = filepath.Join(d, "containerd.sock")
	runc, err := exec.LookPath("runc")
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[7]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), c.sock, c.sock+".ttrpc", filepath.Join(d, "opt"),
		PauseImage, runc, filepath.Join(c.Dir, "cni/bin"), filepath.Join(c.Dir, "cni/net.d"))
	confFile := filepath.Join(d, "config.toml")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return err
	}
	// Every pod here uses the host's network, so no CNI plugin ever runs;
	// the runtime reports its network ready once a configuration exists.
	cni := `{"cniVersion": "0.4.0", "name": "reaper-test", "plugins": [{"type": "loopback"}]}`
	if err := os.WriteFile(filepath.Join(c.Dir, "cni/net.d/10-reaper-test.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	if err := c.startProcess("containerd", "containerd", "--config", confFile); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.ctr("version")
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd did not answer on %s: %w: %s", c.sock, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startKubelet runs the kubelet with a config of its own: cgroupfs under a
// cgroup root named after Dir, no iptables chains, logs under PodLogs, and
// its API and health endpoints on loopback only.
func (c *Cluster) startKubelet(bins, kubeconfig string) error {
	c.sysctls = map[string]string{}
	for _, k := range kernelTunables {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("read %s before the kubelet sets it: %w", k, err)
		}
		c.sysctls[k] = strings.TrimSpace(string(b))
	}
	// The kubelet wants its cgroup root to exist in every hierarchy.
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hierarchies {
		if err := os.Mkdir(filepath.Join(h, c.cgroupRoot), 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("create the kubelet's cgroup root: %w", err)
		}
	}
	root := filepath.Join(c.Dir, "kubelet")
	// The kubelet serves its API (the container logs the API server asks
	// it for) on the node's address, and to anyone: the API server has no
	// client certificate for it here, and nothing outside the cluster's
	// own network namespace can reach that address.
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[4]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://%[2]s
podLogsDir: %[3]s
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: ""
registerNode: true
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
`, c.cgroupRoot, c.sock, c.PodLogs, ClusterNodeIP)
	confFile := filepath.Join(c.Dir, "kubelet-config.yaml")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		return err
	}
	return c.startProcess("kubelet", filepath.Join(bins, "kubelet"),
		"--config="+confFile, "--kubeconfig="+kubeconfig, "--root-dir="+root,
		"--cert-dir="+filepath.Join(root, "pki"), "--node-ip="+ClusterNodeIP,
		"--hostname-override="+ClusterNodeName, "-v=2")
}

// waitReady waits for the node to be Ready and the controllers to publish
// the root CA, which every pod's token volume needs.
func (c *Cluster) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, ClusterNodeName, metav1.GetOptions{})
		if err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					_, err := c.Client.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
					if err == nil {
						return nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s not ready with the root CA published (logs in %s): %w", ClusterNodeName, filepath.Join(c.Dir, "logs"), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
		for _, p := range c.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited: see %s", p.name, filepath.Join(c.Dir, "logs", p.name+".log"))
			default:
			}
		}
	}
}

// Stop tears the cluster down completely: the kubelet first, then every
// container and shim containerd started (by their PIDs), containerd, the
// controllers and the control plane; then the mounts under Dir, the
// cgroups under the kubelet's cgroup root, and the kernel tunables the
// kubelet changed; then Dir.
func (c *Cluster) Stop() error {
	var errs []error
	// Stop in reverse start order: kubelet, scheduler, controller-manager,
	// containerd; containers and shims between the kubelet and containerd.
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.name == "containerd" {
			errs = append(errs, c.stopContainers())
		}
		p.stop()
	}
	errs = append(errs, c.Env.Stop())
	errs = append(errs, unmountUnder(c.Dir))
	errs = append(errs, removeCgroups(c.cgroupRoot))
	for k, v := range c.sysctls {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s to %s: %w", k, v, err))
		}
	}
	if os.Getenv("REAPER_CLUSTER_KEEP") == "" {
		errs = append(errs, os.RemoveAll(c.Dir))
	} else {
		fmt.Fprintln(os.Stderr, "real cluster: kept", c.Dir)
	}
	return errors.Join(errs...)
}

// stop asks the process to end, and kills it after 20 seconds.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// stopContainers kills every task in containerd's k8s.io namespace, then
// the shims serving this containerd, found by the socket on their command
// line, each by its PID. It is best effort: what is left ends with the PID
// namespace, and the cgroups are checked after.
func (c *Cluster) stopContainers() error {
	if out, err := c.ctr("tasks", "list", "--quiet"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = c.ctr("tasks", "kill", "--signal", "SIGKILL", id)
		}
		time.Sleep(500 * time.Millisecond)
		for _, id := range strings.Fields(string(out)) {
			_, _ = c.ctr("tasks", "delete", "--force", id)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "containerd-shim") || !strings.Contains(string(b), c.sock) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var errs []error
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// removeCgroups removes the kubelet's cgroup root from every hierarchy,
// deepest first, killing anything left in it.
func removeCgroups(root string) error {
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*")
	var errs []error
	for _, h := range hierarchies {
		top := filepath.Join(h, root)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil {
				for _, pid := range strings.Fields(string(b)) {
					if n, err := strconv.Atoi(pid); err == nil {
						_ = syscall.Kill(n, syscall.SIGKILL)
					}
				}
			}
			var err error
			for i := 0; i < 50; i++ {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// ContainerSpec is the OCI runtime spec containerd gave runc for a
// container ("containerd://ID" as a pod's status names it), from
// containerd's own record, which stays until the kubelet removes the
// container.
func (c *Cluster) ContainerSpec(containerID string) ([]byte, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := c.ctr("containers", "info", id)
	if err != nil {
		return nil, fmt.Errorf("containerd record of %s: %w: %s", id, err, out)
	}
	return out, nil
}

// ContainerLog is a container's output as the kubelet stored it on disk,
// with the CRI log prefix (time, stream, tag) stripped: read from the
// kubelet's log directory, never through the kubelet's address.
func (c *Cluster) ContainerLog(pod *corev1.Pod, container string) (string, error) {
	dir := filepath.Join(c.PodLogs, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container)
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no log for %s/%s container %s under %s", pod.Namespace, pod.Name, container, dir)
	}
	sort.Strings(files)
	var b strings.Builder
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		for _, l := range strings.Split(string(raw), "\n") {
			parts := strings.SplitN(l, " ", 4)
			if len(parts) == 4 {
				b.WriteString(parts[3])
				if parts[2] == "F" {
					b.WriteString("\n")
				}
			}
		}
	}
	return b.String(), nil
}
