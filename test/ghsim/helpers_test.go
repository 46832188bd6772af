package ghsim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"
	"github.com/stretchr/testify/require"
)

const testToken = "ghp_simtesttoken"

// startSim serves a fresh Sim on loopback for one test.
func startSim(t *testing.T, opts Options) (*Sim, string) {
	t.Helper()
	s := New(opts)
	base, err := s.Start()
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s, base
}

// ghClient is the real go-github client pointed at the sim, as the reaper
// builds it.
func ghClient(t *testing.T, base, token string) *github.Client {
	t.Helper()
	c := github.NewClient(nil).WithAuthToken(token)
	u, err := url.Parse(base)
	require.NoError(t, err)
	c.BaseURL = u
	return c
}

// do sends one raw request and returns the response with its body read.
func do(t *testing.T, method, base, path, token string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// decodeMap decodes a JSON object for structural comparison.
func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "body %s", b)
	return m
}

// fixtureRunners are the two runners of runner-paginated.json.
func fixtureRunners() []Runner {
	return []Runner{
		{ID: 23, Name: "linux_runner", OS: "linux", Status: "online", Busy: true, Version: "2.323.0", Labels: []Label{
			{ID: 5, Name: "self-hosted", Type: "read-only"},
			{ID: 7, Name: "X64", Type: "read-only"},
			{ID: 11, Name: "Linux", Type: "read-only"},
		}},
		{ID: 24, Name: "mac_runner", OS: "macos", Status: "offline", Busy: false, Version: "2.323.0", Labels: []Label{
			{ID: 5, Name: "self-hosted", Type: "read-only"},
			{ID: 7, Name: "X64", Type: "read-only"},
			{ID: 20, Name: "macOS", Type: "read-only"},
			{ID: 21, Name: "no-gpu", Type: "custom"},
		}},
	}
}

// addRunners adds n idle online runners named PREFIX-1.. to scope.
func addRunners(s *Sim, scope, prefix string, n int) []Runner {
	out := make([]Runner, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, s.AddRunner(scope, Runner{
			Name:   prefix + "-" + itoa(int64(i)),
			Labels: []Label{{Name: "self-hosted", Type: "read-only"}, {Name: "reaper"}},
		}))
	}
	return out
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Now().Truncate(time.Second)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
