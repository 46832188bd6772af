package ghclient

import "net/http"

// The media type and API version GitHub recommends for every REST request.
// go-github v60 asks for the older application/vnd.github.v3+json, and
// ghinstallation does for its token exchanges.
const (
	acceptJSON = "application/vnd.github+json"
	apiVersion = "2022-11-28"
)

// apiHeaders sets GitHub's recommended Accept and X-GitHub-Api-Version on
// every request that reaches the wire, whichever library built it: API
// requests and App token exchanges alike. It sits beneath the origin guard
// and has no say in where a request goes.
type apiHeaders struct {
	base http.RoundTripper
}

func (h *apiHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper must not change the request it was given.
	out := req.Clone(req.Context())
	out.Header.Set("Accept", acceptJSON)
	out.Header.Set("X-GitHub-Api-Version", apiVersion)
	return h.base.RoundTrip(out)
}
