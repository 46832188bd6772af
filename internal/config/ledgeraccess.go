package config

import (
	"fmt"
	"reflect"
	"time"
)

// LedgerAccess is what reading the ledger needs, and nothing more: where
// the ledger is, and how to reach the cluster that holds a ConfigMap
// ledger. A command that only reads the ledger (history) needs neither a
// GitHub credential nor the scopes, and should run with the ledger's
// rights alone.
type LedgerAccess struct {
	Ledger Ledger
	// KubeTimeout bounds each Kubernetes request.
	KubeTimeout time.Duration
	// EKSCluster, when set, reaches the cluster from outside.
	EKSCluster string
	// Timeout bounds the whole read, as REAPER_SWEEP_TIMEOUT bounds a
	// sweep: a DynamoDB endpoint that accepts and never answers would
	// otherwise hold the reader for as long as the SDK's retries last,
	// which no request timeout of the SDK's defaults bounds.
	Timeout time.Duration
}

// ledgerSpec is the part of spec that LoadLedgerAccess reads: the same
// fields with the same tags, so the same variables, defaults and examples
// (TestLedgerSpecIsPartOfSpec checks).
type ledgerSpec struct {
	Ledger       string        `split_words:"true" example:"configmap:runner-reaper/runner-reaper-ledger"`
	EksCluster   string        `split_words:"true" example:"build-fleet"`
	KubeTimeout  time.Duration `split_words:"true" default:"30s" example:"30s"`
	SweepTimeout time.Duration `split_words:"true" default:"45s" example:"45s"`
}

// LoadLedgerAccess reads and validates REAPER_LEDGER, REAPER_EKS_CLUSTER,
// REAPER_KUBE_TIMEOUT and REAPER_SWEEP_TIMEOUT, resolved as Load resolves them (inCluster and
// podNamespace choose the default ledger), and refuses a variable
// runner-reaper does not read at all, as Load does: a typo'd REAPER_LEDGER
// would otherwise send the reader to the default ledger. A memory ledger
// is refused: no other process can read it. Every other variable is left
// unread, bad values and all.
func LoadLedgerAccess(inCluster bool, podNamespace string) (LedgerAccess, error) {
	var s ledgerSpec
	problems, err := readEnv(&s)
	if err != nil {
		return LedgerAccess{}, err
	}
	bad := func(field, what string) {
		problems = append(problems, Problem{Var: key(field), What: what, Example: example(field)})
	}
	a := LedgerAccess{KubeTimeout: s.KubeTimeout, EKSCluster: s.EksCluster, Timeout: s.SweepTimeout}
	switch {
	case s.KubeTimeout <= 0:
		bad("KubeTimeout", fmt.Sprintf("must be a positive duration, got %s", s.KubeTimeout))
	case s.KubeTimeout > maxKubeTimeout:
		bad("KubeTimeout", fmt.Sprintf("must be at most %s, got %s", maxKubeTimeout, s.KubeTimeout))
	}
	switch {
	case s.SweepTimeout <= 0:
		bad("SweepTimeout", fmt.Sprintf("must be a positive duration, got %s", s.SweepTimeout))
	case s.SweepTimeout > maxSweepTimeout:
		bad("SweepTimeout", fmt.Sprintf("must be at most %s, got %s", maxSweepTimeout, s.SweepTimeout))
	}
	validateAWS(spec{EksCluster: s.EksCluster}, bad)
	a.Ledger = parseLedger(s.Ledger, inCluster, podNamespace, bad)
	if a.Ledger.Kind == LedgerMemory {
		// Every reader would find it empty, and say only "no ledger
		// there yet", as if the sweeps had not run.
		bad("Ledger", "memory keeps nothing after the sweep that wrote it, so there is no record to read: name the ledger the sweeps use")
	}
	if len(problems) > 0 {
		return LedgerAccess{}, &Error{Problems: problems}
	}
	return a, nil
}

// LedgerVariables are the variables LoadLedgerAccess reads: the REAPER_
// variables of ledgerSpec's fields, described as Variables describes them.
func LedgerVariables() ([]Variable, error) {
	all, err := reaperVariables()
	if err != nil {
		return nil, err
	}
	t := reflect.TypeOf(ledgerSpec{})
	want := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		want[key(t.Field(i).Name)] = true
	}
	vars := make([]Variable, 0, len(want))
	for _, v := range all {
		if want[v.Names[0]] {
			vars = append(vars, v)
		}
	}
	if len(vars) != len(want) {
		return nil, fmt.Errorf("ledgerSpec has %d fields, of which spec describes %d", len(want), len(vars))
	}
	return vars, nil
}
