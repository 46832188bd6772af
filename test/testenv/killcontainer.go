package testenv

import (
	"fmt"
	"strings"
)

// KillContainer sends SIGKILL to a running container's process
// ("containerd://ID", as a pod's status names it), as the kernel's OOM
// killer or a crash ends it: no SIGTERM first, nothing run on the way out.
// A pod deleted with a grace period of 0 is not that: the API forgets it
// at once, but the kubelet still stops its containers with SIGTERM first,
// and SIGKILL only after a short grace of its own.
func (c *Cluster) KillContainer(containerID string) error {
	id := strings.TrimPrefix(containerID, "containerd://")
	if out, err := c.ctr("tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		return fmt.Errorf("kill container %s: %w: %s", id, err, out)
	}
	return nil
}
