package fleet

import (
	"errors"
	"fmt"
	"time"
)

// Registration is a self-hosted runner as GitHub lists it. The JSON names
// are short because registrations are cached in the ledger, which must fit a
// ConfigMap.
type Registration struct {
	ID     int64    `json:"i"`
	Name   string   `json:"n"`
	Online bool     `json:"o,omitempty"`
	Busy   bool     `json:"b,omitempty"`
	Labels []string `json:"l,omitempty"`
}

// ErrInconsistent marks a runner list that contradicts itself: a runner
// listed twice on one read, more runners than a page's own total_count
// allows, a page that links to another than the next, more pages than the
// list can have. No list that merely moved while it was read does any of
// these. Safety rule 1: such a list gives no verdict at all. The GitHub
// adapter returns it; SkipOf reads it, so that a skipped scope can say
// which kind of skip it was.
var ErrInconsistent = errors.New("runner list is inconsistent")

// ErrMoved marks a runner list that was read to its end, every page sound,
// while runners joined or left: an ephemeral fleet's normal state, not a
// fault. Such a list proves what it listed (a registration it shows
// existed, with the status and busy it was shown with) but not what it
// did not: a runner can slide onto a page already read and go unseen. The
// GitHub adapter returns it wrapped, together with the registrations and
// the cache, which are then valid; the sweep uses them for presence and
// sends every absence to a look-up by name.
var ErrMoved = errors.New("runner list moved while it was read")

// RateLimitError is GitHub refusing a request for rate: the primary limit
// (403 or 429 with x-ratelimit-remaining: 0), a secondary limit (403 or 429
// with retry-after), or a go-github refusal to send at all because it
// remembers one of those. Until says when GitHub will take requests again,
// so that the report can say until when a scope is skipped.
type RateLimitError struct {
	// Until is GitHub's x-ratelimit-reset, or the time of the answer plus
	// its retry-after.
	Until time.Time
	// Secondary is true for a secondary (retry-after) limit.
	Secondary bool
	// Err is the refusal as the client saw it.
	Err error
}

func (e *RateLimitError) Error() string {
	kind := "primary"
	if e.Secondary {
		kind = "secondary"
	}
	msg := fmt.Sprintf("GitHub %s rate limit until %s", kind, e.Until.UTC().Format(time.RFC3339))
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// AsRateLimit returns the rate limit in err's chain, or nil.
func AsRateLimit(err error) *RateLimitError {
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return rl
	}
	return nil
}

// SkipKind says why a scope's list gave no verdict: the three causes of
// safety rule 1, a reason in the report and a metric dimension.
type SkipKind string

const (
	// SkipFailed: the list could not be read (5xx, timeout, a refused
	// redirect, a malformed answer).
	SkipFailed SkipKind = "failed"
	// SkipRateLimited: GitHub said rate-limited, on this scope or on an
	// earlier one in the same sweep.
	SkipRateLimited SkipKind = "rate-limited"
	// SkipInconsistent: the list was read but does not add up.
	SkipInconsistent SkipKind = "inconsistent"
	// SkipDeferred: the scope was not asked this sweep because it did not
	// fit the sweep's budget; a later sweep of the rotation lists it. Not a
	// fault: its marks are held like a skipped scope's, but it does not
	// degrade the sweep.
	SkipDeferred SkipKind = "deferred"
)

// SkipOf classifies a runner list's error, once, where the list was asked
// for, so that what reads the list (the core, the report) reads a kind and
// never an error chain. For a rate limit it also returns the limit, whose
// Until says when GitHub takes requests again. An error of no known kind
// is a failure: a list that could not be read proves nothing.
func SkipOf(err error) (SkipKind, *RateLimitError) {
	if rl := AsRateLimit(err); rl != nil {
		return SkipRateLimited, rl
	}
	if errors.Is(err, ErrInconsistent) {
		return SkipInconsistent, nil
	}
	return SkipFailed, nil
}
