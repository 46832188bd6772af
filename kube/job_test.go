package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// TestARCJob: the job ARC's listener recorded is read as ARC writes it,
// and a record that cannot be asked about is still a job.
func TestARCJob(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status map[string]any
		want   *fleet.Job
	}{
		{"no job recorded", map[string]any{"phase": "Running", "runnerId": int64(7)}, nil},
		{"v0.27.6's record", map[string]any{"jobRequestId": int64(991), "jobRepositoryName": "acme/api", "workflowRunId": int64(4242), "jobDisplayName": "build (linux)"},
			&fleet.Job{Owner: "acme", Repo: "api", RunID: 4242, Name: "build (linux)", RequestID: 991}},
		{"newer ARC's jobId, a REST id", map[string]any{"jobRequestId": int64(991), "jobRepositoryName": "acme/api", "workflowRunId": int64(4242), "jobId": "777"},
			&fleet.Job{Owner: "acme", Repo: "api", RunID: 4242, JobID: 777, RequestID: 991}},
		{"a jobId that is no REST id is not asked for", map[string]any{"jobRepositoryName": "acme/api", "workflowRunId": int64(4242), "jobId": "6a1c-44"},
			&fleet.Job{Owner: "acme", Repo: "api", RunID: 4242}},
		{"a run id written as 4242.0", map[string]any{"jobRepositoryName": "acme/api", "workflowRunId": float64(4242)},
			&fleet.Job{Owner: "acme", Repo: "api", RunID: 4242}},
		{"a request with no repository: a job, not askable", map[string]any{"jobRequestId": int64(991)},
			&fleet.Job{RequestID: 991}},
		{"a repository that walks the path: not askable", map[string]any{"jobRequestId": int64(5), "jobRepositoryName": "acme/../x", "workflowRunId": int64(1)},
			&fleet.Job{RequestID: 5}},
		{"a negative run: not askable", map[string]any{"jobRepositoryName": "acme/api", "workflowRunId": int64(-3)},
			&fleet.Job{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"status": tc.status}}
			got := ephemeralRunnerView(u, "").Job
			assert.Equal(t, tc.want, got)
			if got != nil && tc.want.Owner == "" {
				assert.False(t, got.Known())
			}
		})
	}
}

// TestPoolJobAnnotation: the pool's dispatcher's annotation names the job;
// a value that is not a reference is a job that cannot be asked about.
func TestPoolJobAnnotation(t *testing.T) {
	const key = "pool.example.com/job"
	for _, tc := range []struct {
		name string
		m    Mapping
		ann  map[string]string
		want *fleet.Job
	}{
		{"not configured", Mapping{}, map[string]string{key: "acme/api/1"}, nil},
		{"no annotation: no job", Mapping{JobAnnotation: key}, nil, nil},
		{"empty: no job", Mapping{JobAnnotation: key}, map[string]string{key: ""}, nil},
		{"run", Mapping{JobAnnotation: key}, map[string]string{key: "acme/api/42"}, &fleet.Job{Owner: "acme", Repo: "api", RunID: 42}},
		{"run and job", Mapping{JobAnnotation: key}, map[string]string{key: "acme/api/42/9"}, &fleet.Job{Owner: "acme", Repo: "api", RunID: 42, JobID: 9}},
		{"malformed: a job, not askable", Mapping{JobAnnotation: key}, map[string]string{key: "acme/api"}, &fleet.Job{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "r", Annotations: tc.ann}}
			assert.Equal(t, tc.want, tc.m.View(p).Job)
		})
	}
}
