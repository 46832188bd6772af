// Package configmap is a ledger store in one Kubernetes ConfigMap, the
// default in a cluster.
package configmap

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/state"
)

// Store is a state.Store in one Kubernetes ConfigMap, the default in a
// cluster: it needs no other infrastructure, and its resourceVersion gives
// optimistic concurrency for free. The version is the resourceVersion.
//
// The API server keeps the resourceVersion of an update that changes
// nothing, so a save that left marks and list cache as they were would not
// move the version, and a second sweep saving at the same version would be
// let through too. Every save therefore also bumps a counter in the data key
// "saves": no two saves write the same object.
//
// Save changes only what the reaper owns (its two labels and the data keys
// marks.json, saves, next-scope, streaks.json, history.json, loops.json
// and lists.json.gz) on the object it last loaded or saved, so labels,
// annotations and data keys that others put on the ConfigMap survive.
//
// A ConfigMap holds at most 1 MiB, so Save keeps the ledger under LimitBytes
// by dropping first the list cache, then the oldest records of actions,
// the streaks, the reap-loop window and the oldest marks (state.Fit), and says so in a warning
// and through LastTrim.
type Store struct {
	client    ConfigMaps
	namespace string
	name      string

	// LimitBytes is the size Save keeps the ledger under (keys and values
	// of data and binaryData); zero means DefaultLimitBytes. Set it before
	// the first Save.
	LimitBytes int

	trims *state.TrimLog

	mu sync.Mutex
	// last is the object as this store last loaded or saved it: the base
	// of a Save at its resourceVersion, which then needs no extra read.
	last *corev1.ConfigMap
}

// DefaultLimitBytes is the size Save keeps a ledger under. The API server
// refuses a ConfigMap whose data exceeds 1 MiB; the margin leaves room for
// metadata and for the ledger growing between sweeps.
const DefaultLimitBytes = 900 * 1024

// savesKey is the data key of the save counter.
const savesKey = "saves"

// ledgerLabels are the labels the ledger ConfigMap carries, so that it can
// be found and told apart from the reaper's other objects. A function, not a
// variable, so no caller can change them for everyone.
func ledgerLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "runner-reaper",
		"app.kubernetes.io/component": "ledger",
	}
}

// ConfigMaps is what the store needs of a client of the ConfigMaps in one
// namespace: client-go's typed ConfigMapInterface has it, and so has the
// reaper's own counted client (kube.Client.ConfigMaps).
type ConfigMaps interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
}

// New returns a store in the ConfigMap namespace/name, reached through
// client, a client of the ConfigMaps in namespace. A nil logger discards
// the trim warnings (LastTrim still reports them).
func New(client ConfigMaps, namespace, name string, logger *slog.Logger) *Store {
	return &Store{client: client, namespace: namespace, name: name, trims: state.NewTrimLog(logger)}
}

// LastTrim reports what the most recent successful Save left out to fit
// LimitBytes, for the sweep's summary.
func (c *Store) LastTrim() state.Trim { return c.trims.LastTrim() }

// Load reads the ConfigMap; a missing one is an empty ledger at Version "".
func (c *Store) Load(ctx context.Context) (state.Ledger, state.Version, error) {
	cm, err := c.client.Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return state.Normalize(state.Ledger{}), "", nil
	}
	if err != nil {
		return state.Ledger{}, "", fmt.Errorf("get ledger configmap %s/%s: %w", c.namespace, c.name, err)
	}
	var l state.Ledger
	if s, ok := cm.Data[state.MarksKey]; ok {
		if err := json.Unmarshal([]byte(s), &l.Marks); err != nil {
			return state.Ledger{}, "", fmt.Errorf("decode %s of ledger configmap %s/%s: %w", state.MarksKey, c.namespace, c.name, err)
		}
	}
	if b, ok := cm.BinaryData[state.ListsKey]; ok {
		var err error
		if l.Lists, err = state.GunzipLists(b); err != nil {
			// Only a cache: without it the lists are read afresh. The
			// marks above are not, and stay an error.
			c.trims.DroppedLists(state.ListsKey, err, "configmap", c.namespace+"/"+c.name)
		}
	}
	l.NextScope = cm.Data[state.NextScopeKey]
	l.Streaks = state.DecodeStreaks(cm.Data[state.StreaksKey])
	h, err := state.DecodeHistory(cm.Data[state.HistoryKey])
	if err != nil {
		// The record feeds no decision: a sweep goes on without it.
		c.trims.DroppedHistory(state.HistoryKey, err, "configmap", c.namespace+"/"+c.name)
	}
	l.History = h
	loops, err := state.DecodeLoops(cm.Data[state.LoopsKey])
	if err != nil {
		// It feeds only a back-off: a sweep goes on without it.
		c.trims.DroppedLoops(state.LoopsKey, err, "configmap", c.namespace+"/"+c.name)
	}
	l.Loops = loops
	c.remember(cm)
	return state.Normalize(l), state.Version(cm.ResourceVersion), nil
}

// LoadHistory reads the record of actions alone, and never writes: for a
// person asking what the reaper did. A record that cannot be read is an
// error here, not an empty one. Version "" means there is no ledger.
func (c *Store) LoadHistory(ctx context.Context) ([]state.Record, state.Version, error) {
	cm, err := c.client.Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("get ledger configmap %s/%s: %w", c.namespace, c.name, err)
	}
	h, err := state.DecodeHistory(cm.Data[state.HistoryKey])
	if err != nil {
		return nil, "", fmt.Errorf("decode %s of ledger configmap %s/%s: %w", state.HistoryKey, c.namespace, c.name, err)
	}
	return h, state.Version(cm.ResourceVersion), nil
}

// remember keeps cm as the base of the next Save at its resourceVersion,
// without the marks, the record of actions, the reap-loop window and the
// list cache: every Save
// writes them afresh, and the list cache is most of the object (834 KB at
// 100,000 registrations), which the sweep would otherwise hold from its
// start to its end, when it holds the most.
func (c *Store) remember(cm *corev1.ConfigMap) {
	base := *cm
	base.Data, base.BinaryData = nil, nil
	keep := base.DeepCopy()
	for k, v := range cm.Data {
		if k != state.MarksKey && k != state.HistoryKey && k != state.LoopsKey {
			if keep.Data == nil {
				keep.Data = map[string]string{}
			}
			keep.Data[k] = v
		}
	}
	for k, v := range cm.BinaryData {
		if k != state.ListsKey {
			if keep.BinaryData == nil {
				keep.BinaryData = map[string][]byte{}
			}
			keep.BinaryData[k] = slices.Clone(v)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = keep
}

// base returns a copy of the object at resourceVersion v to update: the one
// this store last loaded or saved, or else the one on the server, which
// must still be at v. A ledger gone or moved on is a conflict.
func (c *Store) base(ctx context.Context, v state.Version) (*corev1.ConfigMap, error) {
	c.mu.Lock()
	last := c.last
	c.mu.Unlock()
	if last != nil && state.Version(last.ResourceVersion) == v {
		return last.DeepCopy(), nil
	}
	cm, err := c.client.Get(ctx, c.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get ledger configmap %s/%s to update at version %s: %w: %w", c.namespace, c.name, v, state.ErrConflict, err)
	}
	if err != nil {
		return nil, fmt.Errorf("get ledger configmap %s/%s to update: %w", c.namespace, c.name, err)
	}
	if state.Version(cm.ResourceVersion) != v {
		return nil, fmt.Errorf("update ledger configmap %s/%s at version %s (now %s): %w", c.namespace, c.name, v, cm.ResourceVersion, state.ErrConflict)
	}
	return cm, nil
}

// nextSave is the counter a save writes over prev. One that is missing or
// not a number (edited by hand) restarts at 1, which still differs from it.
func nextSave(prev string) string {
	n, err := strconv.ParseUint(prev, 10, 64)
	if err != nil {
		return "1"
	}
	return strconv.FormatUint(n+1, 10)
}

// Save writes l if the ConfigMap is still at resourceVersion v, creating it
// when v is "". A ConfigMap deleted since it was loaded is a conflict too:
// the ledger changed under the caller.
func (c *Store) Save(ctx context.Context, l state.Ledger, v state.Version) (state.Version, error) {
	enc, trim, err := state.Fit(l, c.LimitBytes, DefaultLimitBytes, "ledger configmap "+c.namespace+"/"+c.name)
	if err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: c.name}}
	if v != "" {
		if cm, err = c.base(ctx, v); err != nil {
			return "", err
		}
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	for k, val := range ledgerLabels() {
		cm.Labels[k] = val
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[state.MarksKey] = string(enc.Marks)
	cm.Data[savesKey] = nextSave(cm.Data[savesKey])
	if enc.Next != "" {
		cm.Data[state.NextScopeKey] = enc.Next
	} else {
		delete(cm.Data, state.NextScopeKey)
	}
	if enc.Streaks != "" {
		cm.Data[state.StreaksKey] = enc.Streaks
	} else {
		delete(cm.Data, state.StreaksKey)
	}
	if enc.History != "" {
		cm.Data[state.HistoryKey] = enc.History
	} else {
		delete(cm.Data, state.HistoryKey)
	}
	if enc.Loops != "" {
		cm.Data[state.LoopsKey] = enc.Loops
	} else {
		delete(cm.Data, state.LoopsKey)
	}
	if enc.Lists != nil {
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[state.ListsKey] = enc.Lists
	} else {
		delete(cm.BinaryData, state.ListsKey)
	}

	var saved *corev1.ConfigMap
	if v == "" {
		saved, err = c.client.Create(ctx, cm, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("create ledger configmap %s/%s: %w: %w", c.namespace, c.name, state.ErrConflict, err)
		}
		if err != nil {
			return "", fmt.Errorf("create ledger configmap %s/%s: %w", c.namespace, c.name, err)
		}
	} else {
		saved, err = c.client.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return "", fmt.Errorf("update ledger configmap %s/%s at version %s: %w: %w", c.namespace, c.name, v, state.ErrConflict, err)
		}
		if err != nil {
			return "", fmt.Errorf("update ledger configmap %s/%s: %w", c.namespace, c.name, err)
		}
	}

	c.remember(saved)
	c.trims.Saved(trim, "configmap", c.namespace+"/"+c.name)
	return state.Version(saved.ResourceVersion), nil
}
