//go:build tools

// Package tools pins the control plane binaries so `go build` can make them
// from the module proxy: kube-apiserver for envtest, and kubelet,
// kube-scheduler and kube-controller-manager for the real single-node
// cluster the k8s-cronjob tests run the shipped CronJob on.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
