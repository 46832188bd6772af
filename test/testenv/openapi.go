package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// GitHubAPIDescription is GitHub's own REST API description as the npm
// package @octokit/openapi publishes it (generated from
// github/rest-api-description), at the version tools/openapi's lockfile
// pins. The GHEC variant is used because it is the one that also describes
// the enterprise runner endpoints.
func GitHubAPIDescription(root string) string {
	return filepath.Join(root, "tools", "openapi", "node_modules", "@octokit", "openapi", "generated", "ghec.json")
}

// GitHubAPI checks HTTP exchanges against GitHub's published description.
type GitHubAPI struct {
	Doc    *openapi3.T
	router routers.Router
}

// LoadGitHubAPI reads the pinned description. It fails the test, never
// skips it, when the package is missing: `make test` installs it. In -short
// mode (`make unit`, which needs no installed assets) it skips the test.
func LoadGitHubAPI(t testing.TB) *GitHubAPI {
	t.Helper()
	if testing.Short() {
		t.Skip("needs GitHub's API description (tools/openapi); `make test` runs it")
	}
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("load GitHub's API description: %v", err)
	}
	path := GitHubAPIDescription(root)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("load GitHub's API description (run `make openapi`): %v", err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("parse GitHub's API description %s: %v", path, err)
	}
	// The description names api.github.com as its server; the simulator
	// serves at the root of a loopback address, so routes are matched on
	// the path alone.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("route GitHub's API description: %v", err)
	}
	return &GitHubAPI{Doc: doc, router: router}
}

// Exchange is one request and its response as a contract check saw them.
type Exchange struct {
	Operation string
	Method    string
	Path      string
	Status    int
	// Problems are the ways the request or the response departs from the
	// description; empty when both conform.
	Problems []string
}

// ContractRecorder is an http.Handler in front of another that checks
// every request and response against the description and records them.
type ContractRecorder struct {
	api  *GitHubAPI
	next http.Handler
	mu   sync.Mutex
	seen []Exchange
}

// Recorder wraps next so that every exchange through it is checked.
func (a *GitHubAPI) Recorder(next http.Handler) *ContractRecorder {
	return &ContractRecorder{api: a, next: next}
}

// Exchanges returns what has been checked so far.
func (c *ContractRecorder) Exchanges() []Exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Exchange(nil), c.seen...)
}

// Operations lists the operation ids exercised, sorted.
func (c *ContractRecorder) Operations() []string {
	set := map[string]bool{}
	for _, e := range c.Exchanges() {
		set[e.Operation] = true
	}
	out := make([]string, 0, len(set))
	for op := range set {
		out = append(out, op)
	}
	sort.Strings(out)
	return out
}

func (c *ContractRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ex := Exchange{Method: r.Method, Path: r.URL.Path}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read request body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	route, params, err := c.api.router.FindRoute(r)
	var in *openapi3filter.RequestValidationInput
	if err != nil {
		ex.Problems = append(ex.Problems, fmt.Sprintf("no operation in GitHub's description for %s %s: %v", r.Method, r.URL.Path, err))
	} else {
		ex.Operation = route.Operation.OperationID
		// Each check reads its own copy of the request, so the
		// handler behind gets the body untouched.
		check := r.Clone(context.Background())
		check.Body = io.NopCloser(bytes.NewReader(body))
		in = &openapi3filter.RequestValidationInput{
			Request: check, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
		}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			ex.Problems = append(ex.Problems, fmt.Sprintf("request %s %s: %v", r.Method, r.URL.RequestURI(), err))
		}
	}

	rec := &captured{header: http.Header{}}
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.next.ServeHTTP(rec, r)
	ex.Status = rec.status()
	if in != nil {
		out := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: ex.Status, Header: rec.header,
			Body:    io.NopCloser(bytes.NewReader(rec.body.Bytes())),
			Options: &openapi3filter.Options{MultiError: true},
		}
		if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
			ex.Problems = append(ex.Problems, fmt.Sprintf("response %d to %s %s: %v", ex.Status, r.Method, r.URL.RequestURI(), err))
		}
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.WriteHeader(ex.Status)
	_, _ = w.Write(rec.body.Bytes())

	c.mu.Lock()
	c.seen = append(c.seen, ex)
	c.mu.Unlock()
}

// captured holds a response until it has been checked.
type captured struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (c *captured) Header() http.Header { return c.header }
func (c *captured) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *captured) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	return c.body.Write(b)
}
func (c *captured) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}
