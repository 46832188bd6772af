//go:build tools

// Package tools pins the Pushgateway so `go build` can make it from the
// module proxy: the reaper pushes each sweep's metrics to one, and
// test/testenv runs the real one for Prometheus to scrape. Its web UI's
// assets are committed to the module as generated Go (asset, built
// without the dev tag), so the plain build serves them.
package tools

import (
	_ "github.com/prometheus/pushgateway"
)
