package ghsim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// TestContractFixtureBody proves that a scope holding the fixture's runners
// serves GitHub's own response example, byte for byte once compacted and
// structurally, on each of the three list paths, and that go-github decodes
// the sim's answer exactly as it decodes the fixture.
func TestContractFixtureBody(t *testing.T) {
	fixture, err := os.ReadFile(testenv.Fixture(t, "github", "runner-paginated.json"))
	require.NoError(t, err)
	var compact bytes.Buffer
	require.NoError(t, json.Compact(&compact, fixture))

	var fromFixture github.Runners
	require.NoError(t, json.Unmarshal(fixture, &fromFixture))

	tests := []struct {
		scope, path string
	}{
		{"org:acme", "/orgs/acme/actions/runners"},
		{"repo:acme/web", "/repos/acme/web/actions/runners"},
		{"enterprise:big", "/enterprises/big/actions/runners"},
	}
	for _, tt := range tests {
		t.Run(tt.scope, func(t *testing.T) {
			s, base := startSim(t, Options{Token: testToken})
			for _, r := range fixtureRunners() {
				s.AddRunner(tt.scope, r)
			}
			resp, body := do(t, http.MethodGet, base, tt.path, testToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

			assert.Equal(t, decodeMap(t, compact.Bytes()), decodeMap(t, body))
			assert.Equal(t, compact.String(), string(body), "same bytes as the compacted fixture")
			assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))

			var fromSim github.Runners
			require.NoError(t, json.Unmarshal(body, &fromSim))
			assert.Equal(t, fromFixture, fromSim)
		})
	}
}

var (
	etagRE = regexp.MustCompile(`^(W/)?"[0-9a-f]{64}"$`)
	linkRE = regexp.MustCompile(`^<(http://[^>]+)>; rel="(prev|next|last|first)"$`)
)

// TestContractHeaders checks, header by header, what GitHub sends with a
// list page: Link (GitHub's order prev, next, last, first; none on a single
// page; no next on the last), ETag, Cache-Control and the rate-limit set.
func TestContractHeaders(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	addRunners(s, "org:acme", "r", 5)
	host := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/")
	u := func(q string) string { return "http://" + host + "/orgs/acme/actions/runners?" + q }

	tests := []struct {
		name  string
		query string
		count int
		links []string // "rel url"
	}{
		{"single page has no Link", "", 5, nil},
		{"first page", "per_page=2", 2, []string{
			"next " + u("per_page=2&page=2"),
			"last " + u("per_page=2&page=3"),
		}},
		{"middle page", "per_page=2&page=2", 2, []string{
			"prev " + u("per_page=2&page=1"),
			"next " + u("per_page=2&page=3"),
			"last " + u("per_page=2&page=3"),
			"first " + u("per_page=2&page=1"),
		}},
		{"last page has no next", "per_page=2&page=3", 1, []string{
			"prev " + u("per_page=2&page=2"),
			"first " + u("per_page=2&page=1"),
		}},
		{"name filters by exact name", "per_page=1&name=r-3", 1, nil},
		{"other parameters carry over, page appended", "per_page=2&foo=bar", 2, []string{
			"next " + u("per_page=2&foo=bar&page=2"),
			"last " + u("per_page=2&foo=bar&page=3"),
		}},
		{"per_page is clamped to 100", "per_page=500", 5, nil},
		{"page before per_page", "page=1&per_page=1", 1, []string{
			"next " + u("page=2&per_page=1"),
			"last " + u("page=5&per_page=1"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/orgs/acme/actions/runners"
			if tt.query != "" {
				path += "?" + tt.query
			}
			before := s.RateRemaining()
			resp, body := do(t, http.MethodGet, base, path, testToken, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var list struct {
				TotalCount int              `json:"total_count"`
				Runners    []map[string]any `json:"runners"`
			}
			require.NoError(t, json.Unmarshal(body, &list))
			assert.Len(t, list.Runners, tt.count)

			var links []string
			if h := resp.Header.Get("Link"); h != "" {
				for _, part := range strings.Split(h, ", ") {
					m := linkRE.FindStringSubmatch(part)
					require.NotNil(t, m, "malformed Link part %q", part)
					links = append(links, m[2]+" "+m[1])
				}
			}
			assert.Equal(t, tt.links, links)

			assert.Regexp(t, etagRE, resp.Header.Get("ETag"))
			assert.Equal(t, "private, max-age=60", resp.Header.Get("Cache-Control"))
			assert.Equal(t, "5000", resp.Header.Get("X-RateLimit-Limit"))
			assert.Equal(t, strconv.Itoa(before-1), resp.Header.Get("X-RateLimit-Remaining"))
			assert.Equal(t, strconv.Itoa(5000-before+1), resp.Header.Get("X-RateLimit-Used"))
			assert.Equal(t, "core", resp.Header.Get("X-RateLimit-Resource"))
			reset, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64)
			require.NoError(t, err)
			assert.WithinDuration(t, time.Now().Add(time.Hour), time.Unix(reset, 0), 5*time.Second)
		})
	}
}

// TestLinkFollowedByGoGitHub proves go-github parses the Link header into
// NextPage/LastPage/PrevPage/FirstPage.
func TestLinkFollowedByGoGitHub(t *testing.T) {
	s, base := startSim(t, Options{Token: testToken})
	addRunners(s, "org:acme", "r", 5)
	c := ghClient(t, base, testToken)
	_, resp, err := c.Actions.ListOrganizationRunners(context.Background(), "acme", &github.ListOptions{PerPage: 2, Page: 2})
	require.NoError(t, err)
	assert.Equal(t, 1, resp.PrevPage)
	assert.Equal(t, 3, resp.NextPage)
	assert.Equal(t, 3, resp.LastPage)
	assert.Equal(t, 1, resp.FirstPage)
}

// TestOpenAPIContractJobs checks the jobs endpoints against GitHub's
// published description, both sides of each exchange: a job queued, in
// progress and completed, by id and in a run's list (latest and all
// attempts, in pages), the 404s, and the rate-limit answers; and that
// go-github decodes them.
func TestOpenAPIContractJobs(t *testing.T) {
	api := testenv.LoadGitHubAPI(t)
	s := New(Options{Token: testToken})
	rec := api.Recorder(s.Handler())
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	base := srv.URL + "/"

	s.AddRunner("org:acme", Runner{Name: "rr-a", RunnerGroupID: 3, Labels: []Label{{Name: "self-hosted", Type: "read-only"}}})
	queued := s.QueueJob("acme/web", 42, "lint")
	done := s.StartJob("acme/web", 42, "build", "elsewhere")
	s.FinishJob(done.ID, "failure")
	_, ok := s.NewAttempt("acme/web", 42)
	require.True(t, ok)
	running := s.StartJob("acme/web", 42, "build", "rr-a")
	require.NotZero(t, running.ID)

	for _, path := range []string{
		fmt.Sprintf("/repos/acme/web/actions/jobs/%d", queued.ID),
		fmt.Sprintf("/repos/acme/web/actions/jobs/%d", done.ID),
		fmt.Sprintf("/repos/acme/web/actions/jobs/%d", running.ID),
		"/repos/acme/web/actions/jobs/999999",
		"/repos/acme/web/actions/runs/42/jobs",
		"/repos/acme/web/actions/runs/42/jobs?filter=latest",
		"/repos/acme/web/actions/runs/42/jobs?filter=all&per_page=2",
		"/repos/acme/web/actions/runs/42/jobs?filter=all&per_page=2&page=2",
		"/repos/acme/web/actions/runs/43/jobs",
	} {
		resp, body := do(t, http.MethodGet, base, path, testToken, nil)
		require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, resp.StatusCode, "%s: %s", path, body)
	}
	s.Fault("repo:acme/web", EndpointRunJobs, Fault{Secondary: 429, Times: 1})
	s.Fault("repo:acme/web", EndpointJob, Fault{PrimaryLimit: true, Times: 1})
	resp, _ := do(t, http.MethodGet, base, "/repos/acme/web/actions/runs/42/jobs", testToken, nil)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	resp, _ = do(t, http.MethodGet, base, fmt.Sprintf("/repos/acme/web/actions/jobs/%d", running.ID), testToken, nil)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	ctx := context.Background()
	c := ghClient(t, base, testToken)
	j, _, err := c.Actions.GetWorkflowJobByID(ctx, "acme", "web", running.ID)
	require.NoError(t, err)
	assert.Equal(t, "in_progress", j.GetStatus())
	assert.Equal(t, "rr-a", j.GetRunnerName())
	assert.Equal(t, int64(3), j.GetRunnerGroupID())
	assert.Equal(t, int64(2), j.GetRunAttempt())
	jobs, gresp, err := c.Actions.ListWorkflowJobs(ctx, "acme", "web", 42, &github.ListWorkflowJobsOptions{Filter: "all", ListOptions: github.ListOptions{PerPage: 2}})
	require.NoError(t, err)
	assert.Equal(t, 3, jobs.GetTotalCount())
	assert.Len(t, jobs.Jobs, 2)
	assert.Equal(t, 2, gresp.NextPage)

	var problems []string
	for _, e := range rec.Exchanges() {
		problems = append(problems, e.Problems...)
	}
	require.Empty(t, problems, "departures from GitHub's API description:\n%s", strings.Join(problems, "\n"))
	assert.Equal(t, []string{"actions/get-job-for-workflow-run", "actions/list-jobs-for-workflow-run"}, rec.Operations())
}

// TestContractJobKeys keeps the sim's job in the shape GitHub's
// description gives a job: every property it defines, none invented. (Its
// own example lacks created_at, which its schema requires, and
// run_attempt, so the schema is the reference.)
func TestContractJobKeys(t *testing.T) {
	api := testenv.LoadGitHubAPI(t)
	schema, ok := api.Doc.Components.Schemas["job"]
	require.True(t, ok, "the description has the job schema")
	var want []string
	for k := range schema.Value.Properties {
		want = append(want, k)
	}
	sort.Strings(want)
	for _, k := range schema.Value.Required {
		assert.Contains(t, want, k)
	}

	s, base := startSim(t, Options{Token: testToken})
	s.QueueJob("acme/web", 42, "lint")
	j := s.StartJob("acme/web", 42, "build", "rr-a")
	s.FinishJob(j.ID, "success")
	s.StartJob("acme/web", 42, "test", "rr-b")
	_, body := do(t, http.MethodGet, base, "/repos/acme/web/actions/runs/42/jobs", testToken, nil)
	jobs := decodeMap(t, body)["jobs"].([]any)
	require.Len(t, jobs, 3, "queued, completed and in progress")
	for _, item := range jobs {
		var got []string
		for k := range item.(map[string]any) {
			got = append(got, k)
		}
		sort.Strings(got)
		assert.Equal(t, want, got)
	}
}
