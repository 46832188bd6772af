// Package ghsim is a stateful simulator of GitHub's self-hosted runners REST
// API, served over HTTP. The reaper's safety rests on how it reads GitHub's
// answers (a complete list, a 404, a 422, a rate-limited or inconsistent
// page), so its tests need a server that answers exactly as GitHub does, per
// testdata/github/README.md, and that can be made to fail in each of
// the ways GitHub fails. Tests point the real go-github client and the real
// compiled binary at it.
//
// It lives in test/, the harness, apart from the product: no binary the
// project ships links it. `make demo` uses it too, as the GitHub of its
// local world, which is a harness of its own for a person to watch; the
// demo imports it from here, never the other way round.
//
// What it serves, at its root (like a test server, not under /api/v3):
//
//	GET    /{repos/O/R | orgs/O | enterprises/E}/actions/runners?per_page=&page=&name=
//	GET    /{...}/actions/runners/{id}
//	DELETE /{...}/actions/runners/{id}
//	GET    /repos/O/R/actions/jobs/{job_id}
//	GET    /repos/O/R/actions/runs/{run_id}/jobs?filter=&per_page=&page=
//	POST   /app/installations/{id}/access_tokens   (GitHub App JWT exchange)
//
// and what actions-runner-controller's scale-set mode speaks: the
// registration token, runner-registration and the Actions service's agents,
// over the same runners (see actions.go). Workflow jobs run on the runners
// and make them busy, and a runner's Lie makes GitHub's word on it wrong
// while its job runs (see jobs.go).
//
// Where GitHub's documentation is silent the sim chooses, and tests may rely
// on it: an authenticated request GitHub served (200, 204, 404, 422, 403 on
// an enterprise scope for an App token) spends one unit of the primary
// budget; a 304, a 401, a token exchange and a faulted error answer spend
// none; once the budget is spent even a conditional request is refused with
// 403, so a client cannot count on 304s while rate-limited. ETags are weak,
// a SHA-256 of the body, so any change to what a page shows changes its tag.
//
// Everything is in memory and a Sim is safe for concurrent use.
package ghsim

import (
	"crypto/rsa"
	"errors"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultRunnerVersion is the runner version a registration shows by
// default: the one in GitHub's own response example.
const DefaultRunnerVersion = "2.323.0"

// DefaultRateLimit is GitHub's primary budget per hour for a personal access
// token or an App installation.
const DefaultRateLimit = 5000

// Endpoint names used by Fault and recorded in Request.Endpoint.
const (
	EndpointList   = "list"
	EndpointGet    = "get"
	EndpointDelete = "delete"
	// EndpointToken is the App installation token exchange. It is logged
	// under this name; faults cannot be set on it.
	EndpointToken = "token"
	// Any matches every scope (as Fault's scope) or every endpoint (as
	// Fault's endpoint).
	Any = "*"
)

// Options configure a Sim. The zero value accepts any token and gives the
// default budget.
type Options struct {
	// Token is the one personal access token accepted, sent as
	// "Authorization: token X" or "Bearer X". When empty, any token (or
	// none) is accepted, unless an App is configured: then only the
	// installation tokens the sim minted are, so that a test proves the App
	// flow really supplied one.
	Token string
	// AppID and AppKey configure a GitHub App: POST
	// /app/installations/{id}/access_tokens verifies the RS256 JWT (iss ==
	// AppID, iat/exp checked against Now) with AppKey and mints an
	// installation token that is then accepted for an hour, except on
	// enterprise scopes, which GitHub refuses to App installations.
	AppID  int64
	AppKey *rsa.PublicKey
	// RateLimit is the primary budget per hour; DefaultRateLimit when zero
	// or negative.
	RateLimit int
	// Latency delays every answer by this much real time, as a round trip
	// to api.github.com does (100-300 ms in practice), so that a test can
	// measure what serial requests cost a sweep. A request whose client
	// gives up, or the sim's Close, ends the wait without an answer.
	Latency time.Duration
	// Now is the sim's clock: rate-limit windows, token expiry, JWT
	// validity and request times. time.Now when nil. ghinstallation stamps
	// its JWTs with the real clock, so a test that runs the App flow keeps
	// Now within a minute or so of real time.
	Now func() time.Time
	// RemoveMissingAgentAsDone makes the Actions service answer a DELETE of
	// an agent that does not exist 204 instead of 404 (see actions.go and
	// SetRemoveMissingAgentAsDone).
	RemoveMissingAgentAsDone bool
}

// Runner is one self-hosted runner registration, as GitHub lists it.
type Runner struct {
	ID        int64
	Name      string
	OS        string // "linux" when empty
	Status    string // "online" or "offline"; "online" when empty
	Busy      bool
	Ephemeral bool
	// Version is the runner software's version; DefaultRunnerVersion when
	// empty, as for a runner that has connected once.
	Version string
	// RunnerGroupID is the runner group; omitted from answers when zero.
	RunnerGroupID int64
	Labels        []Label
	// ListedIdle models GitHub's documented lag: busy can read false for
	// tens of seconds after a job has started. While set, lists and gets
	// show busy false, but a delete still meets the job and answers 422.
	ListedIdle bool
	// Lie is how GitHub misreports the runner while a job started with
	// StartJob runs on it, a DELETE included; the zero Lie tells the truth.
	Lie Lie
}

// Label is a runner label. Labels with the same name share an ID across the
// sim, as on GitHub; an ID of 0 is assigned.
type Label struct {
	ID   int64
	Name string
	Type string // "read-only" or "custom"; "custom" when empty
}

// Fault makes a scope's endpoint fail in one of the ways GitHub, or what
// stands between a client and GitHub, does. Hang applies first (then the
// answer is given as otherwise configured, or normally); then PrimaryLimit,
// Secondary, Redirect, Echo and Status answer in that order of precedence;
// DropItems, EmptyList and RepeatItems alter an otherwise normal list answer. Faulted
// answers spend no rate limit.
type Fault struct {
	// Status answers this status with a GitHub-style JSON error body.
	Status int
	// Hang sleeps this long before answering, to outlast a client's
	// timeout. A request whose client gives up, or a Close, ends it early.
	Hang time.Duration
	// PrimaryLimit answers 403 (429 when Status is 429: GitHub documents
	// both) with x-ratelimit-remaining: 0, a reset in the future and
	// GitHub's "API rate limit exceeded" message. It does not spend the
	// sim's real budget.
	PrimaryLimit bool
	// Secondary answers this status (429 or 403; 403 for other values)
	// with retry-after: 60 and GitHub's secondary rate limit message.
	Secondary int
	// Redirect answers RedirectStatus (301 when zero) with a Location of
	// this base URL joined with the request's path and query, as a moved
	// API or a hostile proxy does: Redirect is the URL another server
	// (another Sim, say) was started at.
	Redirect       string
	RedirectStatus int
	// Echo answers Status (502 when zero) with a GitHub-style JSON error
	// whose message quotes the request's headers, Authorization included,
	// as some proxies do.
	Echo bool
	// DropItems drops this many items from the end of each list page, so
	// the list holds fewer runners than total_count.
	DropItems int
	// EmptyList answers total_count 0 and no runners while runners exist.
	EmptyList bool
	// RepeatItems lists this many of each list page's runners a second
	// time at its end: a list that contradicts itself, which no runner
	// joining or leaving explains.
	RepeatItems int
	// Before runs once the fault matches a request, after Hang and before
	// the answer is prepared, outside the sim's lock, so that it may change
	// the sim (AddRunner, RemoveRunner, SetRunner): the way to make runners
	// shift between the page reads of one list. A fault with only Before
	// set answers normally.
	Before func()
	// Page limits the fault to list requests for this page number; 0
	// means every request. A fault with a Page never matches get or delete.
	Page int
	// Times limits the fault to the next N matching requests; 0 means
	// until ClearFaults.
	Times int
}

// Request is one request the sim received, as the log records it.
type Request struct {
	Method string
	Path   string
	Query  string
	// Status is the answer's status code; 0 while the answer is still
	// being prepared (a hanging fault).
	Status int
	// Scope is the normalised scope ("org:acme", "repo:acme/web",
	// "enterprise:slug"); empty for requests outside a scope.
	Scope string
	// Endpoint is EndpointList, EndpointGet, EndpointDelete, EndpointToken
	// or empty for a path the sim does not serve.
	Endpoint    string
	IfNoneMatch string
	// Accept and APIVersion are the request's Accept and
	// X-GitHub-Api-Version headers, the media type and REST API version
	// the client asked for.
	Accept     string
	APIVersion string
	At         time.Time
}

// Sim is the simulator. Create it with New.
type Sim struct {
	opts  Options
	now   func() time.Time
	limit int

	mu         sync.Mutex
	scopes     map[string]*scopeState
	nextID     int64
	labelIDs   map[string]int64
	nextLabel  int64
	faults     []*faultEntry
	log        []*Request
	used       int
	reset      time.Time
	tokens     map[string]time.Time // installation token -> expiry
	issued     []string             // every installation token minted
	jwts       []string             // every App JWT presented to the exchange
	requestSeq int64
	act        *actionsState // the scale-set side (actions.go)
	jobs       *jobsState    // workflow runs and jobs (jobs.go)

	closeOnce sync.Once
	closed    chan struct{}
	server    *http.Server
	served    chan struct{}
}

type scopeState struct {
	runners map[int64]Runner
}

type faultEntry struct {
	scope, endpoint string
	f               Fault
	left            int // remaining applications when f.Times > 0
}

// New returns a Sim with no scopes, no runners and a full budget.
func New(opts Options) *Sim {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	limit := opts.RateLimit
	if limit <= 0 {
		limit = DefaultRateLimit
	}
	return &Sim{
		opts:     opts,
		now:      now,
		limit:    limit,
		scopes:   map[string]*scopeState{},
		labelIDs: map[string]int64{},
		tokens:   map[string]time.Time{},
		closed:   make(chan struct{}),
	}
}

// Start serves the sim on a fresh loopback port and returns its base URL,
// which ends with "/" as go-github's BaseURL must. It returns an error
// rather than panicking when no port can be had, and when called twice.
func (s *Sim) Start() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.server != nil {
		return "", errors.New("ghsim: already started")
	}
	select {
	case <-s.closed:
		return "", errors.New("ghsim: closed")
	default:
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.server = srv
	s.served = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln) // ends with http.ErrServerClosed on Close
	}(s.served)
	return "http://" + ln.Addr().String() + "/", nil
}

// Close stops the server started by Start, ending hanging faults first so
// that it returns promptly. It is safe to call more than once, and without
// Start.
func (s *Sim) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
	s.mu.Lock()
	srv, served := s.server, s.served
	s.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close()
	<-served
}

// normScope parses the fleet.Scope.String() form, case-insensitively,
// and returns its lower-case key, because GitHub treats owner and
// repository names without regard to case.
func normScope(scope string) (string, bool) {
	kind, rest, ok := strings.Cut(strings.ToLower(strings.TrimSpace(scope)), ":")
	if !ok || rest == "" || strings.ContainsAny(rest, " ?#") {
		return "", false
	}
	switch kind {
	case "repo":
		o, r, ok := strings.Cut(rest, "/")
		if !ok || o == "" || r == "" || strings.Contains(r, "/") {
			return "", false
		}
	case "org", "enterprise":
		if strings.Contains(rest, "/") {
			return "", false
		}
	default:
		return "", false
	}
	return kind + ":" + rest, true
}

// AddScope makes a scope exist with no runners, so that its list answers
// 200 with total_count 0; a scope never added answers 404 as GitHub does for
// an unknown org, repository or enterprise. An invalid scope is ignored.
func (s *Sim) AddScope(scope string) {
	key, ok := normScope(scope)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopeLocked(key)
}

func (s *Sim) scopeLocked(key string) *scopeState {
	st := s.scopes[key]
	if st == nil {
		st = &scopeState{runners: map[int64]Runner{}}
		s.scopes[key] = st
	}
	return st
}

// AddRunner registers r in scope (adding the scope) and returns it as
// stored. An ID of 0 is assigned, unique across the sim and above every ID
// seen so far; an explicit ID replaces a runner with that ID in the same
// scope. Empty fields get GitHub-like defaults (see Runner and Label). An
// invalid scope stores nothing and returns the zero Runner.
func (s *Sim) AddRunner(scope string, r Runner) Runner {
	key, ok := normScope(scope)
	if !ok {
		return Runner{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.scopeLocked(key)
	if r.ID == 0 {
		s.nextID++
		r.ID = s.nextID
	} else if r.ID > s.nextID {
		s.nextID = r.ID
	}
	r = s.normRunnerLocked(r)
	st.runners[r.ID] = r
	return cloneRunner(r)
}

// normRunnerLocked fills defaults and label IDs, and copies the labels so
// that the caller's slice is never shared with the sim's state.
func (s *Sim) normRunnerLocked(r Runner) Runner {
	if r.Name == "" {
		r.Name = "runner-" + itoa(r.ID)
	}
	if r.OS == "" {
		r.OS = "linux"
	}
	if r.Status == "" {
		r.Status = "online"
	}
	if r.Version == "" {
		r.Version = DefaultRunnerVersion
	}
	labels := make([]Label, len(r.Labels))
	for i, l := range r.Labels {
		if l.Type == "" {
			l.Type = "custom"
		}
		name := strings.ToLower(l.Name)
		switch {
		case l.ID == 0 && s.labelIDs[name] != 0:
			l.ID = s.labelIDs[name]
		case l.ID == 0:
			s.nextLabel++
			l.ID = s.nextLabel
			s.labelIDs[name] = l.ID
		default:
			if l.ID > s.nextLabel {
				s.nextLabel = l.ID
			}
			if s.labelIDs[name] == 0 {
				s.labelIDs[name] = l.ID
			}
		}
		labels[i] = l
	}
	r.Labels = labels
	return r
}

// SetRunner changes runner id in scope through mutate (its ID cannot be
// changed) and reports whether the runner existed. A change alters the list
// body and so its ETag, as on GitHub.
func (s *Sim) SetRunner(scope string, id int64, mutate func(*Runner)) bool {
	key, ok := normScope(scope)
	if !ok || mutate == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.scopes[key]
	if st == nil {
		return false
	}
	r, ok := st.runners[id]
	if !ok {
		return false
	}
	r = cloneRunner(r)
	mutate(&r)
	r.ID = id
	st.runners[id] = s.normRunnerLocked(r)
	return true
}

// RemoveRunner deletes a registration without an API call, as GitHub's own
// clean-up of long-offline runners does, and reports whether it existed.
func (s *Sim) RemoveRunner(scope string, id int64) bool {
	key, ok := normScope(scope)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.scopes[key]
	if st == nil {
		return false
	}
	if _, ok := st.runners[id]; !ok {
		return false
	}
	delete(st.runners, id)
	return true
}

// Runners returns copies of scope's runners, sorted by ID.
func (s *Sim) Runners(scope string) []Runner {
	key, ok := normScope(scope)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sortedLocked(key)
}

func (s *Sim) sortedLocked(key string) []Runner {
	st := s.scopes[key]
	if st == nil {
		return nil
	}
	out := make([]Runner, 0, len(st.runners))
	for _, r := range st.runners {
		out = append(out, cloneRunner(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func cloneRunner(r Runner) Runner {
	r.Labels = append([]Label(nil), r.Labels...)
	return r
}

// Fault arms f on scope's endpoint (EndpointList, EndpointGet,
// EndpointDelete, or Any; scope may be Any). Faults accumulate: the first
// armed fault, in the order added, that matches a request applies, and one
// whose Times are spent is dropped. Faults apply before the scope's
// existence is checked, and an invalid scope arms nothing.
func (s *Sim) Fault(scope, endpoint string, f Fault) {
	key := Any
	if scope != Any {
		var ok bool
		if key, ok = normScope(scope); !ok {
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultEntry{scope: key, endpoint: endpoint, f: f, left: f.Times})
}

// ClearFaults disarms every fault.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFaultLocked finds the fault for a request and uses up one of its
// Times.
func (s *Sim) takeFaultLocked(scope, endpoint string, page int) (Fault, bool) {
	for i, fe := range s.faults {
		if fe.scope != Any && fe.scope != scope {
			continue
		}
		if fe.endpoint != Any && fe.endpoint != endpoint {
			continue
		}
		if fe.f.Page != 0 && (endpoint != EndpointList || fe.f.Page != page) {
			continue
		}
		if fe.f.Times > 0 {
			fe.left--
			if fe.left <= 0 {
				s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
			}
		}
		return fe.f, true
	}
	return Fault{}, false
}

// Requests returns the log of requests received since New or the last
// ResetRequests, oldest first.
func (s *Sim) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.log))
	for i, r := range s.log {
		out[i] = *r
	}
	return out
}

// ResetRequests empties the request log.
func (s *Sim) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
}

// Credentials returns every App credential the sim has seen or made: the
// JWTs presented to the token exchange and the installation tokens it
// minted, oldest first, so that a test can check none of them leaked.
func (s *Sim) Credentials() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(append([]string(nil), s.jwts...), s.issued...)
}

// RateRemaining is what is left of the primary budget in the current
// window.
func (s *Sim) RateRemaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windowLocked()
	return s.limit - s.used
}

// windowLocked starts a new hour-long budget window when the last has
// passed, as GitHub's budget resets an hour after it was first spent.
func (s *Sim) windowLocked() {
	now := s.now()
	if s.reset.IsZero() || !now.Before(s.reset) {
		s.used = 0
		s.reset = now.Add(time.Hour).Truncate(time.Second)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
