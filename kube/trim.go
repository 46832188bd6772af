package kube

import (
	"bytes"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A pod as the API server sends it is mostly what the reaper never reads:
// its managed fields, and a spec whose runner container carries the JIT
// config in its environment. Over 10,000 ARC runner pods (10.8 KB each in
// protobuf) decoding those fields was the reaper's largest cost: 0.27 s of
// CPU a sweep and 38 KB of garbage a pod. The watch-list (streamPods) and
// the page lists (trimmingDecoder) cut them from the protobuf bytes before
// what is left is decoded, so View still reads an ordinary corev1.Pod, of
// which only the fields below are set. A pod read any other way (a get, a
// delete's answer) is whole.
//
// What stays of a v1 Pod (field numbers from k8s.io/api's generated.proto):
//   - metadata (1), whole but for managedFields (17) and, in the
//     watch-list, the labels (11) and annotations (12) View does not read;
//   - spec (2): each container's name (containers 2, name 1), its
//     environment variables that say a legacy runner's scope (env 7, by
//     name 1), and the serviceAccountName (8);
//   - status (3): phase (1), startTime (7), and each container status
//     (containerStatuses 8) with its name (1), state (2) and lastState (3);
//     each init container status (initContainerStatuses 10) with its name
//     and state, which say whether an init container holds the runner
//     back; and of the conditions (2) only PodScheduled: False with its
//     type (1), status (2), reason (5) and message (6), the scheduler's
//     Unschedulable, and True with its type, status and
//     lastTransitionTime (4), when the pod got its node
//     (fleet.StartWait);
//   - in the watch-list, of the containers and container statuses only
//     the runner container's.
//
// View reads nothing else; TestTrimKeepsWhatViewReads checks that against
// randomly filled pods, and TestWatchListGivesWhatPagesGive against pods
// written to a real API server.
const (
	fieldPodMetadata         = 1
	fieldPodSpec             = 2
	fieldPodStatus           = 3
	fieldMetaLabels          = 11
	fieldMetaAnnotations     = 12
	fieldMetaManagedFields   = 17
	fieldSpecContainers      = 2
	fieldSpecServiceAccount  = 8
	fieldContainerName       = 1
	fieldContainerEnv        = 7
	fieldEnvVarName          = 1
	fieldStatusPhase         = 1
	fieldStatusConditions    = 2
	fieldStatusStartTime     = 7
	fieldStatusContainers    = 8
	fieldStatusInit          = 10
	fieldConditionType       = 1
	fieldConditionStatus     = 2
	fieldConditionTransition = 4
	fieldConditionReason     = 5
	fieldConditionMessage    = 6
	fieldCStatusName         = 1
	fieldCStatusState        = 2
	fieldCStatusLastState    = 3
	fieldListItems           = 2
	fieldUnknownTypeMeta     = 1
	fieldUnknownRaw          = 2
	fieldTypeMetaAPIVersion  = 1
	fieldTypeMetaKind        = 2
	protobufContentPrefix    = "k8s\x00"
)

var errMalformed = errors.New("malformed protobuf")

// trimmingDecoder wraps the protobuf serializer of the core/v1 client. A v1
// PodList in the Kubernetes protobuf envelope has each of its pods trimmed
// and is then decoded by the serializer; anything else (JSON, a single pod,
// other kinds) passes through untouched. Bytes it cannot parse are left to the serializer, so
// that a malformed answer fails with client-go's own error.
type trimmingDecoder struct {
	runtime.Serializer
}

func (d trimmingDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if trimmed, ok := trimEnvelope(data); ok {
		data = trimmed
	}
	return d.Serializer.Decode(data, defaults, into)
}

// trimEnvelope returns the envelope with its v1 PodList trimmed, and false
// for anything else: a single pod (the answer to a get or a delete) is
// decoded whole, so that code that reads one pod later sees all of it.
func trimEnvelope(data []byte) ([]byte, bool) {
	apiVersion, kind, raw, ok := parseEnvelope(data)
	if !ok || apiVersion != "v1" || kind != "PodList" {
		return nil, false
	}
	body, err := trimPodList(raw)
	if err != nil {
		return nil, false
	}
	// The envelope again, around the trimmed object: its type and the
	// object are all the serializer reads (the content encoding and type
	// are always empty for protobuf).
	typeMeta := protowire.AppendTag(nil, fieldTypeMetaAPIVersion, protowire.BytesType)
	typeMeta = protowire.AppendString(typeMeta, apiVersion)
	typeMeta = protowire.AppendTag(typeMeta, fieldTypeMetaKind, protowire.BytesType)
	typeMeta = protowire.AppendString(typeMeta, kind)
	out := make([]byte, 0, len(protobufContentPrefix)+len(typeMeta)+len(body)+16)
	out = append(out, protobufContentPrefix...)
	out = appendMessage(out, fieldUnknownTypeMeta, typeMeta)
	out = appendMessage(out, fieldUnknownRaw, body)
	return out, true
}

// parseEnvelope reads the Kubernetes protobuf envelope ("k8s\x00" and a
// runtime.Unknown) without copying: the object's apiVersion and kind, and
// its raw message.
func parseEnvelope(data []byte) (apiVersion, kind string, raw []byte, ok bool) {
	if !bytes.HasPrefix(data, []byte(protobufContentPrefix)) {
		return "", "", nil, false
	}
	var typeMeta []byte
	err := eachField(data[len(protobufContentPrefix):], func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		switch {
		case num == fieldUnknownTypeMeta && typ == protowire.BytesType:
			typeMeta = value
		case num == fieldUnknownRaw && typ == protowire.BytesType:
			raw = value
		}
		return nil
	})
	if err != nil || typeMeta == nil || raw == nil {
		return "", "", nil, false
	}
	err = eachField(typeMeta, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if typ == protowire.BytesType {
			switch num {
			case fieldTypeMetaAPIVersion:
				apiVersion = string(value)
			case fieldTypeMetaKind:
				kind = string(value)
			}
		}
		return nil
	})
	return apiVersion, kind, raw, err == nil
}

// trimPodList trims every item of a PodList and keeps its metadata.
func trimPodList(list []byte) ([]byte, error) {
	var t trimmer
	out := make([]byte, 0, len(list)/4)
	var pod []byte
	err := eachField(list, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if num != fieldListItems || typ != protowire.BytesType {
			out = append(out, field...)
			return nil
		}
		var err error
		if pod, err = t.pod(pod[:0], value); err != nil {
			return err
		}
		out = appendMessage(out, fieldListItems, pod)
		return nil
	})
	return out, err
}

// trimmer holds the scratch buffers of trimming, reused from pod to pod so
// that trimming a stream of pods allocates nothing once they have grown.
type trimmer struct {
	meta, spec, status, sub []byte
	// keys, when set, are the only labels and annotations kept, and the
	// only container and container status kept are the runner's: an ARC
	// runner pod carries a dozen labels and several annotations, each a
	// map entry and two strings to decode, of which View reads three or
	// four, and a dind sidecar beside the runner. Nil keeps them all (the
	// page lists, whose decoder is made before any Mapping is known).
	keys *metaKeys
}

// metaKeys are what of a pod's labels, annotations and containers its
// view reads.
type metaKeys struct {
	labels, annotations []string
	// runner is the runner container's name: View reads no other
	// container or container status.
	runner string
}

// other reports whether a container or container status named name is
// one View does not read.
func (k *metaKeys) other(name []byte) bool {
	return k != nil && string(name) != k.runner
}

// has reports whether key is one of keys.
func has(keys []string, key []byte) bool {
	for _, k := range keys {
		if k == string(key) {
			return true
		}
	}
	return false
}

// pod appends to dst the pod msg reduced to what View reads.
func (t *trimmer) pod(dst, msg []byte) ([]byte, error) {
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, _, value []byte) error {
		if typ != protowire.BytesType {
			if num == fieldPodMetadata || num == fieldPodSpec || num == fieldPodStatus {
				// The whole decoder refuses these; so does the trimmer,
				// rather than quietly make a pod without them.
				return fmt.Errorf("%w: pod field %d of wire type %d", errMalformed, num, typ)
			}
			return nil
		}
		var err error
		switch num {
		case fieldPodMetadata:
			t.meta, err = t.trimMeta(t.meta[:0], value)
			dst = appendMessage(dst, fieldPodMetadata, t.meta)
		case fieldPodSpec:
			t.spec, err = t.trimSpec(t.spec[:0], value)
			dst = appendMessage(dst, fieldPodSpec, t.spec)
		case fieldPodStatus:
			t.status, err = t.trimStatus(t.status[:0], value)
			dst = appendMessage(dst, fieldPodStatus, t.status)
		}
		return err
	})
	return dst, err
}

// trimMeta appends to dst the metadata but its managed fields, and, when
// t.keys is set, of its labels and annotations only the keys it names.
func (t *trimmer) trimMeta(dst, meta []byte) ([]byte, error) {
	err := eachField(meta, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		switch {
		case num == fieldMetaManagedFields:
			return nil
		case t.keys != nil && typ == protowire.BytesType && (num == fieldMetaLabels || num == fieldMetaAnnotations):
			keys := t.keys.labels
			if num == fieldMetaAnnotations {
				keys = t.keys.annotations
			}
			key, err := entryKey(value)
			if err != nil {
				return err
			}
			if !has(keys, key) {
				return nil
			}
		}
		dst = append(dst, field...)
		return nil
	})
	return dst, err
}

// entryKey is the key of a map entry message (key 1, value 2).
func entryKey(entry []byte) ([]byte, error) {
	var key []byte
	err := eachField(entry, func(n protowire.Number, typ protowire.Type, _, v []byte) error {
		if n == 1 && typ == protowire.BytesType {
			key = v
		}
		return nil
	})
	return key, err
}

// trimSpec appends to dst the containers' names and the service account
// name of spec.
func (t *trimmer) trimSpec(dst, spec []byte) ([]byte, error) {
	err := eachField(spec, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldSpecServiceAccount:
			dst = append(dst, field...)
		case fieldSpecContainers:
			// The name, and of the environment only the variables
			// that say a legacy runner's scope (legacyScopeEnv): the
			// rest of it holds, in scale-set mode, the JIT config.
			kept := t.sub[:0]
			var name []byte
			err := eachField(value, func(n protowire.Number, typ protowire.Type, f, v []byte) error {
				switch {
				case n == fieldContainerName && typ == protowire.BytesType:
					kept = append(kept, f...)
					name = v // the last, as the decoder keeps it
				case n == fieldContainerEnv && typ == protowire.BytesType && legacyScopeVar(v):
					kept = append(kept, f...)
				}
				return nil
			})
			t.sub = kept
			if err != nil {
				return err
			}
			if !t.keys.other(name) {
				dst = appendMessage(dst, fieldSpecContainers, kept)
			}
		}
		return nil
	})
	return dst, err
}

// legacyScopeVar reports whether an EnvVar message names one of the
// variables View reads a legacy runner's scope from. It walks the message
// itself rather than through eachField, whose closure was garbage for
// every variable of every container.
func legacyScopeVar(envVar []byte) bool {
	found := false
	for len(envVar) > 0 {
		// A malformed variable is read as far as it goes, as
		// eachField read it; the container's decode refuses it.
		num, typ, n := protowire.ConsumeTag(envVar)
		if n < 0 {
			return found
		}
		m := protowire.ConsumeFieldValue(num, typ, envVar[n:])
		if m < 0 {
			return found
		}
		if num == fieldEnvVarName && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(envVar[n:])
			found = legacyScopeEnv(string(v))
		}
		envVar = envVar[n+m:]
	}
	return found
}

// trimStatus appends to dst the phase, the start time, each container
// status's name, state and last state, each init container status's name
// and state, and a PodScheduled condition that is False or True.
func (t *trimmer) trimStatus(dst, status []byte) ([]byte, error) {
	err := eachField(status, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		switch {
		case (num == fieldStatusPhase || num == fieldStatusStartTime) && typ == protowire.BytesType:
			dst = append(dst, field...)
		case num == fieldStatusInit && typ == protowire.BytesType:
			var err error
			t.sub, err = keepFields(t.sub[:0], value, func(n protowire.Number, _ protowire.Type, _ []byte) bool {
				return n == fieldCStatusName || n == fieldCStatusState
			})
			if err != nil {
				return err
			}
			dst = appendMessage(dst, fieldStatusInit, t.sub)
		case num == fieldStatusConditions && typ == protowire.BytesType:
			// Of the conditions, View reads only PodScheduled: False
			// for why a pod waits for room, True for when it got a
			// node. Ready, Initialized and the rest would each be a
			// message and four strings to decode.
			var ctype, cstatus []byte
			err := eachField(value, func(n protowire.Number, typ protowire.Type, _, v []byte) error {
				if typ == protowire.BytesType {
					switch n {
					case fieldConditionType:
						ctype = v // the last, as the decoder keeps it
					case fieldConditionStatus:
						cstatus = v
					}
				}
				return nil
			})
			if err != nil || string(ctype) != string(corev1.PodScheduled) {
				return err
			}
			scheduled := string(cstatus) == string(corev1.ConditionTrue)
			if !scheduled && string(cstatus) != string(corev1.ConditionFalse) {
				return nil
			}
			t.sub, err = keepFields(t.sub[:0], value, func(n protowire.Number, _ protowire.Type, _ []byte) bool {
				switch n {
				case fieldConditionType, fieldConditionStatus:
					return true
				case fieldConditionTransition:
					return scheduled
				case fieldConditionReason, fieldConditionMessage:
					return !scheduled
				}
				return false
			})
			if err != nil {
				return err
			}
			dst = appendMessage(dst, fieldStatusConditions, t.sub)
		case num == fieldStatusContainers && typ == protowire.BytesType:
			var err error
			var name []byte
			t.sub, err = keepFields(t.sub[:0], value, func(n protowire.Number, typ protowire.Type, v []byte) bool {
				if n == fieldCStatusName && typ == protowire.BytesType {
					name = v // the last, as the decoder keeps it
				}
				return n == fieldCStatusName || n == fieldCStatusState || n == fieldCStatusLastState
			})
			if err != nil {
				return err
			}
			if !t.keys.other(name) {
				dst = appendMessage(dst, fieldStatusContainers, t.sub)
			}
		}
		return nil
	})
	return dst, err
}

// keepFields appends to dst the fields of msg that keep accepts, given
// each field's number, wire type and value.
func keepFields(dst, msg []byte, keep func(protowire.Number, protowire.Type, []byte) bool) ([]byte, error) {
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, field, value []byte) error {
		if keep(num, typ, value) {
			dst = append(dst, field...)
		}
		return nil
	})
	return dst, err
}

func appendMessage(dst []byte, num protowire.Number, msg []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, msg)
}

// eachField calls f for each field of msg with its number, its wire type,
// the field's whole encoding (tag included) and, for a length-delimited
// field, its value. It stops at the first error, and fails on bytes that
// are not a protobuf message.
func eachField(msg []byte, f func(num protowire.Number, typ protowire.Type, field, value []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(m))
		}
		field := msg[:n+m]
		var value []byte
		if typ == protowire.BytesType {
			v, k := protowire.ConsumeBytes(msg[n:])
			if k < 0 {
				return fmt.Errorf("%w: %w", errMalformed, protowire.ParseError(k))
			}
			value = v
		}
		if err := f(num, typ, field, value); err != nil {
			return err
		}
		msg = msg[n+m:]
	}
	return nil
}
