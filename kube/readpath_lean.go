//go:build !stdread

package kube

// readThroughWatch is false in the shipped build: ListPods and
// ListEphemeralRunners read each namespace as one watch-list, decoded by
// hand (watchlist.go, erwatch.go). A build with -tags stdread reads through
// client-go's reflectors instead (readpath_std.go), for the scale bench to
// measure both on the same fleet.
const readThroughWatch = false
