package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod network for the pods that cannot share the host's: two replicas of
// a Deployment on the one node would both listen on the same port there
// (the scheduler refuses the second a host port already taken). Each such
// pod gets an address on a bridge that exists only inside the cluster's
// network namespace, from the CNI plugins Debian ships
// (containernetworking-plugins, which `make cluster-assets` installs). The
// API server and the GitHub simulator listen on loopback, which a pod on
// the bridge cannot reach: the test puts what the pods may reach on the
// bridge's own address (PodAPIProxy, Forward). Pods that use the host's
// network, as every other test's do, are not touched.

const (
	// PodSubnet is the pod network's (RFC 5737 TEST-NET-2, as the node's
	// address is TEST-NET-1: nothing outside the namespace has it).
	PodSubnet = "198.51.100.0/24"
	// PodGateway is the bridge's address in the cluster's network
	// namespace: where a pod reaches the test's own listeners.
	PodGateway = "198.51.100.1"

	podBridge = "reaper-pods"
	// podNetworkConf sorts before the loopback-only configuration
	// StartCluster writes, so containerd, which uses the first, takes it.
	podNetworkConf = "05-reaper-pods.conflist"
)

// StartPodNetwork gives the cluster a pod network and proves it by running
// a pod on it in namespace ns (the caller's; the pod is deleted again). It
// returns the gateway's address, PodGateway. A cluster has one pod network:
// a second call finds it there and only proves it; calls must not overlap.
func (c *Cluster) StartPodNetwork(t testing.TB, ns string) string {
	t.Helper()
	if err := insideTestNamespaces(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "cni", "net.d", podNetworkConf)); err != nil {
		if err := c.startPodNetwork(); err != nil {
			t.Fatalf("pod network: %v", err)
		}
	}
	c.provePodNetwork(t, ns)
	return PodGateway
}

func (c *Cluster) startPodNetwork() error {
	var plugins string
	// Debian's place for the plugins, then the upstream one.
	for _, d := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
		if _, err := os.Stat(filepath.Join(d, "bridge")); err == nil {
			plugins = d
			break
		}
	}
	if plugins == "" {
		return errors.New("no CNI bridge plugin in /usr/lib/cni or /opt/cni/bin (make cluster-assets installs Debian's containernetworking-plugins)")
	}
	bin := filepath.Join(c.Dir, "cni", "bin")
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if err := os.Symlink(filepath.Join(plugins, p), filepath.Join(bin, p)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	if err := c.privateVarLib(); err != nil {
		return err
	}
	// The bridge is made here, not by the plugin at the first pod, so that
	// the test can listen on its address before any pod runs.
	for _, args := range [][]string{
		{"link", "add", podBridge, "type", "bridge"},
		{"addr", "add", PodGateway + "/24", "dev", podBridge},
		{"link", "set", podBridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	conf := fmt.Sprintf(`{"cniVersion": "0.4.0", "name": "reaper-pods", "plugins": [{
  "type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
  "ipam": {"type": "host-local", "dataDir": %q,
    "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}
}]}`, podBridge, filepath.Join(c.Dir, "cni", "ipam"), PodSubnet, PodGateway)
	dir := filepath.Join(c.Dir, "cni", "net.d")
	tmp := filepath.Join(dir, podNetworkConf+".new")
	if err := os.WriteFile(tmp, []byte(conf), 0o644); err != nil {
		return err
	}
	// containerd reloads the directory when a file appears in it: a rename
	// makes it appear whole.
	return os.Rename(tmp, filepath.Join(dir, podNetworkConf))
}

// privateVarLib puts an overlay over /var/lib in the test's mount
// namespace, its writes kept on a tmpfs under Dir: containerd's CNI library
// caches each pod's network result in /var/lib/cni, a fixed path, and
// nothing the cluster writes may reach the machine.
func (c *Cluster) privateVarLib() error {
	d := filepath.Join(c.Dir, "varlib")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount a tmpfs on %s: %w", d, err)
	}
	for _, s := range []string{"upper", "work"} {
		if err := os.Mkdir(filepath.Join(d, s), 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=/var/lib,upperdir=%s,workdir=%s", filepath.Join(d, "upper"), filepath.Join(d, "work"))
	if err := syscall.Mount("overlay", "/var/lib", "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount an overlay on /var/lib: %w", err)
	}
	return nil
}

// provePodNetwork runs a pod on the pod network and waits until the
// kubelet reports it running with an address there: containerd has taken
// the configuration.
func (c *Cluster) provePodNetwork(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	grace := int64(1)
	_, subnet, err := net.ParseCIDR(PodSubnet)
	if err != nil {
		t.Fatal(err)
	}
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-network-"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "pause", Image: PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pod network: create a pod on it: %v", err)
	}
	defer func() {
		_ = c.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			ip := net.ParseIP(p.Status.PodIP)
			if ip == nil || !subnet.Contains(ip) {
				t.Fatalf("pod network: pod %s runs with address %q, not one of %s", p.Name, p.Status.PodIP, PodSubnet)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod network: pod %s/%s not running on it within 90s: %+v (logs in %s)", ns, pod.Name, p.Status, filepath.Join(c.Dir, "logs"))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// ForwardWithTLS listens on host (the pod network's gateway) and copies
// every connection to target (a plain HTTP server on loopback) and back,
// until the test ends: a connection that opens with a TLS handshake is
// served TLS first, with a certificate for host from a CA of its own,
// and any other is copied as it comes. A pod on the pod network must reach
// GitHub by https, as the reaper refuses to send its token in clear
// anywhere but loopback, while a process on the host (ARC's manager) reaches
// the same host and port in plain HTTP: one address for both, as runners
// and the reaper share one GitHub. It returns the address it listens on
// and the CA's PEM, which the pod trusts (SSL_CERT_FILE).
func ForwardWithTLS(t testing.TB, host, target string) (string, []byte) {
	t.Helper()
	caPEM, cert, err := proxyCertificate(host)
	if err != nil {
		t.Fatalf("forward to %s: certificate: %v", target, err)
	}
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("forward to %s: listen on %s: %v", target, host, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	serve := func(in net.Conn) {
		defer wg.Done()
		track(in, true)
		defer func() { in.Close(); track(in, false) }()
		br := bufio.NewReader(in)
		_ = in.SetReadDeadline(time.Now().Add(10 * time.Second))
		first, err := br.Peek(1)
		_ = in.SetReadDeadline(time.Time{})
		if err != nil {
			return
		}
		var client net.Conn = &peekedConn{Conn: in, r: br}
		// 0x16 is a TLS record of type handshake: a ClientHello.
		if first[0] == 0x16 {
			tc := tls.Server(client, tlsConf)
			if tc.HandshakeContext(context.Background()) != nil {
				return
			}
			client = tc
		}
		out, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		track(out, true)
		defer func() { out.Close(); track(out, false) }()
		done := make(chan struct{})
		go func() { _, _ = io.Copy(out, client); closeWrite(out); close(done) }()
		_, _ = io.Copy(client, out)
		closeWrite(client)
		<-done
	}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go serve(in)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), caPEM
}

// peekedConn is a connection whose first bytes were read ahead.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite passes a half-close on to the connection, so that TLS over it
// can end its side.
func (c *peekedConn) CloseWrite() error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.CloseWrite()
	}
	return nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
