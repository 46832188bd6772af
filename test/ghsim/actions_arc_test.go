package ghsim

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ARC's Actions client (github.com/actions/actions-runner-controller/
// github/actions, v0.27.6) is not imported here: it would put ARC, and with
// it go-github v52, retryablehttp and ARC's module graph, into the
// product's go.mod. tools/arc, the module that builds ARC's manager, holds
// a small driver of that client instead (tools/arc/actionsclient); these
// tests build it and run scripts of client calls against the sim, so what
// is checked is the client ARC's controllers call, byte for byte.

var (
	arcClientOnce sync.Once
	arcClientDir  string
	arcClientPath string
	arcClientErr  error
)

// TestMain removes the driver built for the package's tests, if one was.
func TestMain(m *testing.M) {
	code := m.Run()
	if arcClientDir != "" {
		_ = os.RemoveAll(arcClientDir)
	}
	os.Exit(code)
}

// arcClient builds tools/arc/actionsclient once per test binary.
func arcClient(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds ARC's Actions client from tools/arc; `make test` runs it")
	}
	arcClientOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ghsim-arcclient-")
		if err != nil {
			arcClientErr = err
			return
		}
		arcClientDir = dir
		arcClientPath = filepath.Join(dir, "actionsclient")
		cmd := exec.Command("go", "build", "-o", arcClientPath, "./actionsclient")
		cmd.Dir = filepath.Join("..", "..", "tools", "arc")
		if out, err := cmd.CombinedOutput(); err != nil {
			arcClientErr = err
			arcClientPath = string(out)
		}
	})
	require.NoError(t, arcClientErr, "build tools/arc/actionsclient: %s", arcClientPath)
	return arcClientPath
}

type arcStep struct {
	Op         string `json:"op"`
	Name       string `json:"name,omitempty"`
	ID         int64  `json:"id,omitempty"`
	ScaleSetID int    `json:"scaleSetId,omitempty"`
}

type arcResult struct {
	Runner *struct {
		ID               int64  `json:"id"`
		Name             string `json:"name"`
		RunnerScaleSetID int64  `json:"runnerScaleSetId"`
	} `json:"runner"`
	JITConfig string `json:"jitConfig"`
	Error     *struct {
		Message       string `json:"message"`
		Actions       bool   `json:"actions"`
		StatusCode    int    `json:"statusCode"`
		ExceptionName string `json:"exceptionName"`
	} `json:"error"`
	ServiceURL string `json:"serviceURL"`
}

// runARC runs the steps through ARC's client with one client, as ARC's
// controllers share one per config URL and secret.
func runARC(t *testing.T, bin, configURL, token string, steps ...arcStep) []arcResult {
	t.Helper()
	zero := 0
	in, err := json.Marshal(map[string]any{"configURL": configURL, "token": token, "retryMax": &zero, "steps": steps})
	require.NoError(t, err)
	cmd := exec.Command(bin)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "actionsclient: %s", stderr.String())
	var res []arcResult
	require.NoError(t, json.Unmarshal(out, &res), string(out))
	require.Len(t, res, len(steps))
	return res
}

// TestARCClient runs ARC's own client through what its EphemeralRunner and
// EphemeralRunnerSet controllers do, against each kind of scope, and checks
// the answers as those controllers read them: the ids, and the status and
// exception names they match on.
func TestARCClient(t *testing.T) {
	bin := arcClient(t)
	for _, scope := range []string{"org:acme", "repo:acme/web", "enterprise:big"} {
		t.Run(scope, func(t *testing.T) {
			s, base := startSim(t, Options{Token: testToken})
			s.AddScope(scope)
			busy := s.AddRunner(scope, Runner{Name: "busy-one", Busy: true})
			cfg, err := ConfigURL(base, scope)
			require.NoError(t, err)
			res := runARC(t, bin, cfg, testToken,
				arcStep{Op: "generatejit", Name: "arc-r1", ScaleSetID: 3},
				arcStep{Op: "generatejit", Name: "arc-r1", ScaleSetID: 3},
				arcStep{Op: "getByName", Name: "arc-r1"},
				arcStep{Op: "getByName", Name: "nobody"},
				arcStep{Op: "get", ID: busy.ID},
				arcStep{Op: "remove", ID: busy.ID},
				arcStep{Op: "remove", ID: 9999},
				arcStep{Op: "get", ID: 9999},
			)
			kind, rest, _ := strings.Cut(scope, ":")
			wantSvc := strings.TrimSuffix(base, "/") + "/_actions/" + kind + "/" + rest + "/"
			for i, r := range res {
				assert.Equal(t, wantSvc, r.ServiceURL, "step %d", i)
			}
			// generatejitconfig registers the runner the REST API lists.
			require.Nil(t, res[0].Error)
			require.NotNil(t, res[0].Runner)
			id := res[0].Runner.ID
			assert.Equal(t, "arc-r1", res[0].Runner.Name)
			assert.EqualValues(t, 3, res[0].Runner.RunnerScaleSetID)
			assert.NotEmpty(t, res[0].JITConfig)
			r, ok := s.RunnerByName(scope, "arc-r1")
			require.True(t, ok)
			assert.Equal(t, id, r.ID)
			// The same name again: 409 AgentExistsException, on which ARC
			// looks the runner up by name.
			require.NotNil(t, res[1].Error)
			assert.True(t, res[1].Error.Actions)
			assert.Equal(t, 409, res[1].Error.StatusCode)
			assert.Contains(t, res[1].Error.ExceptionName, "AgentExistsException")
			require.NotNil(t, res[2].Runner)
			assert.Equal(t, id, res[2].Runner.ID)
			assert.Nil(t, res[3].Error)
			assert.Nil(t, res[3].Runner, "no runner of that name: nil, no error")
			require.Nil(t, res[4].Error)
			assert.Equal(t, "busy-one", res[4].Runner.Name, "a runner added through the REST side is an agent too")
			// Busy: 400 JobStillRunningException, on which ARC waits.
			require.NotNil(t, res[5].Error)
			assert.Equal(t, 400, res[5].Error.StatusCode)
			assert.Contains(t, res[5].Error.ExceptionName, "JobStillRunningException")
			// Missing: 404 AgentNotFoundException, for remove and get.
			for _, i := range []int{6, 7} {
				require.NotNil(t, res[i].Error, "step %d", i)
				assert.True(t, res[i].Error.Actions)
				assert.Equal(t, 404, res[i].Error.StatusCode)
				assert.Contains(t, res[i].Error.ExceptionName, "AgentNotFoundException")
			}

			// A second client: get and remove the registered runner by id;
			// then it is gone from the REST API too.
			res = runARC(t, bin, cfg, testToken,
				arcStep{Op: "get", ID: id},
				arcStep{Op: "remove", ID: id},
				arcStep{Op: "get", ID: id},
			)
			require.Nil(t, res[0].Error)
			assert.Equal(t, "arc-r1", res[0].Runner.Name)
			assert.Nil(t, res[1].Error)
			require.NotNil(t, res[2].Error)
			assert.Equal(t, 404, res[2].Error.StatusCode)
			_, ok = s.RunnerByName(scope, "arc-r1")
			assert.False(t, ok)

			// Each client traded one registration token for one admin
			// token, over GHES paths.
			assert.Equal(t, 2, s.RequestCount(EndpointRegistrationToken, 201))
			assert.Equal(t, 2, s.RequestCount(EndpointRunnerRegistration, 200))
			for _, q := range s.Requests() {
				if q.Endpoint == EndpointRegistrationToken || q.Endpoint == EndpointRunnerRegistration {
					assert.True(t, strings.HasPrefix(q.Path, "/api/v3/"), q.Path)
				}
			}

			// With the switch on, ARC's RemoveRunner of a missing runner
			// succeeds.
			s.SetRemoveMissingAgentAsDone(true)
			res = runARC(t, bin, cfg, testToken, arcStep{Op: "remove", ID: id})
			assert.Nil(t, res[0].Error)
		})
	}
}

// TestARCClientBadToken checks that ARC's client surfaces a refused PAT at
// the registration token, before any Actions service call.
func TestARCClientBadToken(t *testing.T) {
	bin := arcClient(t)
	s, base := startSim(t, Options{Token: testToken})
	s.AddScope("org:acme")
	cfg, _ := ConfigURL(base, "org:acme")
	res := runARC(t, bin, cfg, "ghp_wrong", arcStep{Op: "get", ID: 1})
	require.NotNil(t, res[0].Error)
	assert.False(t, res[0].Error.Actions)
	assert.Contains(t, res[0].Error.Message, "registration token")
	assert.Equal(t, 0, s.RequestCount(EndpointRunnerRegistration, 0))
	assert.Equal(t, 0, s.RequestCount(EndpointAgentGet, 0))
}
