//go:build tools

// Package tools pins actionlint so `go build` can make it from the module
// proxy: `make lint-workflows` builds it into .cache/bin and checks
// .github/workflows with it (mk/actionlint.mk), with shellcheck over the
// run: scripts where `make deps` could install it. A module of its own
// keeps its dependencies out of the product's go.mod.
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint"
)
