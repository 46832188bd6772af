package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestResumedWatchIsOpenOnceSomethingCameOnIt: after a watch broke, the
// reflector watches again from the resourceVersion its store reached. The
// answer's headers say only that the API server accepted the request: the
// store still lacks whatever changed while no watch was open, and the
// first thing the stream may carry is a 410 saying that those changes are
// compacted away and can never be replayed. Until the new watch has said
// something of its own (a bookmark: everything up to its resourceVersion
// was sent), the store cannot vouch that nothing is missing from it.
func TestResumedWatchIsOpenOnceSomethingCameOnIt(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	src := &fakeSource{watches: make(chan *watch.FakeWatcher, 1)}
	f := newTestFeed(t, "ci", src, clk)
	send := true

	// A watch-list lands: one pod, Live.
	tw, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &send})
	require.NoError(t, err)
	fw := <-src.watches
	require.NoError(t, f.Replace([]any{testPod("ci", "a")}, "10"))
	require.True(t, f.state().Live)

	// The connection is cut (an API server restart, a partition); while
	// no watch is open, pod b is created. The store cannot know.
	fw.Stop()
	_, ok := <-tw.ResultChan()
	require.False(t, ok)
	require.False(t, f.state().Live)

	// The reflector watches again from resourceVersion 10; the API server
	// answers 200 and has not sent a single event yet.
	tw, err = f.lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: "10"})
	require.NoError(t, err)
	fw = <-src.watches
	views, err := f.views(clk.Now(), nil)
	assert.ErrorIs(t, err, ErrIncomplete,
		"a watch resumed from an old resourceVersion, before it delivered anything, vouches for a store without pod b (got %d views)", len(views))

	// What the API server then says: the resourceVersion was compacted.
	go fw.Error(&apierrors.NewResourceExpired("too old resource version: 10 (250)").ErrStatus)
	ev := <-tw.ResultChan()
	require.Equal(t, watch.Error, ev.Type)
	assert.False(t, f.state().Live)
}

// TestConsistencyCheckListKeepsTheWatchListsWatch: with
// KUBE_WATCHLIST_INCONSISTENCY_DETECTOR set, client-go lists through the
// same ListerWatcher after a watch-list's end bookmark and before Replace,
// then goes on reading the watch-list's watch. Were that list taken for a
// relist, the watch would no longer be the current one: the store would
// land and stay "watch not open yet" until that watch ended, five to ten
// minutes later, though it is open and carrying events all along.
func TestConsistencyCheckListKeepsTheWatchListsWatch(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	src := &fakeSource{watches: make(chan *watch.FakeWatcher, 1), listed: &corev1.PodList{Items: []corev1.Pod{*testPod("ci", "a")}}}
	f := newTestFeed(t, "ci", src, clk)
	send := true
	_, err := f.lw.WatchWithContext(ctx, metav1.ListOptions{SendInitialEvents: &send})
	require.NoError(t, err)
	<-src.watches
	// checkWatchListDataConsistencyIfRequested's list.
	_, err = f.lw.ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NoError(t, f.Replace([]any{testPod("ci", "a")}, "10"))
	s := f.state()
	assert.True(t, s.Live, "the watch-list's watch is open and read on; why: %q", s.Why)
}
