//go:build tools

// Package tools pins AWS's Lambda Runtime Interface Emulator so `go build`
// can make it from the module proxy: `make rie` builds its
// cmd/aws-lambda-rie into .cache/bin/aws-lambda-rie, and test/testenv runs
// the compiled Lambda bootstrap under it, as the provided.al2023 base image
// does locally. A module of its own keeps the emulator's dependencies out of
// the product's go.mod.
//
// The module has no tagged releases the proxy serves; the pseudo-version
// below is the newest commit it resolves.
package tools

import (
	_ "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
)
