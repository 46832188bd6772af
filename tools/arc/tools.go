//go:build tools

// Package tools pins actions-runner-controller's manager so `go build` can
// make it from the module proxy: `make arc-manager` builds the package main
// at the module's root (the manager the ARC Helm chart runs) into
// .cache/bin/arc-manager, and test/testenv runs it in scale-set mode
// against the test control plane and the GitHub simulator. A module of its
// own keeps ARC's dependencies (controller-runtime, client-go and
// go-github at ARC's versions) out of the product's go.mod.
//
// v0.27.6 is the newest release of the module the Go module proxy serves:
// later ARC releases (gha-runner-scale-set-0.x) are tagged without a Go
// module version the proxy resolves.
package tools

import (
	_ "github.com/actions/actions-runner-controller"
)
