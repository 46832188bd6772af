package testenv

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runner-reaper/runner-reaper/fleet"
)

// ARC's runner objects, as the CRDs Start installs serve them.
var (
	// EphemeralRunners are the EphemeralRunners of ARC's scale sets.
	EphemeralRunners = schema.FromAPIVersionAndKind(fleet.EphemeralRunnerAPIVersion, "").GroupVersion().WithResource("ephemeralrunners")
	// LegacyRunners are the Runners of the legacy (summerwind) ARC.
	LegacyRunners = schema.FromAPIVersionAndKind(fleet.LegacyRunnerAPIVersion, "").GroupVersion().WithResource("runners")
)

const (
	// EphemeralRunnerFinalizer and RunnerRegistrationFinalizer are the
	// finalizers ARC's EphemeralRunner controller puts on every
	// EphemeralRunner it has reconciled. Nothing removes them in the test
	// control plane, so a deleted EphemeralRunner that has them stays,
	// deleting, as one does when ARC's controller is gone.
	EphemeralRunnerFinalizer    = "ephemeralrunner.actions.github.com/finalizer"
	RunnerRegistrationFinalizer = "ephemeralrunner.actions.github.com/runner-registration-finalizer"
	// LegacyRunnerFinalizer is the legacy controller's finalizer on a Runner.
	LegacyRunnerFinalizer = "runner.actions.summerwind.dev"
	// ScaleSet is the scale set (AutoscalingRunnerSet) the EphemeralRunners
	// belong to.
	ScaleSet = "arc-runner-set"
)

// ARCFinalizers are both finalizers ARC's controller puts on an
// EphemeralRunner.
func ARCFinalizers() []string {
	return []string{EphemeralRunnerFinalizer, RunnerRegistrationFinalizer}
}

// EphemeralRunner is an EphemeralRunner as ARC's EphemeralRunnerSet
// controller creates it: ARC's labels for ScaleSet in its namespace, and a
// spec with the fields the CRD requires and a minimal pod template.
type EphemeralRunner struct {
	Name string
	// ConfigURL is spec.githubConfigUrl; empty is https://github.com/acme.
	ConfigURL string
	// Finalizers are created with it (see ARCFinalizers); none when empty.
	Finalizers []string
	// Status, when set, is then written through the status subresource,
	// as ARC's controller does; nil leaves it as created.
	Status *EphemeralRunnerStatus
}

// EphemeralRunnerStatus is an EphemeralRunner's status as ARC's controller
// writes it.
type EphemeralRunnerStatus struct {
	Phase string
	// RunnerName is status.runnerName; empty is the EphemeralRunner's name.
	RunnerName string
	// RunnerID is status.runnerId; 0 leaves it unset, as before the runner
	// registers.
	RunnerID int64
	Reason   string
	Message  string
	// Job is what ARC's listener records when a job starts on the runner;
	// nil records none.
	Job *ARCJob
}

// ARCJob is the job record ARC's listener writes on an EphemeralRunner's
// status (v0.27.6: jobRequestId, jobRepositoryName as OWNER/REPO,
// workflowRunId, jobDisplayName; newer ARC adds jobId, a string).
type ARCJob struct {
	RequestID  int64
	Repository string
	RunID      int64
	Name       string
	JobID      string
}

// object is the status as the API has it, for the EphemeralRunner name.
func (s EphemeralRunnerStatus) object(name string) map[string]any {
	runnerName := s.RunnerName
	if runnerName == "" {
		runnerName = name
	}
	o := map[string]any{"phase": s.Phase, "runnerName": runnerName}
	if s.RunnerID != 0 {
		o["runnerId"] = s.RunnerID
	}
	if s.Reason != "" {
		o["reason"] = s.Reason
	}
	if s.Message != "" {
		o["message"] = s.Message
	}
	if j := s.Job; j != nil {
		o["jobRequestId"], o["jobRepositoryName"], o["workflowRunId"], o["jobDisplayName"] = j.RequestID, j.Repository, j.RunID, j.Name
		if j.JobID != "" {
			o["jobId"] = j.JobID
		}
	}
	return o
}

// object is the EphemeralRunner to create in namespace ns.
func (er EphemeralRunner) object(ns string) *unstructured.Unstructured {
	url := er.ConfigURL
	if url == "" {
		url = "https://github.com/acme"
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.EphemeralRunnerAPIVersion,
		"kind":       fleet.EphemeralRunnerKind,
		"metadata": map[string]any{
			"name": er.Name,
			"labels": map[string]any{
				"actions.github.com/scale-set-name":      ScaleSet,
				"actions.github.com/scale-set-namespace": ns,
				"app.kubernetes.io/component":            "runner",
				"app.kubernetes.io/part-of":              "gha-runner-scale-set",
			},
		},
		"spec": map[string]any{
			"githubConfigUrl":    url,
			"githubConfigSecret": ScaleSet + "-gha-rs-github-secret",
			"runnerScaleSetId":   int64(1),
			"spec": map[string]any{
				"restartPolicy": "Never",
				"containers": []any{map[string]any{
					"name":    "runner",
					"image":   RunnerImage,
					"command": []any{"/home/runner/run.sh"},
				}},
			},
		},
	}}
	if len(er.Finalizers) > 0 {
		u.SetFinalizers(er.Finalizers)
	}
	return u
}

// EphemeralRunner creates the EphemeralRunner in ns as the administrator,
// then writes its status, if it has one, and returns it as the API server
// last answered.
func (e *Env) EphemeralRunner(t testing.TB, ns string, er EphemeralRunner) *unstructured.Unstructured {
	t.Helper()
	created, err := e.Dynamic.Resource(EphemeralRunners).Namespace(ns).Create(context.Background(), er.object(ns), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ephemeralrunner %s/%s: %v", ns, er.Name, err)
	}
	if er.Status == nil {
		return created
	}
	return e.writeStatus(t, created, *er.Status)
}

// WriteEphemeralRunnerStatus replaces an EphemeralRunner's status, as ARC's
// controller does when the runner moves on.
func (e *Env) WriteEphemeralRunnerStatus(t testing.TB, ns, name string, s EphemeralRunnerStatus) *unstructured.Unstructured {
	t.Helper()
	u, err := e.Dynamic.Resource(EphemeralRunners).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get ephemeralrunner %s/%s: %v", ns, name, err)
	}
	return e.writeStatus(t, u, s)
}

func (e *Env) writeStatus(t testing.TB, u *unstructured.Unstructured, s EphemeralRunnerStatus) *unstructured.Unstructured {
	t.Helper()
	if err := unstructured.SetNestedMap(u.Object, s.object(u.GetName()), "status"); err != nil {
		t.Fatal(err)
	}
	updated, err := e.Dynamic.Resource(EphemeralRunners).Namespace(u.GetNamespace()).UpdateStatus(context.Background(), u, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("write status of ephemeralrunner %s/%s: %v", u.GetNamespace(), u.GetName(), err)
	}
	return updated
}

// LegacyRunner is a legacy (summerwind) Runner: ephemeral, for an
// organization or a repository.
type LegacyRunner struct {
	Name string
	// Organization or Repository ("owner/name") is the one it registers
	// with.
	Organization string
	Repository   string
	// Finalizers are created with it (see LegacyRunnerFinalizer).
	Finalizers []string
}

// LegacyRunner creates the Runner in ns as the administrator.
func (e *Env) LegacyRunner(t testing.TB, ns string, r LegacyRunner) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{"image": "summerwind/actions-runner:latest", "ephemeral": true}
	if r.Organization != "" {
		spec["organization"] = r.Organization
	}
	if r.Repository != "" {
		spec["repository"] = r.Repository
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fleet.LegacyRunnerAPIVersion,
		"kind":       fleet.LegacyRunnerKind,
		"metadata":   map[string]any{"name": r.Name},
		"spec":       spec,
	}}
	if len(r.Finalizers) > 0 {
		u.SetFinalizers(r.Finalizers)
	}
	created, err := e.Dynamic.Resource(LegacyRunners).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create runner %s/%s: %v", ns, r.Name, err)
	}
	return created
}

// ARCObject reads an ARC object back as the administrator; nil when it is
// gone.
func (e *Env) ARCObject(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := e.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if !e.exists(t, err, gvr.Resource, ns, name) {
		return nil
	}
	return u
}

// ARCState is what became of an ARC object: "live", "deleting" (a delete
// was accepted; finalizers hold it) or "gone".
func (e *Env) ARCState(t testing.TB, gvr schema.GroupVersionResource, ns, name string) string {
	t.Helper()
	switch u := e.ARCObject(t, gvr, ns, name); {
	case u == nil:
		return "gone"
	case u.GetDeletionTimestamp() != nil:
		return "deleting"
	}
	return "live"
}

// DeleteARC deletes an ARC object as a user or ARC's scale-down would,
// unconditionally; with finalizers it stays, deleting.
func (e *Env) DeleteARC(t testing.TB, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := e.Dynamic.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
}

// exists is false for a NotFound error and true for none; any other error
// fails the test.
func (e *Env) exists(t testing.TB, err error, what, ns, name string) bool {
	t.Helper()
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		t.Fatalf("get %s %s/%s: %v", what, ns, name, err)
	}
	return true
}
