// Package kube is runner-reaper's Kubernetes side: it finds the cluster,
// reads the runner pods and ARC's EphemeralRunners (one watch-list per
// namespace, else pages) into the classifier's views,
// deletes pods only if they are still the ones that were judged, and records
// an Event on each pod it acts on.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/internal/refclock"
)

const (
	// DefaultPageSize bounds one list response where lists are read in
	// pages (pods and EphemeralRunners where the API server gives no
	// watch-list, or the client compresses). A page is read whole, then decoded, before its items
	// are reduced to views and dropped, so the largest transient
	// allocation is a few times one page: an ARC runner pod is about 11 KB
	// in protobuf, and a page of 250 about 3 MB on the wire. Over 10,000
	// such pods, 250 peaked 20 MiB lower than 500 did, for 20 more
	// requests that cost a few milliseconds each; 100 saved little more
	// for 60 more again.
	DefaultPageSize int64 = 250
	// DefaultComponent names the reaper in the Events it records.
	DefaultComponent = "runner-reaper"
	// maxInstance is the API server's limit on an Event's reportingInstance.
	maxInstance = 128
	// DefaultTimeout bounds each request when Options.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultQPS and DefaultBurst are the client-side rate limit when the
	// cluster's config sets none (a kubeconfig or the in-cluster config
	// never does). client-go's own 5 a second with a burst of 10 was made
	// for controllers that poll forever; a janitor is idle for a minute,
	// then sends one burst (a page per 250 pods, the ledger, and at most
	// REAPER_MAX_ACTIONS actions of a few requests each) and exits. At 5 a
	// second that burst was throttled into seconds: 20 pod pages took 2.4 s
	// and 7 deletes 1.4 s. A burst of 100 lets a whole sweep of 10,000 pods
	// and a handful of actions through unthrottled; 50 a second still
	// spaces out a sweep that acts at its bound. The API server is not
	// left unprotected: its priority and fairness queues the reaper's
	// requests with every other client's, and the reaper sends them one
	// at a time per worker.
	DefaultQPS   float32 = 50
	DefaultBurst int     = 100
)

// Options tune a Client. The zero value is usable.
type Options struct {
	// PageSize is the Limit of each list request (pods and ARC's
	// EphemeralRunners); 0 means DefaultPageSize.
	PageSize int64
	// GitHubHost is the host (with its port, if any) of the GitHub the
	// reaper lists: github.com for api.github.com, the server's own host
	// for GHES. An EphemeralRunner whose spec.githubConfigUrl names
	// another host registers elsewhere, where an org may have the same
	// name and runner ids mean other runners: it gets no scope, so it is
	// never judged against this GitHub's lists. "" accepts any host.
	GitHubHost string
	// Component is the Event source and reporting controller; "" means
	// DefaultComponent.
	Component string
	// Instance is the Event's reporting instance; "" means the host name,
	// which in a CronJob is the pod's name.
	Instance string
	// Redact, when set, is applied to every Event message before it is
	// sent: an Event outlives the process and is read by anyone who may
	// describe the pod, so a credential echoed into a message must never
	// reach it.
	Redact func(string) string
	// Timeout bounds each request, from dialling to the last byte of the
	// answer; 0 means DefaultTimeout. An API server that accepts a
	// connection and never answers would otherwise hold a sweep for ever.
	// The error of a request that timed out wraps ErrTimeout.
	Timeout time.Duration
	// Compress asks for gzip'd answers. Off by default: a CronJob or a
	// kubeconfig reaches the API server over a cluster or local network,
	// where compressing every pod page costs the API server's CPU and the
	// reaper's (40% of its CPU over 10,000 pods) to save bandwidth that
	// network does not lack. On for a cluster reached from outside (EKS
	// from a Lambda), where a large fleet's pages would otherwise cross
	// the network several times larger every minute. The API server never
	// compresses a watch, so a compressing client reads its pods and
	// EphemeralRunners in pages:
	// over 10,000 ARC runner pods a watch-list is about 110 MB, the gzip'd
	// pages about a third of that.
	Compress bool
	// Pages reads pods and EphemeralRunners in pages only, never as a
	// watch-list; Compress implies it. The tests of the page path set it on servers that give
	// watch-lists.
	Pages bool
	// Log receives the client's warnings (a watch-list refused, so pods
	// or EphemeralRunners are read in pages); nil discards them.
	Log *slog.Logger
}

// Client talks to one cluster and counts every request it sends, because
// requests per sweep is the reaper's first performance figure.
type Client struct {
	cs *core
	// events is the client of the optional writes, the Events: a client
	// of its own, so that its rate limiter is not the one the required
	// writes wait on (see recordOptional).
	events   *core
	dyn      dynamic.Interface
	arc      rest.Interface // dyn's own: see ephemeralRunnerPage
	counter  *httpcount.Transport
	pageSize int64
	// githubHost: see Options.GitHubHost.
	githubHost string
	component  string
	instance   string
	redact     func(string) string
	timeout    time.Duration
	log        *slog.Logger
	pagesOnly  bool
	// clock is the API server's clock, read from the Date of its answers:
	// the one clock the sweep measures ages on (see Now).
	clock *refclock.Clock
	// dryRun sends every write as a server-side dry run (see DryRun).
	dryRun bool
}

// DryRun returns a Client whose every write (each delete, the finalizer
// patch, an Event) is sent as a server-side dry run, with the same
// preconditions: the API server answers it as it would the write (RBAC,
// admission, the object's existence, its UID and resourceVersion) and
// changes nothing. It is the choke point's pre-flight, one wrapper over
// every write, as controller-runtime's client.NewDryRunClient is. Its
// reads, requests count and clock are this Client's.
func (c *Client) DryRun() fleet.Writes {
	d := *c
	d.dryRun = true
	return &d
}

// New builds a Client from cfg, which it copies and does not change.
func New(cfg *rest.Config, opts Options) (*Client, error) {
	if cfg == nil {
		return nil, fmt.Errorf("kube client: no rest config")
	}
	if opts.PageSize < 0 {
		return nil, fmt.Errorf("kube client: page size %d is negative", opts.PageSize)
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.Component == "" {
		opts.Component = DefaultComponent
	}
	if opts.Instance == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = opts.Component
		}
		opts.Instance = host
	}
	if len(opts.Instance) > maxInstance {
		opts.Instance = opts.Instance[:maxInstance]
	}

	if opts.Timeout < 0 {
		return nil, fmt.Errorf("kube client: timeout %s is negative", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}

	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := rest.CopyConfig(cfg)
	// The API server's Warning headers (deprecations, an admission
	// webhook's words) are text from outside: they go through the
	// process's logger, redacted, escaped and filtered by level like any
	// diagnostic, not to stderr through klog.
	c.WarningHandler, c.WarningHandlerWithContext = nil, warnings{log: opts.Log}
	if c.RateLimiter == nil && c.QPS == 0 {
		c.QPS, c.Burst = DefaultQPS, DefaultBurst
	}
	// The API server gzips any answer over 128 KB for a client that
	// accepts it, which Go's transport does by default; see Compress.
	c.DisableCompression = !opts.Compress
	// HTTP/1.1, not HTTP/2: the reaper sends one request at a time, so
	// HTTP/2's multiplexing buys it nothing, while HTTP/2's flow-control
	// window let the transport buffer up to 4 MiB of a watch-list the
	// decoder had not read yet (5 MiB of the peak resident memory over
	// 10,000 pods). Over HTTP/1.1 that backlog waits in TCP, in the kernel.
	// The cost: a watch-list closed at its end bookmark closes its
	// connection, so each namespace's opens a new one.
	if len(c.TLSClientConfig.NextProtos) == 0 {
		c.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	counter := &httpcount.Transport{}
	clock := &refclock.Clock{}
	// The wrapper runs once, when the single HTTP client below is built;
	// every clientset of this Client must share that HTTP client
	// (NewForConfigAndClient) so that no request escapes the count, nor
	// the timeout.
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		counter.Base = refclock.Transport{Base: timeoutTransport{base: rt, timeout: opts.Timeout}, Clock: clock}
		return counter
	})
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kube client: http client for %s: %w", c.Host, err)
	}
	// Core types in protobuf: a fleet's pods decode with a fraction of
	// the memory and time of JSON. The dynamic client below sets JSON for
	// itself, as custom resources have no protobuf form.
	typed := rest.CopyConfig(c)
	typed.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	typed.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := newCore(typed, hc)
	if err != nil {
		return nil, fmt.Errorf("kube client: %w", err)
	}
	// The Events' client has a token bucket of its own at the same rate,
	// so that an Event never takes a token a delete is waiting for.
	optional := rest.CopyConfig(typed)
	if optional.RateLimiter != nil {
		optional.RateLimiter = nil
		optional.QPS, optional.Burst = DefaultQPS, DefaultBurst
	}
	events, err := newCore(optional, hc)
	if err != nil {
		return nil, fmt.Errorf("kube client: events: %w", err)
	}
	// ARC's resources have no typed clientset here: the dynamic client
	// reads and deletes them, over the same counted HTTP client. It is
	// built as dynamic.NewForConfigAndClient builds it, keeping its REST
	// client for the list that bypasses Unstructured.
	arcConfig := dynamic.ConfigFor(c)
	arcConfig.GroupVersion = nil
	// Every request of this client names its absolute path (AbsPath), so
	// that the API path is never used; one that did would fail loudly.
	arcConfig.APIPath = "/unused-every-request-has-an-absolute-path"
	arc, err := rest.UnversionedRESTClientForConfigAndClient(arcConfig, hc)
	if err != nil {
		return nil, fmt.Errorf("kube client: dynamic client for %s: %w", c.Host, err)
	}
	dyn := dynamic.New(arc)
	kc := &Client{
		cs:         cs,
		events:     events,
		dyn:        dyn,
		arc:        arc,
		counter:    counter,
		pageSize:   opts.PageSize,
		githubHost: strings.ToLower(opts.GitHubHost),
		component:  opts.Component,
		instance:   opts.Instance,
		redact:     opts.Redact,
		timeout:    opts.Timeout,
		log:        opts.Log,
		pagesOnly:  opts.Pages || opts.Compress,
		clock:      clock,
	}
	return kc, nil
}

// Now is the time on the API server's clock, as the Date of its last
// answer measured it (the local clock before any answer, or while the two
// agree within refclock.Tolerance). Pod and EphemeralRunner timestamps are
// written on that clock, and so are the marks of every sweep that reads
// it, whichever node it runs on.
func (c *Client) Now() time.Time { return c.clock.Now() }

// ClockSkew is how far the API server's clock is ahead of the local one,
// and whether it has answered yet.
func (c *Client) ClockSkew() (time.Duration, bool) { return c.clock.Skew() }

// Counts is the number of requests this Client has sent so far.
func (c *Client) Counts() httpcount.Counts { return c.counter.Snapshot() }

// ConfigMaps is the counted client of the ConfigMaps in ns, for other
// Kubernetes work of the same sweep (the ConfigMap ledger), so that its
// requests are counted and bounded too. It is the ledger's, not a write of
// an action: a DryRun() client's ConfigMaps still write.
func (c *Client) ConfigMaps(ns string) Objects[*corev1.ConfigMap] { return c.cs.configMaps(ns) }

// warnings logs the API server's Warning headers as warnings.
type warnings struct{ log *slog.Logger }

func (w warnings) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	w.log.LogAttrs(ctx, slog.LevelWarn, "warning from the Kubernetes API",
		slog.Int("code", code), slog.String("agent", agent), slog.String("text", text))
}

// ErrTimeout is wrapped by the error of a request that the API server did
// not answer in full within the Client's timeout.
var ErrTimeout = errors.New("no answer from the Kubernetes API")

// timeoutTransport bounds each request, from dialling to the last byte of
// the answer's body. It is done here rather than with rest.Config.Timeout,
// whose two timers (the HTTP client's and the request's own) race to end a
// request with different words; this one ends it with ErrTimeout.
type timeoutTransport struct {
	base    http.RoundTripper
	timeout time.Duration
}

func (t timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if body, ok := req.Context().Value(streamBound{}).(time.Duration); ok && body > t.timeout {
		return t.roundTripStream(req, body)
	}
	ctx, cancel := context.WithTimeoutCause(req.Context(), t.timeout, fmt.Errorf("%w within %s", ErrTimeout, t.timeout))
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	// The answer is still being read after RoundTrip returns: the
	// timeout ends with its body.
	resp.Body = cancelOnClose{ReadCloser: resp.Body, ctx: ctx, cancel: cancel}
	return resp, nil
}

// streamBound is the context key of a request whose answer is a stream
// meant to outlast the Client's timeout (a watch that the API server ends
// itself, at its timeoutSeconds): its value is how long the stream's body
// may be read once the answer's headers came (see withStreamBound).
type streamBound struct{}

// withStreamBound marks the requests sent with ctx as streams whose body may
// be read for up to body after their headers came.
func withStreamBound(ctx context.Context, body time.Duration) context.Context {
	return context.WithValue(ctx, streamBound{}, body)
}

// roundTripStream bounds a stream's request as any other up to its answer's
// headers, which an API server sends as soon as it accepts a watch, and
// its body by body from then on: an API server that accepts the connection
// and never answers still fails it within the Client's timeout.
func (t timeoutTransport) roundTripStream(req *http.Request, body time.Duration) (*http.Response, error) {
	// Each try of the request (client-go retries some) starts its end's
	// record again: the stream is the last try's.
	tail, _ := req.Context().Value(streamTailKey{}).(*streamTail)
	tail.sending()
	ctx, cancel := context.WithCancelCause(req.Context())
	expire := func(d time.Duration) func() {
		return func() { cancel(fmt.Errorf("%w within %s", ErrTimeout, d)) }
	}
	headers := time.AfterFunc(t.timeout, expire(t.timeout))
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		headers.Stop()
		cancel(nil)
		return nil, err
	}
	if !headers.Stop() {
		// The headers came as their bound expired: the body is cut already.
		_ = resp.Body.Close()
		return nil, context.Cause(ctx)
	}
	end := time.AfterFunc(body, expire(body))
	resp.Body = cancelOnClose{ReadCloser: resp.Body, ctx: ctx, cancel: func() { end.Stop(); cancel(nil) }, tail: tail}
	return resp, nil
}

// streamTailKey is the context key of a stream's streamTail.
type streamTailKey struct{}

// streamTail records how a stream's body ended, for whoever reads it: when
// the request that got it was sent, and whether its body ended as its
// server ended it (io.EOF: an HTTP/1.1 body's last chunk, an HTTP/2
// stream's end) rather than cut (a connection reset or closed, a GOAWAY,
// the Client's bound). A nil streamTail records nothing.
type streamTail struct {
	clock       clock.PassiveClock
	mu          sync.Mutex
	sent, ended time.Time
	clean       bool
}

// withStreamTail has the streams requested with ctx record their end in t.
func withStreamTail(ctx context.Context, t *streamTail) context.Context {
	return context.WithValue(ctx, streamTailKey{}, t)
}

func (t *streamTail) sending() {
	if t == nil {
		return
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent, t.ended, t.clean = now, time.Time{}, false
}

func (t *streamTail) end() {
	if t == nil {
		return
	}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.clean {
		t.ended, t.clean = now, true
	}
}

// endedCleanly says whether the body ended as its server ended it, and
// when, and when the request that got it was sent.
func (t *streamTail) endedCleanly() (sent, ended time.Time, clean bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent, t.ended, t.clean
}

// cancelOnClose releases a request's timeout when its body is closed, and
// says ErrTimeout when the timeout cut a read of the body short.
type cancelOnClose struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelFunc
	// tail, for a stream, records a body that ended cleanly.
	tail *streamTail
}

func (b cancelOnClose) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	//nolint:errorlint // a body's clean end is io.EOF itself, never wrapped
	if err == io.EOF && b.ctx.Err() == nil {
		b.tail.end()
	}
	if err != nil && !errors.Is(err, io.EOF) && errors.Is(context.Cause(b.ctx), ErrTimeout) {
		err = fmt.Errorf("%w: %w", context.Cause(b.ctx), err)
	}
	return n, err
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
