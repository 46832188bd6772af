package config

import (
	"fmt"
	"strings"
)

// NameFrom says where a pod keeps its runner's GitHub name.
type NameFrom int

const (
	// NameFromPod: the pod's name is the runner's name, as in ARC's
	// scale-set mode. The zero value.
	NameFromPod NameFrom = iota
	// NameFromLabel: the value of the label NameSource.Key.
	NameFromLabel
	// NameFromAnnotation: the value of the annotation NameSource.Key.
	NameFromAnnotation
)

// NameSource is where the runner's GitHub name comes from, as configured.
// It is config's own type, so that reading the configuration does not pull
// in the Kubernetes client; internal/app turns it into kube.Source.
type NameSource struct {
	From NameFrom
	// Key is the label or annotation key; unused for NameFromPod.
	Key string
}

// ParseNameSource reads the configuration form: "pod-name" (or ""),
// "label:KEY" or "annotation:KEY".
func ParseNameSource(s string) (NameSource, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "pod-name" {
		return NameSource{From: NameFromPod}, nil
	}
	kind, key, ok := strings.Cut(s, ":")
	if !ok || strings.TrimSpace(key) == "" {
		return NameSource{}, fmt.Errorf("runner name source %q is not pod-name, label:KEY or annotation:KEY", s)
	}
	switch kind {
	case "label":
		return NameSource{From: NameFromLabel, Key: strings.TrimSpace(key)}, nil
	case "annotation":
		return NameSource{From: NameFromAnnotation, Key: strings.TrimSpace(key)}, nil
	default:
		return NameSource{}, fmt.Errorf("runner name source %q has unknown kind %q (want pod-name, label or annotation)", s, kind)
	}
}
