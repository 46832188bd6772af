//go:build tools

// Package tools pins cyclonedx-gomod so `go build` can make it from the
// module proxy: `make release` builds it into .cache/bin and writes with it
// an SBOM of the Go modules linked into each binary it ships
// (mk/release.mk). A module of its own keeps its dependencies (go-git, a
// licence detector) out of the product's go.mod.
package tools

import (
	_ "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"
)
