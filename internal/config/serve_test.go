package config

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Unset, the long-running mode's variables take their defaults, and the
// Lease lives in the pod's own namespace; a sweep reads the same defaults,
// so a CronJob that sets none of them is unchanged.
func TestServeDefaults(t *testing.T) {
	setenv(t, minimal())
	c, err := LoadServe(true, "runner-reaper")
	require.NoError(t, err)
	assert.Equal(t, Serve{Interval: time.Minute, Listen: ":8080", LeaseName: "runner-reaper", LeaseNamespace: "runner-reaper",
		LeaseDuration: 15 * time.Second}, c.Serve)

	sweep, err := Load(true, "runner-reaper")
	require.NoError(t, err)
	assert.Equal(t, Serve{Interval: time.Minute, Listen: ":8080", LeaseName: "runner-reaper", LeaseDuration: 15 * time.Second}, sweep.Serve,
		"a sweep needs no Lease namespace")
}

// Values of the right form are taken as they are written.
func TestServeAcceptsWhatItDocuments(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want func(*Serve)
	}{
		{"an IPv6 loopback", []string{"REAPER_LISTEN", "[::1]:9090"}, func(s *Serve) { s.Listen = "[::1]:9090" }},
		{"localhost", []string{"REAPER_LISTEN", "localhost:1"}, func(s *Serve) { s.Listen = "localhost:1" }},
		{"a host name", []string{"REAPER_LISTEN", "metrics.example.com:65535"}, func(s *Serve) { s.Listen = "metrics.example.com:65535" }},
		{"the shortest interval", []string{"REAPER_INTERVAL", "10s", "REAPER_SWEEP_TIMEOUT", "9s"}, func(s *Serve) { s.Interval = 10 * time.Second }},
		{"a dotted Lease name", []string{"REAPER_LEASE_NAME", "reaper.eu-west"}, func(s *Serve) { s.LeaseName = "reaper.eu-west" }},
		{"another namespace", []string{"REAPER_LEASE_NAMESPACE", "ops"}, func(s *Serve) { s.LeaseNamespace = "ops" }},
		{"the shortest Lease", []string{"REAPER_LEASE_DURATION", "3s"}, func(s *Serve) { s.LeaseDuration = 3 * time.Second }},
		{"the longest Lease", []string{"REAPER_LEASE_DURATION", "5m"}, func(s *Serve) { s.LeaseDuration = 5 * time.Minute }},
		{"an identity", []string{"REAPER_IDENTITY", "reaper-7d9f8_x2k4q"}, func(s *Serve) { s.Identity = "reaper-7d9f8_x2k4q" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, with(minimal(), tc.env...))
			c, err := LoadServe(true, "runner-reaper")
			require.NoError(t, err)
			want := Serve{Interval: time.Minute, Listen: ":8080", LeaseName: "runner-reaper", LeaseNamespace: "runner-reaper",
				LeaseDuration: 15 * time.Second}
			tc.want(&want)
			assert.Equal(t, want, c.Serve)
		})
	}
}

// What only the long-running mode needs is refused by it alone, naming
// the variable, what is wrong and an example: a sweep loads the same
// environment without a word, so a CronJob with a long sweep timeout, or
// run outside a pod, is unchanged.
func TestServeOnlyRules(t *testing.T) {
	for _, tc := range []struct {
		name         string
		env          []string
		inCluster    bool
		podNamespace string
		variable     string
		says         string
	}{
		{"an interval no longer than the sweep timeout", []string{"REAPER_SWEEP_TIMEOUT", "2m"}, true, "runner-reaper",
			"REAPER_INTERVAL", "must be longer than REAPER_SWEEP_TIMEOUT (2m0s), so that a sweep ends before the next is due; got 1m0s"},
		{"an interval equal to the sweep timeout", []string{"REAPER_INTERVAL", "45s"}, true, "runner-reaper",
			"REAPER_INTERVAL", "must be longer than REAPER_SWEEP_TIMEOUT (45s)"},
		{"no Lease namespace outside a pod", nil, false, "",
			"REAPER_LEASE_NAMESPACE", "is required outside a pod"},
		{"no Lease namespace in a pod that does not say its own", nil, true, "",
			"REAPER_LEASE_NAMESPACE", "is required outside a pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setenv(t, with(minimal(), tc.env...))
			_, err := LoadServe(tc.inCluster, tc.podNamespace)
			var ce *Error
			require.True(t, errors.As(err, &ce), "a configuration error: %v", err)
			require.Len(t, ce.Problems, 1, "%v", err)
			p := ce.Problems[0]
			assert.Equal(t, tc.variable, p.Var)
			assert.Contains(t, p.What, tc.says)
			assert.NotEmpty(t, p.Example)

			_, err = Load(tc.inCluster, tc.podNamespace)
			assert.NoError(t, err, "a sweep does not need it")
		})
	}
}

// A Lease namespace set outside a pod is all serve needs there.
func TestServeOutsideAPodWithALeaseNamespace(t *testing.T) {
	setenv(t, with(minimal(), "REAPER_LEASE_NAMESPACE", "ops"))
	c, err := LoadServe(false, "")
	require.NoError(t, err)
	assert.Equal(t, "ops", c.Serve.LeaseNamespace)
}
