package ghsim

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAuth checks which credentials are accepted and that refusals are
// GitHub's 401 "Bad credentials".
func TestAuth(t *testing.T) {
	tests := []struct {
		name   string
		token  string // Options.Token
		header string // Authorization
		want   int
	}{
		{"no header", testToken, "", 401},
		{"wrong token", testToken, "token nope", 401},
		{"token scheme", testToken, "token " + testToken, 200},
		{"Bearer scheme", testToken, "Bearer " + testToken, 200},
		{"bearer lower case", testToken, "bearer " + testToken, 200},
		{"Basic is not a token", testToken, "Basic " + testToken, 401},
		{"any token when none configured", "", "token whatever", 200},
		{"no token when none configured", "", "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := startSim(t, Options{Token: tt.token})
			addRunners(s, "org:acme", "r", 1)
			hdr := map[string]string{}
			if tt.header != "" {
				hdr["Authorization"] = tt.header
			}
			resp, body := do(t, http.MethodGet, base, "/orgs/acme/actions/runners", "", hdr)
			assert.Equal(t, tt.want, resp.StatusCode)
			if tt.want == 401 {
				assert.Equal(t, "Bad credentials", decodeMap(t, body)["message"])
				assert.Equal(t, 5000, s.RateRemaining())
			}
			reqs := s.Requests()
			require.Len(t, reqs, 1, "every request is logged, refusals too")
			assert.Equal(t, tt.want, reqs[0].Status)
		})
	}
}

// TestScopesAndPaths checks scope existence, case-insensitive scopes and
// GitHub's 404s.
func TestScopesAndPaths(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	s.AddRunner("org:Acme", Runner{Name: "a"})
	s.AddScope("repo:acme/empty")

	tests := []struct {
		name, method, path string
		want               int
		total              int // for 200 lists
	}{
		{"scope added by a runner, other case", "GET", "/orgs/ACME/actions/runners", 200, 1},
		{"scope added empty", "GET", "/repos/acme/empty/actions/runners", 200, 0},
		{"scope never added", "GET", "/orgs/nobody/actions/runners", 404, 0},
		{"get in unknown scope", "GET", "/orgs/nobody/actions/runners/1", 404, 0},
		{"delete in unknown scope", "DELETE", "/orgs/nobody/actions/runners/1", 404, 0},
		{"runner id not a number", "GET", "/orgs/acme/actions/runners/abc", 404, 0},
		{"unknown path", "GET", "/orgs/acme/actions/secrets", 404, 0},
		{"unknown method", "POST", "/orgs/acme/actions/runners", 404, 0},
		{"runner of another scope", "GET", "/repos/acme/empty/actions/runners/1", 404, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, tt.method, base, tt.path, testToken, nil)
			assert.Equal(t, tt.want, resp.StatusCode, "%s", body)
			m := decodeMap(t, body)
			if tt.want == 404 {
				assert.Equal(t, "Not Found", m["message"])
				return
			}
			assert.EqualValues(t, tt.total, m["total_count"])
			assert.NotNil(t, m["runners"])
		})
	}
}

// TestState checks the state API: ID assignment, defaults, label IDs,
// copies, SetRunner and RemoveRunner.
func TestState(t *testing.T) {
	s := New(Options{})
	a := s.AddRunner("org:acme", Runner{Name: "a", Labels: []Label{{Name: "self-hosted", Type: "read-only"}, {Name: "gpu"}}})
	b := s.AddRunner("repo:acme/web", Runner{Name: "b", Labels: []Label{{Name: "gpu"}}})
	c := s.AddRunner("org:acme", Runner{ID: 100, Name: "c"})
	d := s.AddRunner("org:acme", Runner{})
	assert.Equal(t, []int64{1, 2, 100, 101}, []int64{a.ID, b.ID, c.ID, d.ID}, "unique across the sim, increasing")
	assert.Equal(t, Runner{ID: 101, Name: "runner-101", OS: "linux", Status: "online", Version: DefaultRunnerVersion}, d)
	assert.Equal(t, "custom", a.Labels[1].Type)
	assert.Equal(t, a.Labels[1].ID, b.Labels[0].ID, "a label name has one ID")
	assert.NotEqual(t, a.Labels[0].ID, a.Labels[1].ID)
	assert.Equal(t, Runner{}, s.AddRunner("nonsense", Runner{Name: "x"}))

	got := s.Runners("ORG:acme")
	require.Len(t, got, 3)
	assert.Equal(t, []int64{1, 100, 101}, []int64{got[0].ID, got[1].ID, got[2].ID})
	got[0].Labels[0].Name = "mutated"
	assert.Equal(t, "self-hosted", s.Runners("org:acme")[0].Labels[0].Name, "Runners returns copies")

	assert.True(t, s.SetRunner("org:acme", 1, func(r *Runner) { r.Busy = true; r.ID = 7 }))
	assert.True(t, s.Runners("org:acme")[0].Busy)
	assert.Equal(t, int64(1), s.Runners("org:acme")[0].ID, "the ID cannot change")
	assert.False(t, s.SetRunner("org:acme", 2, func(*Runner) {}), "runner 2 is in another scope")
	assert.False(t, s.SetRunner("org:nobody", 1, func(*Runner) {}))

	assert.True(t, s.RemoveRunner("org:acme", 100))
	assert.False(t, s.RemoveRunner("org:acme", 100))
	assert.Len(t, s.Runners("org:acme"), 2)
	assert.Nil(t, s.Runners("org:nobody"))
}

// TestRequestLog checks what the log records and that ResetRequests empties
// it.
func TestRequestLog(t *testing.T) {
	clock := newFakeClock()
	s, base := startSim(t, Options{Token: testToken, Now: clock.Now})
	rs := addRunners(s, "repo:acme/web", "r", 1)
	do(t, http.MethodGet, base, "/repos/acme/web/actions/runners?per_page=5&name=r-1", testToken, map[string]string{"If-None-Match": `"x"`})
	do(t, http.MethodDelete, base, "/repos/acme/web/actions/runners/"+itoa(rs[0].ID), testToken, nil)

	assert.Equal(t, []Request{
		{Method: "GET", Path: "/repos/acme/web/actions/runners", Query: "per_page=5&name=r-1", Status: 200,
			Scope: "repo:acme/web", Endpoint: EndpointList, IfNoneMatch: `"x"`, At: clock.Now()},
		{Method: "DELETE", Path: "/repos/acme/web/actions/runners/" + itoa(rs[0].ID), Status: 204,
			Scope: "repo:acme/web", Endpoint: EndpointDelete, At: clock.Now()},
	}, s.Requests())
	s.ResetRequests()
	assert.Empty(t, s.Requests())
}

// TestConcurrentUse runs clients against the sim while its state changes,
// for the race detector.
func TestConcurrentUse(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	rs := addRunners(s, "org:acme", "r", 20)
	c := ghClient(t, base, testToken)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				_, _, err := c.Actions.ListOrganizationRunners(context.Background(), "acme", &github.ListOptions{PerPage: 7, Page: j%3 + 1})
				assert.NoError(t, err)
				s.SetRunner("org:acme", rs[i].ID, func(r *Runner) { r.Busy = !r.Busy })
				_ = s.RateRemaining()
			}
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for j := 0; j < 20; j++ {
			s.Fault("org:acme", EndpointGet, Fault{Times: 1, Hang: time.Millisecond})
			_ = s.Requests()
		}
		s.ClearFaults()
	}()
	wg.Wait()
	assert.Len(t, s.Requests(), 80)
}
