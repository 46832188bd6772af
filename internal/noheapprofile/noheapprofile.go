// Package noheapprofile turns the runtime's heap profiling off in the
// binaries that import it, before the other packages' initialisation
// allocates.
//
// The runtime samples allocations for a heap profile in any binary that
// links runtime/pprof. gRPC, through the OpenTelemetry SDK's OTLP
// exporter, linked it until the export was built on OTLP's own messages;
// nothing the binaries link today does, and this package keeps the
// sampling off should a dependency bring it back. Nothing in the reaper reads a heap profile, yet every sample (one for
// about every 512 KB allocated: thousands in a sweep of a large fleet)
// unwinds its stack through the binary's function tables, whose pages
// become resident, and records it in the runtime's profile table, mapped
// at the first sample. Measured (make bench's scale bench, the binary
// with and without this package, same world, sweeps in turn): at 10,000
// runners a warm sweep's peak went from 41.6 [41.0-41.7] to 39.9
// [39.6-39.9] MiB, a cold one's from 41.1 to 39.1, for the same CPU.
//
// The runtime takes one more sample on each processor when the rate
// changes, so the table is still mapped; what stops is the sampling that
// follows. The setting is made from an init function, not from main, so
// that the megabytes the packages' initialisation allocates (the AWS
// SDK's schemas alone, 2 MB) are not sampled either. Go initialises, at
// each step, the first package by import path whose imports are all
// initialised. This one imports only the runtime, and every package that
// allocates much imports one whose path sorts after this one's (sync, io,
// os), so this one goes before them: sixth, by GODEBUG=inittrace=1.
package noheapprofile

import "runtime"

func init() {
	runtime.MemProfileRate = 0
}
