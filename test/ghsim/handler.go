package ghsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	docsRunners   = "https://docs.github.com/rest/actions/self-hosted-runners"
	docsRate      = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
	docsRateFirst = docsRate + "#about-the-primary-rate-limit"
	// go-github recognises a secondary limit by a documentation URL
	// ending in "secondary-rate-limits", as GitHub's does.
	docsRateSecond = docsRate + "#about-secondary-rate-limits"
	docsREST       = "https://docs.github.com/rest"
	docsAppToken   = "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"
)

// route is what a request's method and path address.
type route struct {
	scope    string // normalised scope key
	endpoint string // "" when the sim serves nothing there
	id       int64  // runner id for get and delete; installation id for token
	badID    bool   // a runner path whose id is not a number: GitHub's 404
}

// parseRoute maps GitHub's paths onto scopes and endpoints. Paths are
// matched without regard to case, as GitHub matches owner names.
func parseRoute(method, path string) route {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	if len(seg) == 4 && seg[0] == "app" && seg[1] == "installations" && seg[3] == "access_tokens" {
		if method != http.MethodPost {
			return route{}
		}
		id, err := strconv.ParseInt(seg[2], 10, 64)
		if err != nil || id <= 0 {
			return route{}
		}
		return route{endpoint: EndpointToken, id: id}
	}
	scope, rest, ok := splitScope(seg, restWords)
	if !ok {
		return route{}
	}
	key, ok := normScope(scope)
	if jr, isJobs := jobsRoute(method, key, rest); ok && isJobs {
		return jr
	}
	if !ok || len(rest) < 2 || rest[0] != "actions" || rest[1] != "runners" {
		return route{}
	}
	switch {
	case len(rest) == 2 && method == http.MethodGet:
		return route{scope: key, endpoint: EndpointList}
	case len(rest) == 3 && (method == http.MethodGet || method == http.MethodDelete):
		ep := EndpointGet
		if method == http.MethodDelete {
			ep = EndpointDelete
		}
		id, err := strconv.ParseInt(rest[2], 10, 64)
		return route{scope: key, endpoint: ep, id: id, badID: err != nil}
	}
	return route{}
}

// recorder remembers the status written, for the request log.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// reply is an answer prepared under the lock and written after it.
type reply struct {
	status int
	body   []byte
	header http.Header
}

// Handler serves the API, for callers that run their own server.
func (s *Sim) Handler() http.Handler { return http.HandlerFunc(s.serve) }

func (s *Sim) serve(w http.ResponseWriter, r *http.Request) {
	if art, ok := parseActionsRoute(r.Method, r.URL.Path); ok {
		s.serveActions(w, r, art)
		return
	}
	rt := parseRoute(r.Method, r.URL.Path)
	entry := &Request{
		Method:      r.Method,
		Path:        r.URL.Path,
		Query:       r.URL.RawQuery,
		Scope:       rt.scope,
		Endpoint:    rt.endpoint,
		IfNoneMatch: r.Header.Get("If-None-Match"),
		Accept:      r.Header.Get("Accept"),
		APIVersion:  r.Header.Get("X-GitHub-Api-Version"),
		At:          s.now(),
	}
	s.mu.Lock()
	s.log = append(s.log, entry)
	s.requestSeq++
	seq := s.requestSeq
	s.mu.Unlock()

	if d := s.opts.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.closed:
			t.Stop()
			return
		}
	}

	rec := &recorder{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		entry.Status = rec.status
		s.mu.Unlock()
	}()
	h := w.Header()
	h.Set("X-GitHub-Request-Id", fmt.Sprintf("51A1:%04X:%06X", seq>>24, seq&0xFFFFFF))
	h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")

	if rt.endpoint == EndpointToken {
		s.write(rec, s.tokenExchange(r, rt))
		return
	}
	authed, installation := s.authenticate(r)
	if !authed {
		s.write(rec, s.errorReply(http.StatusUnauthorized, "Bad credentials", docsREST, false))
		return
	}
	if rt.endpoint == "" || rt.badID {
		s.write(rec, s.errorReply(http.StatusNotFound, "Not Found", docsREST, true))
		return
	}

	perPage, page := pageParams(r)
	s.mu.Lock()
	f, faulted := s.takeFaultLocked(rt.scope, rt.endpoint, page)
	s.mu.Unlock()
	if faulted && f.Hang > 0 {
		t := time.NewTimer(f.Hang)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-s.closed:
		}
		t.Stop()
	}
	if faulted && f.Before != nil {
		f.Before()
	}
	if faulted {
		if rep, ok := s.faultReply(r, f); ok {
			s.write(rec, rep)
			return
		}
	}

	s.mu.Lock()
	rep := s.answerLocked(r, rt, installation, perPage, page, f)
	s.mu.Unlock()
	s.write(rec, rep)
}

// authenticate accepts "token X" and "Bearer X". It reports whether the
// request may proceed and whether its credential is an App installation
// token.
func (s *Sim) authenticate(r *http.Request) (ok, installation bool) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	cred = strings.TrimSpace(cred)
	known := strings.EqualFold(scheme, "token") || strings.EqualFold(scheme, "bearer")
	if known && cred != "" {
		s.mu.Lock()
		exp, minted := s.tokens[cred]
		now := s.now()
		s.mu.Unlock()
		if minted && now.Before(exp) {
			return true, true
		}
		if s.opts.Token != "" {
			return cred == s.opts.Token, false
		}
	}
	if s.opts.Token != "" || s.appConfigured() {
		return false, false
	}
	return true, false
}

func (s *Sim) appConfigured() bool { return s.opts.AppID != 0 && s.opts.AppKey != nil }

// faultReply builds a faulted answer; false when f only delays or alters a
// normal answer.
func (s *Sim) faultReply(r *http.Request, f Fault) (reply, bool) {
	switch {
	case f.PrimaryLimit:
		status := http.StatusForbidden
		if f.Status == http.StatusTooManyRequests {
			status = http.StatusTooManyRequests
		}
		rep := s.errorReply(status, "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.", docsRateFirst, false)
		s.mu.Lock()
		s.windowLocked()
		reset := s.reset
		s.mu.Unlock()
		setRate(rep.header, s.limit, 0, reset)
		return rep, true
	case f.Secondary != 0:
		status := f.Secondary
		if status != http.StatusTooManyRequests {
			status = http.StatusForbidden
		}
		rep := s.errorReply(status, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID.", docsRateSecond, false)
		rep.header.Set("Retry-After", "60")
		return rep, true
	case f.Redirect != "":
		status := f.RedirectStatus
		if status == 0 {
			status = http.StatusMovedPermanently
		}
		rep := s.errorReply(status, http.StatusText(status), docsREST, false)
		rep.header.Set("Location", strings.TrimSuffix(f.Redirect, "/")+r.URL.RequestURI())
		return rep, true
	case f.Echo:
		status := f.Status
		if status < 400 || status > 599 {
			status = http.StatusBadGateway
		}
		return s.errorReply(status, "upstream refused the request; request headers: "+echoHeaders(r.Header), docsREST, false), true
	case f.Status != 0:
		status := f.Status
		if status < 100 || status > 599 {
			status = http.StatusInternalServerError
		}
		msg := http.StatusText(status)
		if msg == "" {
			msg = "Server Error"
		}
		return s.errorReply(status, msg, docsREST, false), true
	}
	return reply{}, false
}

// echoHeaders quotes every request header, sorted, as an echoing proxy
// puts them in its error page.
func echoHeaders(h http.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+": "+strings.Join(h[k], ", "))
	}
	return strings.Join(parts, "; ")
}

// errorReply is a GitHub-style JSON error, spending one unit of the budget
// when spend is set (an authenticated request GitHub served).
func (s *Sim) errorReply(status int, msg, docs string, spend bool) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spend {
		s.spendLocked()
	}
	return s.errorReplyLocked(status, msg, docs)
}

func (s *Sim) errorReplyLocked(status int, msg, docs string) reply {
	body, _ := json.Marshal(errorJSON{Message: msg, DocumentationURL: docs})
	rep := reply{status: status, body: body, header: http.Header{}}
	s.rateHeadersLocked(rep.header)
	return rep
}

type errorJSON struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url,omitempty"`
}

// spendLocked takes one unit of the primary budget.
func (s *Sim) spendLocked() {
	s.windowLocked()
	if s.used < s.limit {
		s.used++
	}
}

func (s *Sim) rateHeadersLocked(h http.Header) {
	s.windowLocked()
	setRate(h, s.limit, s.limit-s.used, s.reset)
}

func setRate(h http.Header, limit, remaining int, reset time.Time) {
	h.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-RateLimit-Used", strconv.Itoa(limit-remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
}

// answerLocked serves a request that passed auth and faults: the scope's
// existence, the budget, then the endpoint, with conditional GETs.
func (s *Sim) answerLocked(r *http.Request, rt route, installation bool, perPage, page int, f Fault) reply {
	s.windowLocked()
	// A spent budget refuses before the ETag is compared (see the package
	// doc): the conservative reading, so the reaper never depends on 304s
	// while rate-limited.
	if s.used >= s.limit {
		rep := s.errorReplyLocked(http.StatusForbidden, "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.", docsRateFirst)
		return rep
	}
	if isJobsEndpoint(rt.endpoint) {
		return s.answerJobsLocked(r, rt, perPage, page, f)
	}
	if installation && strings.HasPrefix(rt.scope, "enterprise:") {
		// GitHub's enterprise runner endpoints take a classic PAT only.
		s.spendLocked()
		return s.errorReplyLocked(http.StatusForbidden, "Resource not accessible by integration", docsRunners)
	}
	st := s.scopes[rt.scope]
	if st == nil {
		s.spendLocked()
		return s.errorReplyLocked(http.StatusNotFound, "Not Found", docsREST)
	}

	switch rt.endpoint {
	case EndpointDelete:
		s.spendLocked()
		run, ok := st.runners[rt.id]
		switch {
		case !ok:
			return s.errorReplyLocked(http.StatusNotFound, "Not Found", docsRunners)
		case s.refusesDeleteLocked(run):
			return s.errorReplyLocked(http.StatusUnprocessableEntity,
				fmt.Sprintf("Runner %q is still running a job", run.Name), docsRunners)
		}
		delete(st.runners, rt.id)
		s.deletedLocked(rt.id)
		rep := reply{status: http.StatusNoContent, header: http.Header{}}
		s.rateHeadersLocked(rep.header)
		return rep
	case EndpointGet:
		run, ok := st.runners[rt.id]
		if !ok {
			s.spendLocked()
			return s.errorReplyLocked(http.StatusNotFound, "Not Found", docsRunners)
		}
		body, _ := json.Marshal(toJSON(s.listedLocked(run)))
		return s.conditionalLocked(r, body, http.Header{})
	}

	// EndpointList.
	all := s.sortedLocked(rt.scope)
	if name := r.URL.Query().Get("name"); name != "" {
		kept := all[:0]
		for _, run := range all {
			if run.Name == name {
				kept = append(kept, run)
			}
		}
		all = kept
	}
	if f.EmptyList {
		all = nil
	}
	total := len(all)
	from := (page - 1) * perPage
	if from > total || from < 0 {
		from = total
	}
	to := min(from+perPage, total)
	items := all[from:to]
	if f.DropItems > 0 {
		items = items[:max(0, len(items)-f.DropItems)]
	}
	if f.RepeatItems > 0 {
		items = append(slices.Clone(items), items[:min(f.RepeatItems, len(items))]...)
	}
	out := listJSON{TotalCount: total, Runners: make([]runnerJSON, 0, len(items))}
	for _, run := range items {
		out.Runners = append(out.Runners, toJSON(s.listedLocked(run)))
	}
	body, _ := json.Marshal(out)
	h := http.Header{}
	if link := linkHeader(r, page, lastPage(total, perPage)); link != "" {
		h.Set("Link", link)
	}
	return s.conditionalLocked(r, body, h)
}

// conditionalLocked answers a GET with its ETag: 304 without a body and
// without spending the budget when If-None-Match holds it, as GitHub does;
// otherwise 200, spending one unit.
func (s *Sim) conditionalLocked(r *http.Request, body []byte, h http.Header) reply {
	sum := sha256.Sum256(body)
	etag := `W/"` + hex.EncodeToString(sum[:]) + `"`
	h.Set("ETag", etag)
	h.Set("Cache-Control", "private, max-age=60")
	h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		s.rateHeadersLocked(h)
		return reply{status: http.StatusNotModified, header: h}
	}
	s.spendLocked()
	s.rateHeadersLocked(h)
	return reply{status: http.StatusOK, body: body, header: h}
}

// etagMatches is If-None-Match's weak comparison over a list of tags.
func etagMatches(header, etag string) bool {
	want := strings.TrimPrefix(etag, "W/")
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || (t != "" && strings.TrimPrefix(t, "W/") == want) {
			return true
		}
	}
	return false
}

// write sends a prepared reply. JSON bodies get GitHub's content headers;
// 204 and 304 have no body.
func (s *Sim) write(w http.ResponseWriter, rep reply) {
	h := w.Header()
	for k, v := range rep.header {
		h[k] = v
	}
	if rep.body != nil {
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("X-GitHub-Media-Type", "github.v3; format=json")
		h.Set("Content-Length", strconv.Itoa(len(rep.body)))
	}
	w.WriteHeader(rep.status)
	if rep.body != nil {
		_, _ = w.Write(rep.body) // a client that gave up is not the sim's error
	}
}

// pageParams reads per_page (default 30, clamped to 1..100) and page (from
// 1), treating what does not parse as absent, as GitHub does.
func pageParams(r *http.Request) (perPage, page int) {
	q := r.URL.Query()
	perPage = 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	page = 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		page = v
	}
	return perPage, page
}

func lastPage(total, perPage int) int {
	if total == 0 {
		return 1
	}
	return (total + perPage - 1) / perPage
}

// linkHeader is GitHub's pagination header: prev, next, last, first, each
// the request's own absolute URL with page replaced in place (or appended),
// so other parameters such as per_page and name carry over. A single page
// has none.
func linkHeader(r *http.Request, page, last int) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	base := scheme + "://" + r.Host + r.URL.EscapedPath()
	pageURL := func(p int) string {
		var parts []string
		replaced := false
		for _, part := range strings.Split(r.URL.RawQuery, "&") {
			if part == "" {
				continue
			}
			if k, _, _ := strings.Cut(part, "="); k == "page" {
				if replaced {
					continue
				}
				part, replaced = "page="+strconv.Itoa(p), true
			}
			parts = append(parts, part)
		}
		if !replaced {
			parts = append(parts, "page="+strconv.Itoa(p))
		}
		return "<" + base + "?" + strings.Join(parts, "&") + ">"
	}
	var links []string
	if page > 1 {
		links = append(links, pageURL(page-1)+`; rel="prev"`)
	}
	if page < last {
		links = append(links, pageURL(page+1)+`; rel="next"`, pageURL(last)+`; rel="last"`)
	}
	if page > 1 {
		links = append(links, pageURL(1)+`; rel="first"`)
	}
	return strings.Join(links, ", ")
}

// The wire shapes, in the fixture's field order. ephemeral is omitted when
// false so that a scope holding the fixture's runners serves the fixture's
// body exactly.
type listJSON struct {
	TotalCount int          `json:"total_count"`
	Runners    []runnerJSON `json:"runners"`
}

// runnerJSON is a runner in the order and shape of GitHub's own example
// (runner-paginated in its API description).
type runnerJSON struct {
	ID            int64       `json:"id"`
	RunnerGroupID int64       `json:"runner_group_id,omitempty"`
	Name          string      `json:"name"`
	OS            string      `json:"os"`
	Status        string      `json:"status"`
	Busy          bool        `json:"busy"`
	Ephemeral     bool        `json:"ephemeral"`
	Version       string      `json:"version"`
	Labels        []labelJSON `json:"labels"`
}

type labelJSON struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Type string `json:"type"`
}

func toJSON(r Runner) runnerJSON {
	out := runnerJSON{ID: r.ID, RunnerGroupID: r.RunnerGroupID, Name: r.Name, OS: r.OS, Status: r.Status,
		Busy: r.Busy && !r.ListedIdle, Ephemeral: r.Ephemeral, Version: r.Version,
		Labels: make([]labelJSON, 0, len(r.Labels))}
	for _, l := range r.Labels {
		out.Labels = append(out.Labels, labelJSON(l))
	}
	return out
}

// Scope words: how a path names a scope's kind, in the REST API
// (/orgs/O, /enterprises/E, /repos/O/R) and in the Actions service's URLs
// the simulator hands out (/org/O, /enterprise/E, /repo/O/R).
type scopeWords struct{ org, enterprise, repo string }

var (
	restWords    = scopeWords{"orgs", "enterprises", "repos"}
	serviceWords = scopeWords{"org", "enterprise", "repo"}
)

// splitScope reads a scope from the head of a path, in the configuration
// form (org:O, enterprise:E, repo:O/R), and returns what follows it, which
// is never empty.
func splitScope(seg []string, w scopeWords) (string, []string, bool) {
	switch {
	case len(seg) >= 3 && seg[0] == w.org:
		return "org:" + seg[1], seg[2:], true
	case len(seg) >= 3 && seg[0] == w.enterprise:
		return "enterprise:" + seg[1], seg[2:], true
	case len(seg) >= 4 && seg[0] == w.repo:
		return "repo:" + seg[1] + "/" + seg[2], seg[3:], true
	default:
		return "", nil, false
	}
}
