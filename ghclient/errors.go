package ghclient

import (
	"errors"
	"net/http"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v60/github"
)

// ErrInconsistent marks a runner list that was read to the end but does not
// add up (pages disagreeing on total_count, items fewer or more than it, a
// page missing, a runner listed twice). Safety rule 1: such a list is never
// evidence that a runner is absent.
var ErrInconsistent = errors.New("runner list is inconsistent")

// IsRateLimited tells whether err is GitHub refusing for rate: the primary
// limit (go-github's *RateLimitError, or 403/429 with
// x-ratelimit-remaining: 0), the secondary limit (*AbuseRateLimitError, or
// 403/429 with retry-after) or any 429, including when an App token
// exchange was the refused request. go-github itself recognises only the
// 403 forms, hence the header checks.
func IsRateLimited(err error) bool {
	if err == nil {
		return false
	}
	var primary *github.RateLimitError
	var secondary *github.AbuseRateLimitError
	if errors.As(err, &primary) || errors.As(err, &secondary) {
		return true
	}
	var apiErr *github.ErrorResponse
	if errors.As(err, &apiErr) && rateLimitedResponse(apiErr.Response) {
		return true
	}
	var exchangeErr *ghinstallation.HTTPError
	return errors.As(err, &exchangeErr) && rateLimitedResponse(exchangeErr.Response)
}

// rateLimitedResponse reads GitHub's rate-limit answer from the status and
// headers.
func rateLimitedResponse(r *http.Response) bool {
	if r == nil {
		return false
	}
	switch r.StatusCode {
	case http.StatusTooManyRequests:
		return true
	case http.StatusForbidden:
		return r.Header.Get("X-Ratelimit-Remaining") == "0" || r.Header.Get("Retry-After") != ""
	default:
		return false
	}
}

// closeExchangeBody closes the body of a failed App token exchange, which
// ghinstallation leaves open for inspection, so that a refused exchange
// does not leak a connection. The status and headers stay readable.
func closeExchangeBody(err error) {
	var exchangeErr *ghinstallation.HTTPError
	if errors.As(err, &exchangeErr) && exchangeErr.Response != nil && exchangeErr.Response.Body != nil {
		_ = exchangeErr.Response.Body.Close()
	}
}
