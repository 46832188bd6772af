package kube

import (
	"context"
	"fmt"
	"io"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/runnerlog"
)

// RunnerLogs reads the tail of runner containers' logs through the API
// server (pods/log, which the API server asks of the pod's kubelet), for
// the choke point's guard of runners with no other job evidence.
type RunnerLogs struct {
	c         *Client
	container string
}

// RunnerLogs is c's reader of the logs of the container named container
// ("" means DefaultRunnerContainer), counted and bounded like every other
// request of c.
func (c *Client) RunnerLogs(container string) RunnerLogs {
	if container == "" {
		container = DefaultRunnerContainer
	}
	return RunnerLogs{c: c, container: container}
}

// TailRunnerLog returns the last runnerlog.TailLines lines of the pod's
// runner container's log, at most runnerlog.MaxBytes of them: the API
// server is asked for no more (tailLines, limitBytes), and no more is read
// whatever it sends. A refusal by RBAC wraps fleet.ErrNoLogRight; any other
// failure (the pod gone or not running, the kubelet unreachable, the
// request's timeout) is returned as it came, and is no evidence either way.
func (l RunnerLogs) TailRunnerLog(ctx context.Context, p fleet.Pod) ([]byte, error) {
	body, err := l.c.cs.rest.Get().Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("log").
		Param("container", l.container).
		Param("tailLines", strconv.Itoa(runnerlog.TailLines)).
		Param("limitBytes", strconv.Itoa(runnerlog.MaxBytes)).
		Stream(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("read the log of pod %s/%s container %s: %w: %w", p.Namespace, p.Name, l.container, fleet.ErrNoLogRight, err)
		}
		return nil, fmt.Errorf("read the log of pod %s/%s container %s: %w", p.Namespace, p.Name, l.container, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, runnerlog.MaxBytes))
	if err != nil {
		return nil, fmt.Errorf("read the log of pod %s/%s container %s: %w", p.Namespace, p.Name, l.container, err)
	}
	return b, nil
}
