package ghsim

// The runner scale-set side of GitHub: what actions-runner-controller's
// scale-set controllers (gha-runner-scale-set, `--auto-scaling-runner-set-only`)
// speak, as its client package github/actions of v0.27.6 does:
//
//	POST /[api/v3/]{repos/O/R | orgs/O | enterprises/E}/actions/runners/registration-token
//	POST /[api/v3/]actions/runner-registration          (Authorization: RemoteAuth <registration token>)
//	POST   {actions}/_apis/runtime/runnerscalesets/{scaleSetId}/generatejitconfig
//	GET    {actions}/_apis/distributedtask/pools/0/agents?agentName=
//	GET    {actions}/_apis/distributedtask/pools/0/agents/{id}
//	DELETE {actions}/_apis/distributedtask/pools/0/agents/{id}
//
// For a GitHub Enterprise Server style config URL (http://127.0.0.1:PORT/acme)
// ARC's client puts the two GitHub calls under /api/v3; both forms are
// served. The registration token is traded for the Actions service's URL
// and an admin token by runner-registration; {actions} is that URL, the
// sim's own address under /_actions/{org/O | repo/O/R | enterprise/E}, so the
// service's requests carry their scope. The admin token is JWT-shaped (ARC
// reads its exp claim, unverified, to know when to refresh) and only the
// sim's own tokens, unexpired, are accepted there.
//
// An agent of the Actions service is a runner of the REST API: one store,
// one id. generatejitconfig registers a runner (offline, ephemeral, as a JIT
// runner is until it connects) that GET /actions/runners lists, and a REST
// DELETE makes the agent's GET answer 404; RemoveRunner, SetRunner (Busy) and
// AddRunner act on both sides.
//
// Errors of the Actions service are its JSON exceptions, whose typeName ARC
// reads (ParseActionsErrorFromResponse): 404 TaskAgentNotFoundException, 400
// TaskAgentJobStillRunningException for a busy runner, 409
// TaskAgentExistsException for a name taken in the scope. The scale set in
// generatejitconfig's path is recorded on the agent and not checked: the sim
// keeps no scale sets, and ARC's EphemeralRunner and EphemeralRunnerSet
// controllers never ask for one.

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Endpoint names of the scale-set side, as Request.Endpoint records them
// and Fault accepts them.
const (
	// EndpointRegistrationToken is POST .../actions/runners/registration-token.
	EndpointRegistrationToken = "registration-token"
	// EndpointRunnerRegistration is POST /actions/runner-registration.
	EndpointRunnerRegistration = "runner-registration"
	// EndpointGenerateJIT is the Actions service's generatejitconfig.
	EndpointGenerateJIT = "generatejitconfig"
	// EndpointAgentGet, EndpointAgentList and EndpointAgentDelete are the
	// Actions service's agent by id, agents by name, and agent removal.
	EndpointAgentGet    = "agent-get"
	EndpointAgentList   = "agent-list"
	EndpointAgentDelete = "agent-delete"
)

// Lifetimes of the credentials the scale-set side mints: GitHub's
// registration tokens last an hour, and so do the sim's admin tokens.
const (
	registrationTokenLifetime = time.Hour
	adminTokenLifetime        = time.Hour
)

// The Actions service's exception type names, as the service sends them in
// typeName; ARC matches the ends (AgentNotFoundException,
// JobStillRunningException, AgentExistsException).
const (
	ExceptionAgentNotFound   = "GitHub.DistributedTask.WebApi.TaskAgentNotFoundException, GitHub.DistributedTask.WebApi"
	ExceptionJobStillRunning = "GitHub.DistributedTask.WebApi.TaskAgentJobStillRunningException, GitHub.DistributedTask.WebApi"
	ExceptionAgentExists     = "GitHub.DistributedTask.WebApi.TaskAgentExistsException, GitHub.DistributedTask.WebApi"
	exceptionUnauthorized    = "Microsoft.VisualStudio.Services.Common.VssUnauthorizedException, Microsoft.VisualStudio.Services.Common"
)

// actionsState is the scale-set side's own state, beside the scopes'
// runners it shares with the REST API. Guarded by Sim.mu.
type actionsState struct {
	regTokens   map[string]issued // registration token -> scope, expiry
	adminTokens map[string]issued // admin token -> scope, expiry
	scaleSet    map[int64]int64   // runner id -> scale set id
	// removeMissingAsDone answers a DELETE of a missing agent 204.
	removeMissingAsDone bool
}

type issued struct {
	scope string
	exp   time.Time
}

// actionsLocked returns the scale-set side's state, making it on first use.
func (s *Sim) actionsLocked() *actionsState {
	if s.act == nil {
		s.act = &actionsState{
			regTokens:           map[string]issued{},
			adminTokens:         map[string]issued{},
			scaleSet:            map[int64]int64{},
			removeMissingAsDone: s.opts.RemoveMissingAgentAsDone,
		}
	}
	return s.act
}

// SetRemoveMissingAgentAsDone switches what a DELETE of an agent that does
// not exist answers: 204, as if removed, when on (as an ARC that treats the
// Actions service's 404 as done would see it, actions-runner-controller PR
// #4399), and GitHub's 404 TaskAgentNotFoundException when off, the default
// (see Options.RemoveMissingAgentAsDone).
func (s *Sim) SetRemoveMissingAgentAsDone(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.actionsLocked().removeMissingAsDone = on
}

// ScaleSetOf returns the scale set a runner was registered for through
// generatejitconfig, and whether it was.
func (s *Sim) ScaleSetOf(id int64) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.actionsLocked().scaleSet[id]
	return ss, ok
}

// RunnerByName returns scope's runner of that name, as the Actions service
// finds it.
func (s *Sim) RunnerByName(scope, name string) (Runner, bool) {
	key, ok := normScope(scope)
	if !ok {
		return Runner{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.sortedLocked(key) {
		if r.Name == name {
			return r, true
		}
	}
	return Runner{}, false
}

// RequestCount counts the logged requests to endpoint that were answered
// with status; a status of 0 counts them all.
func (s *Sim) RequestCount(endpoint string, status int) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Endpoint == endpoint && (status == 0 || r.Status == status) {
			n++
		}
	}
	return n
}

// ConfigURL is the githubConfigUrl that points ARC at the sim served at base
// (what Start returned) for scope: http://HOST/acme for org:acme,
// http://HOST/acme/web for repo:acme/web, http://HOST/enterprises/e for
// enterprise:e. ARC treats any host but github.com's as a GitHub Enterprise
// Server and sends the GitHub calls under /api/v3, which the sim serves.
func ConfigURL(base, scope string) (string, error) {
	key, ok := normScope(scope)
	if !ok {
		return "", fmt.Errorf("ghsim: invalid scope %q", scope)
	}
	kind, rest, _ := strings.Cut(key, ":")
	if kind == "enterprise" {
		rest = "enterprises/" + rest
	}
	return strings.TrimSuffix(base, "/") + "/" + rest, nil
}

// actionsRoute is what a request addresses on the scale-set side.
type actionsRoute struct {
	scope    string // normalised scope key; empty for runner-registration
	endpoint string
	id       int64 // agent id, or scale set id for generatejitconfig
	badID    bool
}

// parseActionsRoute recognises the scale-set side's paths; false leaves the
// request to the REST API's routes.
func parseActionsRoute(method, path string) (actionsRoute, bool) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	if len(seg) >= 2 && seg[0] == "api" && seg[1] == "v3" {
		seg = seg[2:]
	}
	if len(seg) == 2 && seg[0] == "actions" && seg[1] == "runner-registration" {
		if method != http.MethodPost {
			return actionsRoute{}, true
		}
		return actionsRoute{endpoint: EndpointRunnerRegistration}, true
	}
	if len(seg) >= 1 && seg[0] == "_actions" {
		return parseServiceRoute(method, seg[1:]), true
	}
	scope, rest, ok := splitScope(seg, restWords)
	if !ok {
		return actionsRoute{}, false
	}
	if len(rest) != 3 || rest[0] != "actions" || rest[1] != "runners" || rest[2] != "registration-token" {
		return actionsRoute{}, false
	}
	key, ok := normScope(scope)
	if !ok || method != http.MethodPost {
		return actionsRoute{}, true
	}
	return actionsRoute{scope: key, endpoint: EndpointRegistrationToken}, true
}

// parseServiceRoute maps the Actions service's paths below /_actions.
func parseServiceRoute(method string, seg []string) actionsRoute {
	scope, seg, ok := splitScope(seg, serviceWords)
	if !ok {
		return actionsRoute{}
	}
	key, ok := normScope(scope)
	if !ok || seg[0] != "_apis" {
		return actionsRoute{}
	}
	seg = seg[1:]
	switch {
	case len(seg) == 4 && seg[0] == "runtime" && seg[1] == "runnerscalesets" && seg[3] == "generatejitconfig" && method == http.MethodPost:
		id, err := strconv.ParseInt(seg[2], 10, 64)
		return actionsRoute{scope: key, endpoint: EndpointGenerateJIT, id: id, badID: err != nil}
	case len(seg) == 4 && seg[0] == "distributedtask" && seg[1] == "pools" && seg[2] == "0" && seg[3] == "agents" && method == http.MethodGet:
		return actionsRoute{scope: key, endpoint: EndpointAgentList}
	case len(seg) == 5 && seg[0] == "distributedtask" && seg[1] == "pools" && seg[2] == "0" && seg[3] == "agents":
		id, err := strconv.ParseInt(seg[4], 10, 64)
		switch method {
		case http.MethodGet:
			return actionsRoute{scope: key, endpoint: EndpointAgentGet, id: id, badID: err != nil}
		case http.MethodDelete:
			return actionsRoute{scope: key, endpoint: EndpointAgentDelete, id: id, badID: err != nil}
		}
	}
	return actionsRoute{scope: key}
}

// serveActions serves a request parseActionsRoute recognised: logged like
// every other, delayed by Latency, and open to the faults armed on its
// endpoint. None of it spends the primary budget but the registration
// token, which is a REST API call.
func (s *Sim) serveActions(w http.ResponseWriter, r *http.Request, rt actionsRoute) {
	entry := &Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Scope: rt.scope, Endpoint: rt.endpoint,
		Accept: r.Header.Get("Accept"), APIVersion: r.Header.Get("X-GitHub-Api-Version"),
		At: s.now(),
	}
	s.mu.Lock()
	s.log = append(s.log, entry)
	s.requestSeq++
	seq := s.requestSeq
	s.mu.Unlock()
	if !s.wait(r, s.opts.Latency) {
		return
	}
	rec := &recorder{ResponseWriter: w}
	defer func() {
		s.mu.Lock()
		entry.Status = rec.status
		s.mu.Unlock()
	}()
	w.Header().Set("X-GitHub-Request-Id", fmt.Sprintf("51A1:%04X:%06X", seq>>24, seq&0xFFFFFF))

	if rt.endpoint == "" || rt.badID {
		if strings.HasPrefix(r.URL.Path, "/_actions/") {
			s.write(rec, actionsError(http.StatusNotFound, "", "The requested resource was not found"))
			return
		}
		s.write(rec, s.errorReply(http.StatusNotFound, "Not Found", docsREST, false))
		return
	}

	s.mu.Lock()
	f, faulted := s.takeFaultLocked(rt.scope, rt.endpoint, 0)
	s.mu.Unlock()
	if faulted && f.Hang > 0 && !s.wait(r, f.Hang) {
		return
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

	switch rt.endpoint {
	case EndpointRegistrationToken:
		s.write(rec, s.registrationToken(r, rt))
	case EndpointRunnerRegistration:
		s.write(rec, s.runnerRegistration(r))
	default:
		s.write(rec, s.actionsService(r, rt))
	}
}

// wait sleeps d, unless the client gives up or the sim closes first; it
// reports whether the request is still to be answered.
func (s *Sim) wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-s.closed:
		return false
	}
}

// registrationToken serves POST .../actions/runners/registration-token:
// 201 with a token good for an hour, for a credential the REST API accepts.
// ARC's client sends its personal access token with HTTP Basic
// ("github:TOKEN"), which GitHub accepts; it is taken here as that token.
func (s *Sim) registrationToken(r *http.Request, rt actionsRoute) reply {
	if user, pass, ok := r.BasicAuth(); ok && user != "" && pass != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "token "+pass)
	}
	authed, installation := s.authenticate(r)
	if !authed {
		return s.errorReply(http.StatusUnauthorized, "Bad credentials", docsREST, false)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.windowLocked()
	if s.used >= s.limit {
		return s.errorReplyLocked(http.StatusForbidden, "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID.", docsRateFirst)
	}
	s.spendLocked()
	if installation && strings.HasPrefix(rt.scope, "enterprise:") {
		return s.errorReplyLocked(http.StatusForbidden, "Resource not accessible by integration", docsRunners)
	}
	if s.scopes[rt.scope] == nil {
		return s.errorReplyLocked(http.StatusNotFound, "Not Found", docsREST)
	}
	tok := "A" + strings.ToUpper(randomHex(14))
	exp := s.now().Add(registrationTokenLifetime).UTC().Truncate(time.Second)
	s.actionsLocked().regTokens[tok] = issued{scope: rt.scope, exp: exp}
	body, _ := json.Marshal(map[string]string{"token": tok, "expires_at": exp.Format(time.RFC3339)})
	rep := reply{status: http.StatusCreated, body: body, header: http.Header{}}
	s.rateHeadersLocked(rep.header)
	return rep
}

// runnerRegistration serves POST /actions/runner-registration: a
// registration token (Authorization: RemoteAuth TOKEN) for the scope that
// the body's url names buys the Actions service's URL and an admin token.
func (s *Sim) runnerRegistration(r *http.Request) reply {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	tok = strings.TrimSpace(tok)
	var in struct {
		URL         string `json:"url"`
		RunnerEvent string `json:"runner_event"`
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err := json.Unmarshal(b, &in); err != nil {
		return s.errorReply(http.StatusBadRequest, "Problems parsing JSON", docsREST, false)
	}
	scope, ok := scopeOfConfigURL(in.URL)
	if !ok {
		return s.errorReply(http.StatusNotFound, "Not Found", docsREST, false)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	act := s.actionsLocked()
	got, known := act.regTokens[tok]
	if !strings.EqualFold(scheme, "RemoteAuth") || !known || !s.now().Before(got.exp) || got.scope != scope {
		return s.errorReplyLocked(http.StatusUnauthorized, "Bad credentials", docsREST)
	}
	now := s.now()
	exp := now.Add(adminTokenLifetime)
	admin := adminJWT(scope, now, exp)
	act.adminTokens[admin] = issued{scope: scope, exp: exp}
	for t, is := range act.adminTokens { // forget expired tokens so the map stays small
		if !now.Before(is.exp) {
			delete(act.adminTokens, t)
		}
	}
	body, _ := json.Marshal(map[string]string{
		"url":          serviceURL(r, scope),
		"token":        admin,
		"token_schema": "OAuthAccessToken",
	})
	return reply{status: http.StatusOK, body: body, header: http.Header{}}
}

// scopeOfConfigURL reads a githubConfigUrl's scope as ARC does: one path
// segment an organization, two a repository, or enterprises/E.
func scopeOfConfigURL(in string) (string, bool) {
	u, err := url.Parse(strings.Trim(in, "/"))
	if err != nil {
		return "", false
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return normScope("org:" + parts[0])
	case len(parts) == 2 && strings.EqualFold(parts[0], "enterprises"):
		return normScope("enterprise:" + parts[1])
	case len(parts) == 2:
		return normScope("repo:" + parts[0] + "/" + parts[1])
	}
	return "", false
}

// serviceURL is the Actions service's base for scope, at the address the
// request reached.
func serviceURL(r *http.Request, scope string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	kind, rest, _ := strings.Cut(scope, ":")
	return scheme + "://" + r.Host + "/_actions/" + kind + "/" + rest + "/"
}

// adminJWT is a JWT-shaped admin token: ARC parses it, unverified, for its
// exp. Its signature is random bytes; the sim knows its tokens by value.
func adminJWT(scope string, iat, exp time.Time) string {
	enc := base64.RawURLEncoding
	head, _ := json.Marshal(map[string]string{"typ": "JWT", "alg": "RS256"})
	claims, _ := json.Marshal(map[string]any{
		"iss": "ghsim", "aud": "actions", "scp": "Actions.Runners " + scope,
		"nbf": iat.Unix(), "iat": iat.Unix(), "exp": exp.Unix(),
	})
	return enc.EncodeToString(head) + "." + enc.EncodeToString(claims) + "." + enc.EncodeToString([]byte(randomHex(32)))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// actionsError is the Actions service's JSON exception.
func actionsError(status int, typeName, msg string) reply {
	key := typeName
	if i := strings.LastIndex(key, "."); i >= 0 {
		key = key[i+1:]
	}
	key, _, _ = strings.Cut(key, ",")
	body, _ := json.Marshal(map[string]any{
		"$id": "1", "innerException": nil, "message": msg,
		"typeName": typeName, "typeKey": key, "errorCode": 0, "eventId": 3000,
	})
	return reply{status: status, body: body, header: http.Header{}}
}

// agentJSON is an agent as the Actions service answers it; ARC reads id,
// name and runnerScaleSetId.
type agentJSON struct {
	ID               int64       `json:"id"`
	Name             string      `json:"name"`
	Version          string      `json:"version"`
	OSDescription    string      `json:"osDescription"`
	Enabled          bool        `json:"enabled"`
	Status           string      `json:"status"`
	Busy             bool        `json:"busy"`
	Ephemeral        bool        `json:"ephemeral"`
	RunnerScaleSetID int64       `json:"runnerScaleSetId"`
	Labels           []labelJSON `json:"labels"`
}

func (s *Sim) agentLocked(r Runner) agentJSON {
	a := agentJSON{ID: r.ID, Name: r.Name, Version: r.Version, OSDescription: r.OS, Enabled: true,
		Status: r.Status, Busy: r.Busy && !r.ListedIdle, Ephemeral: r.Ephemeral,
		RunnerScaleSetID: s.actionsLocked().scaleSet[r.ID], Labels: make([]labelJSON, 0, len(r.Labels))}
	for _, l := range r.Labels {
		a.Labels = append(a.Labels, labelJSON(l))
	}
	return a
}

// actionsService serves the Actions service's endpoints for an admin token
// of the path's scope.
func (s *Sim) actionsService(r *http.Request, rt actionsRoute) reply {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	tok = strings.TrimSpace(tok)
	var jit struct {
		Name       string `json:"name"`
		WorkFolder string `json:"workFolder"`
	}
	if rt.endpoint == EndpointGenerateJIT {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := json.Unmarshal(b, &jit); err != nil || jit.Name == "" {
			return actionsError(http.StatusBadRequest, "System.ArgumentException, mscorlib", "A runner name is required")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	act := s.actionsLocked()
	got, known := act.adminTokens[tok]
	if !strings.EqualFold(scheme, "Bearer") || !known || !s.now().Before(got.exp) || got.scope != rt.scope {
		return actionsError(http.StatusUnauthorized, exceptionUnauthorized,
			"TF400813: The user is not authorized to access this resource.")
	}
	st := s.scopeLocked(rt.scope)
	switch rt.endpoint {
	case EndpointGenerateJIT:
		for _, run := range st.runners {
			if run.Name == jit.Name {
				return actionsError(http.StatusConflict, ExceptionAgentExists,
					fmt.Sprintf("Agent exists with name %s in pool 0.", jit.Name))
			}
		}
		s.nextID++
		run := s.normRunnerLocked(Runner{ID: s.nextID, Name: jit.Name, Status: "offline", Ephemeral: true})
		st.runners[run.ID] = run
		act.scaleSet[run.ID] = rt.id
		svc := serviceURL(r, rt.scope)
		cfg, _ := json.Marshal(map[string]any{
			"agentId": run.ID, "agentName": run.Name, "poolId": 0, "runnerScaleSetId": rt.id,
			"serverUrl": svc, "workFolder": jit.WorkFolder, "ephemeral": true,
		})
		body, _ := json.Marshal(map[string]any{
			"runner":           s.agentLocked(run),
			"encodedJITConfig": base64.StdEncoding.EncodeToString(cfg),
		})
		return reply{status: http.StatusOK, body: body, header: http.Header{}}
	case EndpointAgentList:
		name := r.URL.Query().Get("agentName")
		out := struct {
			Count int         `json:"count"`
			Value []agentJSON `json:"value"`
		}{Value: []agentJSON{}}
		for _, run := range s.sortedLocked(rt.scope) {
			if name == "" || run.Name == name {
				out.Value = append(out.Value, s.agentLocked(run))
			}
		}
		out.Count = len(out.Value)
		body, _ := json.Marshal(out)
		return reply{status: http.StatusOK, body: body, header: http.Header{}}
	case EndpointAgentGet:
		run, ok := st.runners[rt.id]
		if !ok {
			return actionsError(http.StatusNotFound, ExceptionAgentNotFound,
				fmt.Sprintf("No agent found in pool 0 which has an identifier of %d.", rt.id))
		}
		body, _ := json.Marshal(s.agentLocked(run))
		return reply{status: http.StatusOK, body: body, header: http.Header{}}
	}
	// EndpointAgentDelete.
	run, ok := st.runners[rt.id]
	switch {
	case !ok && act.removeMissingAsDone:
		return reply{status: http.StatusNoContent, header: http.Header{}}
	case !ok:
		return actionsError(http.StatusNotFound, ExceptionAgentNotFound,
			fmt.Sprintf("No agent found in pool 0 which has an identifier of %d.", rt.id))
	case run.Busy:
		return actionsError(http.StatusBadRequest, ExceptionJobStillRunning,
			fmt.Sprintf("The agent %s is currently running a job and cannot be deleted.", run.Name))
	}
	delete(st.runners, rt.id)
	delete(act.scaleSet, rt.id)
	return reply{status: http.StatusNoContent, header: http.Header{}}
}
