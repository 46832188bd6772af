package sweep_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// TestSweepRedactsAWaitBeforeCuttingIt: a secret in what holds a runner
// back, lying across the point where the verdict cuts the message, is
// redacted whole before the cut: neither the evidence nor the wait the
// action line and the audit read shows any prefix of it.
func TestSweepRedactsAWaitBeforeCuttingIt(t *testing.T) {
	secret := "ghs_" + strings.Repeat("T", 36)
	// The cut is at 300 runes; the secret starts ten before it.
	msg := `failed to pull "ghcr.io/acme/runner": ` + strings.Repeat("x", 300-10-len(`failed to pull "ghcr.io/acme/runner": `)) + secret + " rest"
	w := newWorld()
	w.kube.pods = []fleet.Pod{fakePod("acme-stuck", func(p *fleet.Pod) {
		p.Phase, p.Runner = "Pending", fleet.Container{Found: true}
		p.StartWait = &fleet.StartWait{Reason: "ErrImagePull", Message: msg, Container: "runner"}
	})}
	s := w.sweeper()
	s.Policy.StartDeadline = 15 * time.Minute
	s.Redact = func(v string) string { return strings.ReplaceAll(v, secret, "[REDACTED]") }
	res := s.Run(t.Context(), sweep.Audit)
	var c *reconcile.Candidate
	for i := range res.Confirmation.Candidates {
		if res.Confirmation.Candidates[i].Verdict == fleet.NeverStarted {
			c = &res.Confirmation.Candidates[i]
		}
	}
	require.NotNil(t, c, "never-started")
	assert.Contains(t, c.Evidence, "[REDACTED]")
	assert.NotContains(t, c.Evidence, "ghs_")
	assert.NotContains(t, c.Pod.StartWait.Message, "ghs_")
	assert.Equal(t, msg, w.kube.pods[0].StartWait.Message, "the cluster's pod is not changed")
}
