// Package cluster_test runs the shipped k8s-cronjob base on a real
// single-node cluster: the real CronJob controller fires the Jobs, the real
// scheduler places them, a real kubelet runs the image `make image` builds
// under containerd and runc, and the real garbage collector cascades. What
// envtest cannot show (a projected token, a read-only root filesystem with
// uid 65532, a cron fire, Forbid, ownerReference cascade) is shown here.
//
// It needs root, and fails without it. The whole run is inside network,
// mount and PID namespaces of its own (testenv.ClusterMain): no test
// traffic leaves them.
package cluster_test

import (
	"testing"

	"github.com/runner-reaper/runner-reaper/test/testenv"
)

var cluster *testenv.Cluster

func TestMain(m *testing.M) {
	testenv.ClusterMain(m, &cluster, func(dir string) ([]string, error) {
		img, err := testenv.BuildImage(dir)
		if err != nil {
			return nil, err
		}
		return []string{img.Tarball}, nil
	})
}
