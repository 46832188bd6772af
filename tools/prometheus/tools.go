//go:build tools

// Package tools pins Prometheus so `go build` can make its server and
// promtool from the module proxy: test/monitoring runs `promtool check
// rules` and `promtool test rules` over the shipped alerts, and
// test/testenv runs the server against a real Pushgateway to see the
// reaper's pushed metrics scraped and its rules evaluated. A module of its
// own keeps Prometheus's many dependencies out of the product's go.mod.
//
// `make` builds both with -tags remove_all_sd: the tests need only
// static_configs, and without the cloud service discoveries (AWS, Azure,
// GCE, Kubernetes...) the first build is much shorter. The web UI's
// assets are not embedded (no builtinassets tag): the tests use the HTTP
// API only.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
