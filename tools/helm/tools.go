//go:build tools

// Package tools pins Helm so `go build` can make it from the module proxy:
// `make helm` builds the helm command into .cache/bin/helm, and the chart's
// tests (test/helm, k8s-cronjob/cluster) lint, render, package, push and
// install charts/runner-reaper with it. A module of its own keeps Helm's
// dependencies (its own client-go, ORAS, the JSON Schema validator) out of
// the product's go.mod.
//
// v3.22.0 is the newest Helm 3 the Go module proxy serves; Helm 4 is a new
// module path (helm.sh/helm/v4) with its own flags and chart format.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
