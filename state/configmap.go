package state

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ConfigMap is a Store in one Kubernetes ConfigMap, the default in a
// cluster: it needs no other infrastructure, and its resourceVersion gives
// optimistic concurrency for free. The version is the resourceVersion.
//
// A ConfigMap holds at most 1 MiB, so Save keeps the ledger under LimitBytes
// by dropping first the list cache and then the oldest marks, and says so in
// a warning and through LastTrim.
type ConfigMap struct {
	client    kubernetes.Interface
	namespace string
	name      string

	// LimitBytes is the size Save keeps the ledger under (keys and values
	// of data and binaryData); zero means DefaultLimitBytes. Set it before
	// the first Save.
	LimitBytes int

	trimLog
}

// ledgerLabels are the labels the ledger ConfigMap carries, so that it can
// be found and told apart from the reaper's other objects. A function, not a
// variable, so no caller can change them for everyone.
func ledgerLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "runner-reaper",
		"app.kubernetes.io/component": "ledger",
	}
}

// NewConfigMap returns a store in the ConfigMap namespace/name. A nil logger
// discards the trim warnings (LastTrim still reports them).
func NewConfigMap(client kubernetes.Interface, namespace, name string, logger *slog.Logger) *ConfigMap {
	return &ConfigMap{client: client, namespace: namespace, name: name, trimLog: newTrimLog(logger)}
}

// Load reads the ConfigMap; a missing one is an empty ledger at Version "".
func (c *ConfigMap) Load(ctx context.Context) (Ledger, Version, error) {
	cm, err := c.client.CoreV1().ConfigMaps(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return normalize(Ledger{}), "", nil
	}
	if err != nil {
		return Ledger{}, "", fmt.Errorf("get ledger configmap %s/%s: %w", c.namespace, c.name, err)
	}
	var l Ledger
	if s, ok := cm.Data[marksKey]; ok {
		if err := json.Unmarshal([]byte(s), &l.Marks); err != nil {
			return Ledger{}, "", fmt.Errorf("decode %s of ledger configmap %s/%s: %w", marksKey, c.namespace, c.name, err)
		}
	}
	if b, ok := cm.BinaryData[listsKey]; ok {
		if err := gunzipJSON(b, &l.Lists); err != nil {
			return Ledger{}, "", fmt.Errorf("decode %s of ledger configmap %s/%s: %w", listsKey, c.namespace, c.name, err)
		}
	}
	return normalize(l), Version(cm.ResourceVersion), nil
}

// Save writes l if the ConfigMap is still at resourceVersion v, creating it
// when v is "". A ConfigMap deleted since it was loaded is a conflict too:
// the ledger changed under the caller.
func (c *ConfigMap) Save(ctx context.Context, l Ledger, v Version) (Version, error) {
	limit := c.LimitBytes
	if limit <= 0 {
		limit = DefaultLimitBytes
	}
	enc, trim, err := fit(l, limit)
	if err != nil {
		return "", fmt.Errorf("fit ledger configmap %s/%s: %w", c.namespace, c.name, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       c.namespace,
			Name:            c.name,
			Labels:          ledgerLabels(),
			ResourceVersion: string(v),
		},
		Data: map[string]string{marksKey: string(enc.marks)},
	}
	if enc.lists != nil {
		cm.BinaryData = map[string][]byte{listsKey: enc.lists}
	}

	var saved *corev1.ConfigMap
	if v == "" {
		saved, err = c.client.CoreV1().ConfigMaps(c.namespace).Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create ledger configmap %s/%s: %w: %w", c.namespace, c.name, ErrConflict, err)
		}
		if err != nil {
			return "", fmt.Errorf("create ledger configmap %s/%s: %w", c.namespace, c.name, err)
		}
	} else {
		saved, err = c.client.CoreV1().ConfigMaps(c.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return "", fmt.Errorf("update ledger configmap %s/%s at version %s: %w: %w", c.namespace, c.name, v, ErrConflict, err)
		}
		if err != nil {
			return "", fmt.Errorf("update ledger configmap %s/%s: %w", c.namespace, c.name, err)
		}
	}

	c.saved(trim, "configmap", c.namespace+"/"+c.name)
	return Version(saved.ResourceVersion), nil
}
