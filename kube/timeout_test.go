package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// An API server that accepts the connection and never answers: each
// request ends at the client's timeout, with an error that says so, rather
// than holding the sweep for ever. The caller's context has no deadline.
func TestEveryRequestIsBounded(t *testing.T) {
	addr := testenv.SilentServer(t)
	c, err := New(&rest.Config{Host: "http://" + addr}, Options{Timeout: 500 * time.Millisecond})
	require.NoError(t, err)

	for name, call := range map[string]func() error{
		"list pods": func() error {
			_, err := c.ListPods(context.Background(), []string{"arc-runners"}, "actions-ephemeral-runner=True", Mapping{RunnerContainer: "runner"})
			return err
		},
		"ledger get": func() error {
			_, err := c.ConfigMaps("arc-runners").Get(context.Background(), "runner-reaper-ledger", metav1.GetOptions{})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := call()
			took := time.Since(start)
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrTimeout)
			assert.Contains(t, err.Error(), "no answer from the Kubernetes API within 500ms")
			assert.Less(t, took, 5*time.Second, "the request ended at its timeout")
		})
	}
}

func TestTimeoutDefaultsAndRefusals(t *testing.T) {
	_, err := New(&rest.Config{Host: "http://127.0.0.1:1"}, Options{Timeout: -time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "negative")
	assert.Equal(t, 30*time.Second, DefaultTimeout)
}
