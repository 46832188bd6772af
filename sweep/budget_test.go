package sweep

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func TestRotationStartsWhereTheLastSweepStopped(t *testing.T) {
	var scopes []fleet.Scope
	for _, s := range []string{"org:a", "org:b", "org:c", "org:d"} {
		sc, err := fleet.ParseScope(s)
		require.NoError(t, err)
		scopes = append(scopes, sc)
	}
	for _, tc := range []struct {
		next string
		want []string
	}{
		{"", []string{"org:a", "org:b", "org:c", "org:d"}},
		{"org:a", []string{"org:a", "org:b", "org:c", "org:d"}},
		{"org:c", []string{"org:c", "org:d", "org:a", "org:b"}},
		{"org:d", []string{"org:d", "org:a", "org:b", "org:c"}},
		// A scope removed from the configuration starts the rotation over.
		{"org:gone", []string{"org:a", "org:b", "org:c", "org:d"}},
	} {
		t.Run(tc.next, func(t *testing.T) {
			var got []string
			for _, s := range rotation(scopes, tc.next) {
				got = append(got, s.Key())
			}
			assert.Equal(t, tc.want, got)
			assert.Equal(t, "org:a", scopes[0].Key(), "the configuration is not reordered")
		})
	}
}

func TestBudget(t *testing.T) {
	far, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	near, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	for _, tc := range []struct {
		name     string
		ctx      context.Context
		b        budget
		wantFull bool
	}{
		{"the first scope is always listed", near, budget{max: 1, room: time.Hour}, false},
		{"under the cap", far, budget{max: 3, listed: 2}, false},
		{"at the cap", far, budget{max: 3, listed: 3}, true},
		{"no cap", far, budget{listed: 1000}, false},
		{"time for one more", far, budget{room: time.Minute, listed: 5, longest: time.Second}, false},
		{"room for acting reached", near, budget{room: 2 * time.Second, listed: 1}, true},
		{"the longest list would pass into the room", near, budget{room: time.Second, listed: 1, longest: 1500 * time.Millisecond}, true},
		{"no deadline, no time limit", context.Background(), budget{room: time.Hour, listed: 9, longest: time.Hour}, false},
		{"no room set, no time limit", near, budget{listed: 9, longest: time.Hour}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := tc.b.full(tc.ctx)
			assert.Equal(t, tc.wantFull, why != "", why)
		})
	}
}
