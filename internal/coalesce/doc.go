// Package coalesce makes a stream that arrives in small pieces cost few
// reads. A watch-list of 100,000 pods and EphemeralRunners is 2 GB that
// the API server writes an event at a time, flushing each, and more slowly
// than the reaper reads: read as it comes, it costs a system call for
// every TLS record and a wait (a park, a poll, a wake) for every event the
// reader got ahead of. On a virtual machine (most nodes, every Lambda)
// each of those costs more CPU than the bytes it brings. Two things fix
// that: connections that read from the socket into a larger buffer
// (Dial), so that records already received come in one system call; and
// a stream reader that, after it had to wait for the server, waits a
// little more before it reads again (Paced), so that the next read finds
// a batch of events rather than one. The pause is as long as the stream,
// at its rate, takes to fill a quarter of the buffer a socket starts
// with, and shortens when it filled more, so that it does not hold a fast
// stream back.
package coalesce
