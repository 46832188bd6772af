//go:build stdread

package kube

// readThroughWatch makes ListPods and ListEphemeralRunners read as the
// long-running mode does: through Watch (client-go's reflectors, their
// watch-list, the transform to the views, the standard decoders), run
// until every store has synced, its snapshot taken, then stopped. The
// scale bench builds this variant beside the shipped one to weigh the
// two read paths on the same fleet; nothing ships it.
const readThroughWatch = true
