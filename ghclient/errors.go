package ghclient

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v60/github"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// defaultWait is how long GitHub asks a client to wait after a rate-limit
// answer that says neither retry-after nor a reset: at least a minute.
const defaultWait = time.Minute

// rateLimited returns err as a *fleet.RateLimitError, wrapping it, when
// it is GitHub refusing for rate, and err unchanged otherwise. GitHub
// documents the primary limit as 403 or 429 with x-ratelimit-remaining: 0
// and x-ratelimit-reset, and secondary limits as 403 or 429 with
// retry-after; go-github v60 recognises only the 403 forms, and remembers a
// primary limit (and a 403 secondary one) so that it refuses later
// requests itself, without sending them: those refusals are rate limits
// too. A refused App token exchange comes as ghinstallation's HTTPError.
func rateLimited(err error) error {
	if err == nil {
		return nil
	}
	now := time.Now()
	var primary *github.RateLimitError
	if errors.As(err, &primary) {
		until := primary.Rate.Reset.Time
		if until.IsZero() {
			until = now.Add(defaultWait)
		}
		return &fleet.RateLimitError{Until: until, Err: err}
	}
	var secondary *github.AbuseRateLimitError
	if errors.As(err, &secondary) {
		until, _, ok := limitOf(now, secondary.Response)
		if secondary.RetryAfter != nil {
			until, ok = now.Add(*secondary.RetryAfter), true
		}
		if !ok {
			until = now.Add(defaultWait)
		}
		return &fleet.RateLimitError{Until: until, Secondary: true, Err: err}
	}
	var resp *http.Response
	var apiErr *github.ErrorResponse
	var exchangeErr *ghinstallation.HTTPError
	switch {
	case errors.As(err, &apiErr):
		resp = apiErr.Response
	case errors.As(err, &exchangeErr):
		resp = exchangeErr.Response
	}
	if until, secondary, ok := limitOf(now, resp); ok {
		return &fleet.RateLimitError{Until: until, Secondary: secondary, Err: err}
	}
	return err
}

// limitOf reads a rate-limit answer from its status and headers, in the
// order GitHub's documentation gives: retry-after first, then a spent
// primary budget's reset; a 429 with neither waits a minute. A 403 is a rate
// limit only with one of those headers, since 403 also means "forbidden".
func limitOf(now time.Time, r *http.Response) (until time.Time, secondary, ok bool) {
	if r == nil || (r.StatusCode != http.StatusForbidden && r.StatusCode != http.StatusTooManyRequests) {
		return time.Time{}, false, false
	}
	if wait, ok := retryAfter(now, r.Header.Get("Retry-After")); ok {
		return now.Add(wait), true, true
	}
	if r.Header.Get("X-Ratelimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(r.Header.Get("X-Ratelimit-Reset"), 10, 64); err == nil && reset > 0 {
			return time.Unix(reset, 0), false, true
		}
		return now.Add(defaultWait), false, true
	}
	if r.StatusCode == http.StatusTooManyRequests {
		return now.Add(defaultWait), true, true
	}
	return time.Time{}, false, false
}

// retryAfter reads Retry-After as seconds or as an HTTP date.
func retryAfter(now time.Time, v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
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

// accessHint adds to a refusal of a runner list what an operator most
// likely has to fix: GitHub answers 401 for a credential it does not take,
// 403 for one without the rights the call needs, and 404 both for a scope
// that does not exist and for one the credential may not see. A rate limit
// (also a 403 or 429) is left as it is, and so is any other error.
func accessHint(err error, enterprise bool) error {
	var apiErr *github.ErrorResponse
	if fleet.AsRateLimit(err) != nil || !errors.As(err, &apiErr) || apiErr.Response == nil {
		return err
	}
	var hint string
	switch apiErr.Response.StatusCode {
	case http.StatusUnauthorized:
		hint = "GitHub does not take the credential: a token revoked, expired or mistyped, or a GitHub App whose id, installation id or private key is wrong"
	case http.StatusForbidden:
		hint = "the credential lacks the right to administer the scope's self-hosted runners: a repository's Administration permission or an organization's Self-hosted runners permission for an App or a fine-grained token, `repo` or `admin:org` for a classic token"
		if enterprise {
			hint = "an enterprise's runners need a classic personal access token with `manage_runners:enterprise`; GitHub Apps cannot list them"
		}
	case http.StatusNotFound:
		hint = "the organization, repository or enterprise does not exist under that name, or the credential may not see it (GitHub answers 404 for both)"
	default:
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}
