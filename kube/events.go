package kube

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
)

// RecordEvent records a Warning Event on the pod, so that `kubectl describe
// pod` and `kubectl get events` say why the reaper acted; the sweep records
// it before each delete, while the pod still exists to point at. It is a
// plain core/v1 Event with no aggregation: one Event per action.
func (c *Client) RecordEvent(ctx context.Context, p fleet.Pod, reason, message string) error {
	return c.record(ctx, corev1.ObjectReference{
		APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name,
		UID: types.UID(p.UID), ResourceVersion: p.ResourceVersion,
	}, reason, message)
}

// RecordEphemeralRunnerEvent records the same Event on an EphemeralRunner
// that the reaper acts on directly (one of ARC's own leaks), which has no
// pod to carry it.
func (c *Client) RecordEphemeralRunnerEvent(ctx context.Context, er fleet.EphemeralRunner, reason, message string) error {
	return c.record(ctx, corev1.ObjectReference{
		APIVersion: fleet.EphemeralRunnerAPIVersion, Kind: fleet.EphemeralRunnerKind,
		Namespace: er.Namespace, Name: er.Name, UID: types.UID(er.UID), ResourceVersion: er.ResourceVersion,
	}, reason, message)
}

// RecordObjectEvent records a Warning Event on any object named by its
// apiVersion, kind, name and UID (which may be empty) in namespace: the
// reap-loop report, on the object that makes a looping group's pods. It
// goes through the client of the optional writes, as every Event does.
func (c *Client) RecordObjectEvent(ctx context.Context, namespace string, o fleet.Owner, reason, message string) error {
	return c.record(ctx, corev1.ObjectReference{
		APIVersion: o.APIVersion, Kind: o.Kind, Namespace: namespace, Name: o.Name, UID: types.UID(o.UID),
	}, reason, message)
}

func (c *Client) record(ctx context.Context, obj corev1.ObjectReference, reason, message string) error {
	if c.redact != nil {
		message = c.redact(message)
	}
	// The message quotes runner names and servers' errors, and `kubectl
	// describe` prints it to a terminal: escaped after redaction, which
	// must see the text as it came.
	message = safetext.String(message)
	ev := c.event(obj, corev1.EventTypeWarning, reason, message)
	if err := c.events.createEvent(ctx, ev, c.dryRun); err != nil {
		return fmt.Errorf("%s event %s on %s %s/%s: %w", verb("record", c.dryRun), reason, strings.ToLower(obj.Kind), obj.Namespace, obj.Name, err)
	}
	return nil
}

// event is an Event on obj as the reaper reports it: its component and
// instance, seen once, now.
func (c *Client) event(obj corev1.ObjectReference, kind, reason, message string) *corev1.Event {
	// On the reference clock, with every other time the sweep reports.
	now := metav1.NewTime(c.clock.Now())
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: obj.Name + ".", Namespace: obj.Namespace},
		InvolvedObject:      obj,
		Reason:              reason,
		Message:             message,
		Type:                kind,
		Source:              corev1.EventSource{Component: c.component},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: c.component,
		ReportingInstance:   c.instance,
	}
}
