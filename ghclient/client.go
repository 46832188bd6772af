// Package ghclient is runner-reaper's GitHub side: one paginated,
// conditional runner list per scope and runner deletes whose status codes
// mean what the act protocol needs. It is built on go-github v60 and, for
// GitHub App auth, ghinstallation; every request that reaches the wire,
// token exchanges included, is counted, because requests per sweep is the
// reaper's first performance figure.
package ghclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v60/github"

	"github.com/runner-reaper/runner-reaper/internal/httpcount"
	"github.com/runner-reaper/runner-reaper/internal/redact"
)

// DefaultBaseURL is github.com's REST API.
const DefaultBaseURL = "https://api.github.com/"

// DefaultTimeout bounds one HTTP request when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Config says where the API is and how to authenticate. Exactly one of Token
// or the App triple (AppID, InstallationID, PrivateKey) must be set.
type Config struct {
	// BaseURL is the API base: DefaultBaseURL when empty, a GHES API URL
	// (https://HOST/api/v3/) or a test server. It is used as given, with a
	// trailing slash added, so that a simulator serving at its root works.
	BaseURL string
	// Token is a personal access token (the only credential GitHub accepts
	// for enterprise scopes).
	Token string
	// AppID, InstallationID and PrivateKey (PEM) authenticate as a GitHub
	// App installation.
	AppID          int64
	InstallationID int64
	PrivateKey     []byte
	// Timeout bounds each HTTP request, including an App token exchange
	// that happens on its behalf; DefaultTimeout when zero.
	Timeout time.Duration
	// Transport is the base transport; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Secrets, when set, learns every credential the client sends (the
	// token, an App's JWTs and installation tokens), so that the process
	// can redact them from what it logs and answers.
	Secrets *redact.Set
	// OwnerLabel is the one runner label the reaper reads: the label that
	// says a registration is this deployment's (REAPER_GHOST_LABEL). A
	// runner's other labels are dropped as its page is read, so that the
	// registrations a sweep holds, and the list cache the ledger keeps,
	// carry no label but that one (matched as GitHub matches labels,
	// ignoring case); "" keeps none.
	OwnerLabel string
}

// Client talks to one GitHub API with one credential. It keeps nothing
// between calls except go-github's memory of rate limits (so that it does
// not send requests it knows will be refused) and an App's installation
// token. It is safe for concurrent use.
type Client struct {
	gh         *github.Client
	counter    *httpcount.Transport
	ownerLabel string
}

// New checks cfg and builds a Client. Errors never quote the credentials.
func New(cfg Config) (*Client, error) {
	base, err := parseBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	counter := &httpcount.Transport{Base: cfg.Transport}
	gh, err := githubClient(cfg, base, counter, timeout)
	if err != nil {
		return nil, err
	}
	gh.BaseURL = base
	gh.UploadURL = base
	return &Client{gh: gh, counter: counter, ownerLabel: cfg.OwnerLabel}, nil
}

// Counts reports every request that reached the wire through this client,
// App token exchanges included, and how many of them were answered 304.
func (c *Client) Counts() httpcount.Counts { return c.counter.Snapshot() }

// parseBaseURL accepts an absolute http(s) URL without credentials and
// gives it the trailing slash go-github requires. Parse errors leave the
// URL out of the message in case someone put a secret in it.
func parseBaseURL(raw string) (*url.URL, error) {
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("parse GitHub base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("GitHub base URL must be an absolute http or https URL")
	}
	if u.User != nil {
		return nil, errors.New("GitHub base URL must not carry credentials; use Token or the App settings")
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// githubClient puts the credential above the origin guard, GitHub's
// recommended headers and the counting transport, so that an App's token exchanges are guarded and counted like
// any other request, and bounds each request with the timeout. A token is
// set with go-github's WithAuthToken, which keeps the http.Client's timeout
// and redirect policy. The policy refuses a redirect off the base's origin
// before it is followed; the guard refuses to send anything that got past
// it (ghinstallation's exchanges run on a client of their own).
func githubClient(cfg Config, base *url.URL, counter *httpcount.Transport, timeout time.Duration) (*github.Client, error) {
	home := originOf(base)
	guarded := &guard{base: &apiHeaders{base: localTimes{base: counter}}, origin: home, secrets: cfg.Secrets}
	httpClient := func(rt http.RoundTripper) *http.Client {
		return &http.Client{Transport: rt, Timeout: timeout, CheckRedirect: home.checkRedirect}
	}
	app := cfg.AppID != 0 || cfg.InstallationID != 0 || len(cfg.PrivateKey) > 0
	switch {
	case cfg.Token != "" && app:
		return nil, errors.New("GitHub credentials: set either a token or GitHub App settings, not both")
	case cfg.Token != "":
		return github.NewClient(httpClient(guarded)).WithAuthToken(cfg.Token), nil
	case !app:
		return nil, errors.New("GitHub credentials: neither a token nor GitHub App settings are set")
	case cfg.AppID <= 0 || cfg.InstallationID <= 0 || len(cfg.PrivateKey) == 0:
		return nil, errors.New("GitHub App credentials need an app ID, an installation ID and a private key")
	}
	itr, err := ghinstallation.New(guarded, cfg.AppID, cfg.InstallationID, cfg.PrivateKey)
	if err != nil {
		// ghinstallation describes the parse failure, never the key.
		return nil, fmt.Errorf("GitHub App %d: %w", cfg.AppID, err)
	}
	// ghinstallation wants the API base without the trailing slash; with
	// it set, GHES and test servers get the token exchanges too. The
	// exchange runs inside the API request it authorizes, under that
	// request's deadline.
	itr.BaseURL = strings.TrimSuffix(base.String(), "/")
	// Without options ghinstallation sends the body "null", which GitHub's
	// description of the exchange does not allow; an empty object asks for
	// the same token (all of the installation's permissions) in the
	// documented form.
	itr.InstallationTokenOptions = &github.InstallationTokenOptions{}
	return github.NewClient(httpClient(itr)), nil
}
