package testenv

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/rest"
)

// KubeProxy stands between a client and the control plane on loopback, in
// plain HTTP, and forwards every request as the control plane's
// administrator, except those its Intercept answers itself. It is the API
// server as a client meets it on a bad day: an admission webhook that takes
// seconds, priority and fairness answering 429 with Retry-After, a write
// that never returns. Requests it saw are counted by method and path.
type KubeProxy struct {
	// URL is where clients reach it: http://127.0.0.1:PORT.
	URL string

	rp        *httputil.ReverseProxy
	mu        sync.Mutex
	intercept func(w http.ResponseWriter, r *http.Request) bool
	seen      []string
}

// Proxy starts a KubeProxy in front of e's API server; it stops when the
// test ends. intercept, when not nil, sees each request first and returns
// true when it has answered it; it may be replaced with Intercept.
func (e *Env) Proxy(t testing.TB, intercept func(w http.ResponseWriter, r *http.Request) bool) *KubeProxy {
	t.Helper()
	target, err := url.Parse(e.Config.Host)
	if err != nil {
		t.Fatalf("kube proxy: control plane URL %q: %v", e.Config.Host, err)
	}
	rt, err := rest.TransportFor(e.Config)
	if err != nil {
		t.Fatalf("kube proxy: transport to the control plane: %v", err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = rt
	// Watches are streams: pass each frame on as it comes.
	rp.FlushInterval = -1
	p := &KubeProxy{rp: rp, intercept: intercept}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("kube proxy: listen: %v", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+r.URL.Path)
		intercept := p.intercept
		p.mu.Unlock()
		if intercept != nil && intercept(w, r) {
			return
		}
		p.Forward(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	p.URL = "http://" + ln.Addr().String()
	return p
}

// Forward sends the request on to the control plane and its answer back
// to w, as the proxy does with every request its intercept leaves alone:
// for an intercept that passes a request on but stands in the way of its
// answer (a watch stream it cuts, or holds open and silent). Canceling the
// request's context cuts the answer where it is.
func (p *KubeProxy) Forward(w http.ResponseWriter, r *http.Request) {
	// The client's own credential is not the control plane's.
	r.Header.Del("Authorization")
	p.rp.ServeHTTP(w, r)
}

// Intercept replaces the proxy's intercept.
func (p *KubeProxy) Intercept(f func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.intercept = f
}

// Seen is how many requests with this method and path the proxy received.
func (p *KubeProxy) Seen(method, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if s == method+" "+path {
			n++
		}
	}
	return n
}

// Config is a rest.Config that reaches the control plane through the proxy.
func (p *KubeProxy) Config() *rest.Config {
	return &rest.Config{Host: p.URL}
}

// Kubeconfig writes a kubeconfig file for the binary that reaches the
// control plane through the proxy, and returns its path.
func (p *KubeProxy) Kubeconfig(t testing.TB) string {
	t.Helper()
	return ServerKubeconfig(t, p.URL)
}

// ServerKubeconfig writes a kubeconfig file whose one cluster is server
// (plain HTTP on loopback: a proxy, a server that never answers), with a
// token that is no secret, and returns its path.
func ServerKubeconfig(t testing.TB, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
users:
- name: reaper
  user:
    token: not-a-secret
contexts:
- name: test
  context:
    cluster: test
    user: reaper
current-context: test
`, server)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}
