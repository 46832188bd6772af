package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// TestListPodsContinueExpired: a real API server expires a continue token
// only after etcd compaction (minutes), so a small server stands in for it.
// The first page arrives, the second is 410 Gone: the list must fail, never
// return the first page alone.
func TestListPodsContinueExpired(t *testing.T) {
	tests := []struct {
		name       string
		second     metav1.Status
		wantErr    string
		wantExpiry bool
	}{
		{"continue token expired", metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: http.StatusGone,
			Message: "The provided continue parameter is too old to display a consistent list result.",
		}, "continue token of page 2 expired, refusing a partial list", true},
		{"second page fails otherwise", metav1.Status{
			TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status:   metav1.StatusFailure, Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
			Message: "pods is forbidden",
		}, "list pods in ci: ", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path != "/api/v1/namespaces/ci/pods" {
					w.WriteHeader(http.StatusNotFound)
					return
				}
				if r.URL.Query().Get("continue") == "" {
					assert.Equal(t, "2", r.URL.Query().Get("limit"))
					_ = json.NewEncoder(w).Encode(corev1.PodList{
						TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
						ListMeta: metav1.ListMeta{Continue: "page-2", ResourceVersion: "10"},
						Items: []corev1.Pod{
							{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "runner-1", UID: "u1", ResourceVersion: "9"}},
							{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "runner-2", UID: "u2", ResourceVersion: "10"}},
						},
					})
					return
				}
				assert.Equal(t, "page-2", r.URL.Query().Get("continue"))
				w.WriteHeader(int(tc.second.Code))
				_ = json.NewEncoder(w).Encode(tc.second)
			}))
			defer srv.Close()

			c, err := New(&rest.Config{Host: srv.URL}, Options{PageSize: 2, Pages: true})
			require.NoError(t, err)
			pods, err := c.ListPods(context.Background(), []string{"ci"}, "", Mapping{})
			require.ErrorContains(t, err, tc.wantErr)
			assert.Nil(t, pods, "no partial list")
			assert.Equal(t, tc.wantExpiry, apierrors.IsResourceExpired(err))
			assert.Equal(t, int64(2), c.Counts().Requests)
			assert.Equal(t, int64(2), calls.Load())
		})
	}
}
