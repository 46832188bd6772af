//go:build tools

// Package tools pins kube-apiserver so `go build` can make it from the module
// proxy; the project's tests run it under envtest.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
