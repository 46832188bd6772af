package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// PodAPIProxy is the API server as the pods on the pod network reach it
// (StartPodNetwork): HTTPS on the gateway's address, with a certificate of
// its own that the kubeconfig Kubeconfig writes trusts, each request passed
// on as the pod sent it, with the pod's own ServiceAccount token, so that
// RBAC and the audit log see the pod. Cut breaks one resource's lists and
// watches in the middle of their streams, as a network fault or an API
// server going away does, while every other request goes through.
type PodAPIProxy struct {
	// URL is where the pods reach it: https://GATEWAY:PORT.
	URL   string
	caPEM []byte

	mu   sync.Mutex
	cut  map[string]bool
	open map[*cutBody]struct{}
	// cuts counts, by resource, the streams cut and the watches refused.
	cuts map[string]int
}

// relistCutAfter is how much of a list, or of a watch that sends the
// current state first, gets through while its resource is cut: part of
// the first object, never the end (a runner pod is several KiB).
const relistCutAfter = 512

var errCut = errors.New("pod API proxy: stream cut")

// StartPodAPIProxy starts a PodAPIProxy listening on host (PodGateway); it
// stops when the test ends.
func (c *Cluster) StartPodAPIProxy(t testing.TB, host string) *PodAPIProxy {
	t.Helper()
	target, err := url.Parse(c.Config.Host)
	if err != nil {
		t.Fatalf("pod API proxy: API server URL %q: %v", c.Config.Host, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(c.Config.CAData) {
		t.Fatal("pod API proxy: the API server's CA is not PEM")
	}
	caPEM, leaf, err := proxyCertificate(host)
	if err != nil {
		t.Fatalf("pod API proxy: certificate: %v", err)
	}
	p := &PodAPIProxy{caPEM: caPEM, cut: map[string]bool{}, open: map[*cutBody]struct{}{}, cuts: map[string]int{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		// No credential of the proxy's own: the pod's token goes through.
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
		},
		// Watches are streams: each frame goes on as it comes.
		FlushInterval:  -1,
		ModifyResponse: p.wrap,
		ErrorLog:       log.New(io.Discard, "", 0),
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("pod API proxy: listen on %s: %v", host, err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if res, watch, relist := collection(r.URL); res != "" && watch && !relist && p.refuse(res) {
				// A watch resumed from where the last one ended fails at
				// once, before any answer, and the client must list again.
				panic(http.ErrAbortHandler)
			}
			rp.ServeHTTP(w, r)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{leaf}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	p.URL = "https://" + ln.Addr().String()
	return p
}

// Kubeconfig is a kubeconfig for a pod in namespace ns that reaches the
// API server through the proxy with its own ServiceAccount token.
func (p *PodAPIProxy) Kubeconfig(ns string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: pod-api-proxy
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: pod
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
contexts:
- name: pod
  context:
    cluster: pod-api-proxy
    user: pod
    namespace: %s
current-context: pod
`, p.URL, base64.StdEncoding.EncodeToString(p.caPEM), ns))
}

// Cut breaks resource's lists and watches ("pods", "ephemeralrunners")
// until Restore: each one open now is cut where it is; a watch resumed from
// a resourceVersion is refused before it answers; a new list, or a watch
// that sends the current state first, gets part of its first object and
// is cut, so that no client ever reads one whole.
func (p *PodAPIProxy) Cut(resource string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut[resource] = true
	for b := range p.open {
		if b.resource == resource {
			b.fail()
			_ = b.rc.Close()
		}
	}
}

// Restore lets resource's lists and watches through again.
func (p *PodAPIProxy) Restore(resource string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.cut, resource)
}

// Cuts is how many of resource's streams were cut, and watches refused,
// since the proxy started.
func (p *PodAPIProxy) Cuts(resource string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts[resource]
}

func (p *PodAPIProxy) refuse(resource string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut[resource] {
		p.cuts[resource]++
	}
	return p.cut[resource]
}

// wrap puts every list's and watch's answer body where Cut can break it.
func (p *PodAPIProxy) wrap(resp *http.Response) error {
	res, _, relist := collection(resp.Request.URL)
	if res == "" {
		return nil
	}
	b := &cutBody{rc: resp.Body, p: p, resource: res, relist: relist}
	p.mu.Lock()
	p.open[b] = struct{}{}
	p.mu.Unlock()
	resp.Body = b
	return nil
}

// cutBody is one list's or watch's answer on its way to the pod.
type cutBody struct {
	rc       io.ReadCloser
	p        *PodAPIProxy
	resource string
	relist   bool
	sent     int
	// failed is set once, under p.mu, when the stream is cut.
	failed bool
}

// fail counts the cut once; p.mu is held.
func (b *cutBody) fail() {
	if !b.failed {
		b.failed = true
		b.p.cuts[b.resource]++
	}
}

func (b *cutBody) Read(buf []byte) (int, error) {
	b.p.mu.Lock()
	cut, failed := b.p.cut[b.resource], b.failed
	if cut && !failed && (!b.relist || b.sent >= relistCutAfter) {
		b.fail()
		failed = true
	}
	b.p.mu.Unlock()
	if failed {
		return 0, errCut
	}
	if cut && len(buf) > relistCutAfter-b.sent {
		buf = buf[:relistCutAfter-b.sent]
	}
	n, err := b.rc.Read(buf)
	b.sent += n
	b.p.mu.Lock()
	defer b.p.mu.Unlock()
	if b.failed {
		// Cut while this read waited: what it read does not go on.
		return 0, errCut
	}
	if err == io.EOF && b.p.cut[b.resource] {
		// A list that would end whole ends cut instead.
		b.fail()
		return n, errCut
	}
	return n, err
}

func (b *cutBody) Close() error {
	b.p.mu.Lock()
	delete(b.p.open, b)
	b.p.mu.Unlock()
	return b.rc.Close()
}

// collection is the resource a list or watch request is for ("" for any
// other request: a get, a write, a subresource), whether it is a watch,
// and whether it reads the whole collection (a list, or a watch that sends
// the current state first) rather than resuming from a resourceVersion.
func collection(u *url.URL) (resource string, watch, relist bool) {
	s := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(s) == 3 && s[0] == "api":
		resource = s[2]
	case len(s) == 5 && s[0] == "api" && s[2] == "namespaces":
		resource = s[4]
	case len(s) == 4 && s[0] == "apis":
		resource = s[3]
	case len(s) == 6 && s[0] == "apis" && s[3] == "namespaces":
		resource = s[5]
	default:
		return "", false, false
	}
	q := u.Query()
	watch = q.Get("watch") == "true" || q.Get("watch") == "1"
	return resource, watch, !watch || q.Get("sendInitialEvents") == "true"
}

// proxyCertificate makes a CA and a serving certificate it signs for the
// IP address host: the CA's PEM and the serving pair.
func proxyCertificate(host string) ([]byte, tls.Certificate, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, tls.Certificate{}, fmt.Errorf("%q is not an IP address", host)
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "runner-reaper test pod API proxy CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{ip}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
