package fleet

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A list's error is classified by what it wraps, however deep: a rate
// limit keeps its until, an inconsistent list is told from a failure, and
// anything else (a 502, a timeout, an error of no known kind) is a failure.
func TestSkipOf(t *testing.T) {
	until := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	limit := &RateLimitError{Until: until, Secondary: true, Err: errors.New("403")}
	tests := []struct {
		name      string
		err       error
		want      SkipKind
		wantUntil time.Time
	}{
		{"a rate limit, wrapped twice", fmt.Errorf("list runners for org:a: %w", fmt.Errorf("page 2: %w", limit)), SkipRateLimited, until},
		{"an inconsistent list", fmt.Errorf("list runners for org:a: %w: page 1 changed", ErrInconsistent), SkipInconsistent, time.Time{}},
		{"a server error", errors.New("502 Bad Gateway"), SkipFailed, time.Time{}},
		{"a timeout", fmt.Errorf("list: %w", errors.New("context deadline exceeded")), SkipFailed, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, rl := SkipOf(tt.err)
			assert.Equal(t, tt.want, kind)
			if tt.wantUntil.IsZero() {
				assert.Nil(t, rl)
				return
			}
			if assert.NotNil(t, rl) {
				assert.Equal(t, tt.wantUntil, rl.Until)
			}
		})
	}
}
