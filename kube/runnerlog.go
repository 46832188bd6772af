package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

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
// failure (the pod gone or not running, the kubelet unreachable or
// refusing the API server, the request's timeout) is returned as it came,
// and is no evidence either way.
func (l RunnerLogs) TailRunnerLog(ctx context.Context, p fleet.Pod) ([]byte, error) {
	body, err := l.c.cs.rest.Get().Namespace(p.Namespace).Resource("pods").Name(p.Name).SubResource("log").
		Param("container", l.container).
		Param("tailLines", strconv.Itoa(runnerlog.TailLines)).
		Param("limitBytes", strconv.Itoa(runnerlog.MaxBytes)).
		Stream(ctx)
	if err != nil {
		switch {
		case refusedByRBAC(err):
			return nil, fmt.Errorf("read the log of pod %s/%s container %s: %w: %w", p.Namespace, p.Name, l.container, fleet.ErrNoLogRight, err)
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("read the log of pod %s/%s container %s: the node's kubelet refused the API server (no right of the reaper's): %w", p.Namespace, p.Name, l.container, err)
		}
		return nil, fmt.Errorf("read the log of pod %s/%s container %s: %w", p.Namespace, p.Name, l.container, err)
	}
	defer func() { _ = body.Close() }() // a read-only body: its close says nothing of what was read
	b, err := io.ReadAll(io.LimitReader(body, runnerlog.MaxBytes))
	if err != nil {
		return nil, fmt.Errorf("read the log of pod %s/%s container %s: %w", p.Namespace, p.Name, l.container, err)
	}
	return b, nil
}

// refusedByRBAC reports whether err is the API server's own refusal of the
// read (RBAC, or another authorizer), as opposed to a 403 the pod's
// kubelet gave the API server, which the API server passes on with the
// same reason. Its own names the resource "pods" in its details (the
// subresource goes in the message: cannot get resource "pods/log"); the
// kubelet's is reported under the resource "pods/log".
func refusedByRBAC(err error) bool {
	var se apierrors.APIStatus
	if !apierrors.IsForbidden(err) || !errors.As(err, &se) {
		return false
	}
	st := se.Status()
	if d := st.Details; d != nil && d.Kind != "" {
		return d.Kind == "pods"
	}
	return strings.Contains(st.Message, `cannot get resource "pods/log"`)
}
