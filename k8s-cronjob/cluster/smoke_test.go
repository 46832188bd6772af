package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/internal/testenv"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	ns := cluster.Namespace(t, "smoke")
	never := corev1.PullNever
	pod, err := cluster.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{HostNetwork: true, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: testenv.PauseImage, ImagePullPolicy: never, Args: []string{"exit", "3"}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		t.Logf("%v %v", p.Status.Phase, err)
		return err == nil && p.Status.Phase == corev1.PodFailed
	}, 90*time.Second, time.Second)
}
