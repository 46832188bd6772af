package ghsim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listPage is one list answer, decoded.
type listPage struct {
	status  int
	total   int
	runners int
	header  http.Header
	body    map[string]any
}

func getList(t *testing.T, base, scopePath, query string) listPage {
	t.Helper()
	path := scopePath + "/actions/runners"
	if query != "" {
		path += "?" + query
	}
	resp, body := do(t, http.MethodGet, base, path, testToken, nil)
	p := listPage{status: resp.StatusCode, header: resp.Header, body: decodeMap(t, body)}
	if resp.StatusCode == http.StatusOK {
		var l struct {
			TotalCount int               `json:"total_count"`
			Runners    []json.RawMessage `json:"runners"`
		}
		require.NoError(t, json.Unmarshal(body, &l))
		require.NotNil(t, l.Runners, "runners is [] never null")
		p.total, p.runners = l.TotalCount, len(l.Runners)
	}
	return p
}

// TestFaults arms each kind of fault and checks what a client sees, that a
// faulted error answer spends no budget, and that faults stay on their
// scope, endpoint, page and number of times.
func TestFaults(t *testing.T) {
	const org = "/orgs/acme"
	tests := []struct {
		name     string
		scope    string
		endpoint string
		fault    Fault
		check    func(t *testing.T, s *Sim, base string, rs []Runner)
	}{
		{
			name: "status 500 on list", scope: "org:acme", endpoint: EndpointList, fault: Fault{Status: 500},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				p := getList(t, base, org, "")
				assert.Equal(t, 500, p.status)
				assert.Equal(t, "Internal Server Error", p.body["message"])
				assert.NotEmpty(t, p.header.Get("X-RateLimit-Remaining"))
				assert.Equal(t, 5000, s.RateRemaining(), "a faulted answer spends nothing")
			},
		},
		{
			name: "status 502 on get only", scope: "org:acme", endpoint: EndpointGet, fault: Fault{Status: 502},
			check: func(t *testing.T, s *Sim, base string, rs []Runner) {
				resp, body := do(t, http.MethodGet, base, org+"/actions/runners/"+itoa(rs[0].ID), testToken, nil)
				assert.Equal(t, 502, resp.StatusCode)
				assert.Equal(t, "Bad Gateway", decodeMap(t, body)["message"])
				assert.Equal(t, 200, getList(t, base, org, "").status, "the list is not faulted")
				resp, _ = do(t, http.MethodDelete, base, org+"/actions/runners/"+itoa(rs[0].ID), testToken, nil)
				assert.Equal(t, 204, resp.StatusCode, "delete is not faulted")
			},
		},
		{
			name: "status on delete leaves the runner", scope: "org:acme", endpoint: EndpointDelete, fault: Fault{Status: 503},
			check: func(t *testing.T, s *Sim, base string, rs []Runner) {
				resp, _ := do(t, http.MethodDelete, base, org+"/actions/runners/"+itoa(rs[0].ID), testToken, nil)
				assert.Equal(t, 503, resp.StatusCode)
				assert.Len(t, s.Runners("org:acme"), 5)
			},
		},
		{
			name: "other scope unaffected", scope: "org:other", endpoint: EndpointList, fault: Fault{Status: 500},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				assert.Equal(t, 200, getList(t, base, org, "").status)
			},
		},
		{
			name: "any scope, any endpoint", scope: Any, endpoint: Any, fault: Fault{Status: 500},
			check: func(t *testing.T, s *Sim, base string, rs []Runner) {
				assert.Equal(t, 500, getList(t, base, org, "").status)
				resp, _ := do(t, http.MethodDelete, base, org+"/actions/runners/"+itoa(rs[0].ID), testToken, nil)
				assert.Equal(t, 500, resp.StatusCode)
			},
		},
		{
			name: "primary limit", scope: "org:acme", endpoint: EndpointList, fault: Fault{PrimaryLimit: true},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				p := getList(t, base, org, "")
				assert.Equal(t, 403, p.status)
				assert.Equal(t, "0", p.header.Get("X-RateLimit-Remaining"))
				reset, err := strconv.ParseInt(p.header.Get("X-RateLimit-Reset"), 10, 64)
				require.NoError(t, err)
				assert.True(t, time.Unix(reset, 0).After(time.Now()))
				assert.Contains(t, p.body["message"], "API rate limit exceeded")

				_, _, err = ghClient(t, base, testToken).Actions.ListOrganizationRunners(context.Background(), "acme", nil)
				var rle *github.RateLimitError
				require.True(t, errors.As(err, &rle), "got %T: %v", err, err)
				assert.Equal(t, 5000, s.RateRemaining(), "the real budget is untouched")
			},
		},
		{
			name: "secondary 403", scope: "org:acme", endpoint: EndpointList, fault: Fault{Secondary: 403},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				p := getList(t, base, org, "")
				assert.Equal(t, 403, p.status)
				assert.Equal(t, "60", p.header.Get("Retry-After"))
				assert.Contains(t, p.body["message"], "secondary rate limit")
				assert.NotEqual(t, "0", p.header.Get("X-RateLimit-Remaining"))

				_, _, err := ghClient(t, base, testToken).Actions.ListOrganizationRunners(context.Background(), "acme", nil)
				var arle *github.AbuseRateLimitError
				require.True(t, errors.As(err, &arle), "got %T: %v", err, err)
				require.NotNil(t, arle.RetryAfter)
				assert.Equal(t, time.Minute, *arle.RetryAfter)
			},
		},
		{
			name: "secondary 429", scope: "org:acme", endpoint: EndpointList, fault: Fault{Secondary: 429},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				p := getList(t, base, org, "")
				assert.Equal(t, 429, p.status)
				assert.Equal(t, "60", p.header.Get("Retry-After"))
				assert.Contains(t, p.body["message"], "secondary rate limit")
			},
		},
		{
			name: "drop items from each page", scope: "org:acme", endpoint: EndpointList, fault: Fault{DropItems: 1},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				for page, want := range map[int]int{1: 1, 2: 1, 3: 0} {
					p := getList(t, base, org, "per_page=2&page="+strconv.Itoa(page))
					assert.Equal(t, 200, p.status)
					assert.Equal(t, 5, p.total, "total_count unchanged")
					assert.Equal(t, want, p.runners, "page %d", page)
				}
			},
		},
		{
			name: "empty list while runners exist", scope: "org:acme", endpoint: EndpointList, fault: Fault{EmptyList: true},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				p := getList(t, base, org, "per_page=2")
				assert.Equal(t, 200, p.status)
				assert.Equal(t, 0, p.total)
				assert.Equal(t, 0, p.runners)
				assert.Empty(t, p.header.Get("Link"))
				assert.Len(t, s.Runners("org:acme"), 5)
			},
		},
		{
			name: "only page 2", scope: "org:acme", endpoint: EndpointList, fault: Fault{Status: 500, Page: 2},
			check: func(t *testing.T, s *Sim, base string, rs []Runner) {
				assert.Equal(t, 200, getList(t, base, org, "per_page=2").status)
				assert.Equal(t, 500, getList(t, base, org, "per_page=2&page=2").status)
				assert.Equal(t, 500, getList(t, base, org, "per_page=2&page=2").status, "Times 0: every time")
				assert.Equal(t, 200, getList(t, base, org, "per_page=2&page=3").status)
				resp, _ := do(t, http.MethodGet, base, org+"/actions/runners/"+itoa(rs[0].ID), testToken, nil)
				assert.Equal(t, 200, resp.StatusCode)
			},
		},
		{
			name: "times 2", scope: "org:acme", endpoint: EndpointList, fault: Fault{Status: 502, Times: 2},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				assert.Equal(t, 502, getList(t, base, org, "").status)
				assert.Equal(t, 502, getList(t, base, org, "").status)
				assert.Equal(t, 200, getList(t, base, org, "").status)
			},
		},
		{
			name: "page 3 once, dropping items", scope: "org:acme", endpoint: EndpointList, fault: Fault{DropItems: 5, Page: 3, Times: 1},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				assert.Equal(t, 2, getList(t, base, org, "per_page=2&page=2").runners, "another page does not use it up")
				assert.Equal(t, 0, getList(t, base, org, "per_page=2&page=3").runners)
				assert.Equal(t, 1, getList(t, base, org, "per_page=2&page=3").runners)
			},
		},
		{
			name: "hang past the client's timeout", scope: "org:acme", endpoint: EndpointList, fault: Fault{Hang: 5 * time.Second},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				client := &http.Client{Timeout: 100 * time.Millisecond}
				req, err := http.NewRequest(http.MethodGet, base+"orgs/acme/actions/runners", nil)
				require.NoError(t, err)
				req.Header.Set("Authorization", "Bearer "+testToken)
				start := time.Now()
				_, err = client.Do(req)
				require.Error(t, err)
				assert.Less(t, time.Since(start), 2*time.Second)
				// The sim notices the client left and logs the answer.
				require.Eventually(t, func() bool {
					r := s.Requests()
					return len(r) == 1 && r[0].Status == 200
				}, 3*time.Second, 10*time.Millisecond)
			},
		},
		{
			name: "short hang then a normal answer", scope: "org:acme", endpoint: EndpointList, fault: Fault{Hang: 150 * time.Millisecond},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				start := time.Now()
				p := getList(t, base, org, "")
				assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
				assert.Equal(t, 200, p.status)
				assert.Equal(t, 5, p.runners)
			},
		},
		{
			name: "hang then status", scope: "org:acme", endpoint: EndpointList, fault: Fault{Hang: 50 * time.Millisecond, Status: 504},
			check: func(t *testing.T, s *Sim, base string, _ []Runner) {
				start := time.Now()
				assert.Equal(t, 504, getList(t, base, org, "").status)
				assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, base := startSim(t, Options{Token: testToken})
			rs := addRunners(s, "org:acme", "r", 5)
			s.AddScope("org:other")
			s.Fault(tt.scope, tt.endpoint, tt.fault)
			tt.check(t, s, base, rs)
		})
	}
}

// TestClearFaults disarms faults, and the log records faulted answers.
func TestClearFaults(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	addRunners(s, "org:acme", "r", 2)
	s.Fault("ORG:Acme", EndpointList, Fault{Status: 500})
	assert.Equal(t, 500, getList(t, base, "/orgs/acme", "").status)
	s.ClearFaults()
	assert.Equal(t, 200, getList(t, base, "/orgs/acme", "").status)

	reqs := s.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, []int{500, 200}, []int{reqs[0].Status, reqs[1].Status})
	assert.Equal(t, "org:acme", reqs[0].Scope)
	assert.Equal(t, EndpointList, reqs[0].Endpoint)
}

// TestCloseEndsHangs proves Close does not wait out a hanging fault.
func TestCloseEndsHangs(t *testing.T) {
	s := New(Options{})
	base, err := s.Start()
	require.NoError(t, err)
	addRunners(s, "org:acme", "r", 1)
	s.Fault(Any, Any, Fault{Hang: time.Minute})
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(base + "orgs/acme/actions/runners")
		if err == nil {
			resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return len(s.Requests()) == 1 }, 2*time.Second, 5*time.Millisecond)
	start := time.Now()
	s.Close()
	assert.Less(t, time.Since(start), 5*time.Second)
	<-done
	s.Close() // idempotent
	_, err = s.Start()
	assert.Error(t, err, "a closed sim does not start again")
}
