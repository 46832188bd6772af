package ghclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/redact"
)

// maxRedirects is how many same-origin redirects a request may follow, as
// many as net/http's own default allows.
const maxRedirects = 10

// ErrOffOrigin marks a request refused because it would have gone to a
// scheme, host or port other than the configured API base's. Both the
// token and the App transports set Authorization on every hop, redirects
// included, so without this refusal a 301 or 307 to another host would hand
// it the credential, and its answer would be read as GitHub's.
var ErrOffOrigin = errors.New("refused to leave the configured GitHub API origin")

// OffOriginError is the refusal, naming the origin that was refused and
// never its path, query or user information.
type OffOriginError struct {
	// Origin is scheme://host:port of the refused destination.
	Origin string
	// Redirect tells a refused redirect from a request that was built for
	// another origin.
	Redirect bool
}

func (e *OffOriginError) Error() string {
	what := "request to"
	if e.Redirect {
		what = "redirect to"
	}
	return fmt.Sprintf("%s: %s %s", ErrOffOrigin, what, e.Origin)
}

func (e *OffOriginError) Unwrap() error { return ErrOffOrigin }

// origin is what two URLs must share for a credential to travel between
// them.
type origin struct{ scheme, host, port string }

func originOf(u *url.URL) origin {
	o := origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: u.Port()}
	if o.port == "" {
		switch o.scheme {
		case "http":
			o.port = "80"
		case "https":
			o.port = "443"
		}
	}
	return o
}

func (o origin) String() string {
	host := o.host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return o.scheme + "://" + host + ":" + o.port
}

// checkRedirect is the http.Client's redirect policy: a redirect within the
// configured origin is followed, up to maxRedirects; one anywhere else is
// refused, which makes the request fail.
func (o origin) checkRedirect(req *http.Request, via []*http.Request) error {
	if to := originOf(req.URL); to != o {
		return &OffOriginError{Origin: to.String(), Redirect: true}
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// guard is the transport right beneath the credential layers (the token's,
// and the App's for both its API requests and its token exchanges). It is
// the last word on where a credential may go, whatever path a request took
// to get there: a request for another origin is never sent. It also
// records every Authorization value it lets through (the token, an App's
// JWT and installation tokens), so that the process can redact them from
// anything it says.
type guard struct {
	base    http.RoundTripper
	origin  origin
	secrets *redact.Set
}

func (g *guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if to := originOf(req.URL); to != g.origin {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, &OffOriginError{Origin: to.String()}
	}
	if auth := req.Header.Get("Authorization"); auth != "" {
		g.secrets.AddAuthorization(auth)
	}
	return g.base.RoundTrip(req)
}

// offOrigin replaces an error that carries a refusal with the bare
// refusal: net/http wraps it in a *url.Error that quotes the refused URL
// whole, query and all, and the refusal alone says what happened.
func offOrigin(err error) error {
	var refused *OffOriginError
	if errors.As(err, &refused) {
		return refused
	}
	return err
}

// WebHost is the host an ARC githubConfigUrl names for the GitHub whose
// REST API is at apiURL: github.com for api.github.com, NAME.ghe.com for
// api.NAME.ghe.com, and the server's own host for GHES (its API is under
// /api/v3 on the same host). "" when apiURL cannot be read.
func WebHost(apiURL string) string {
	u, err := url.Parse(apiURL)
	if err != nil || u.Host == "" {
		return ""
	}
	host := fleet.WebHost(u.Scheme, u.Host)
	if host == "api.github.com" || (strings.HasPrefix(host, "api.") && strings.HasSuffix(host, ".ghe.com")) {
		return strings.TrimPrefix(host, "api.")
	}
	return host
}
