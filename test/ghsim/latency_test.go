package ghsim

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every answer waits out Options.Latency, as a real round trip does, and a
// client that gives up first is not kept waiting: against a sim whose
// answers take an hour, a client that gives up after 20 ms has its error
// then.
func TestLatencyDelaysEveryAnswer(t *testing.T) {
	const latency = 150 * time.Millisecond
	s, base := startSim(t, Options{Token: testToken, Latency: latency})
	s.AddRunner("org:acme", Runner{Name: "acme-1"})

	for _, path := range []string{"/orgs/acme/actions/runners", "/orgs/acme/actions/runners?name=acme-1", "/nowhere"} {
		began := time.Now()
		resp, _ := do(t, http.MethodGet, base, path, testToken, nil)
		took := time.Since(began)
		assert.GreaterOrEqual(t, took, latency, "%s answered after %s", path, took)
		assert.NotZero(t, resp.StatusCode)
	}

	const slow = time.Hour
	s, base = startSim(t, Options{Token: testToken, Latency: slow})
	s.AddRunner("org:acme", Runner{Name: "acme-1"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"orgs/acme/actions/runners", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "token "+testToken)
	began := time.Now()
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err)
	assert.Less(t, time.Since(began), slow, "a client that gives up is not held for the latency")
}
