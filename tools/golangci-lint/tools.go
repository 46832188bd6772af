//go:build tools

// Package tools pins golangci-lint so `go build` can make it from the
// module proxy: `make lint` builds its command into
// .cache/bin/golangci-lint and runs the linters .golangci.yml enables over
// the main module. A module of its own keeps the linters' dependencies
// (golang.org/x/tools at their version, and each linter's own) out of the
// product's go.mod.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
