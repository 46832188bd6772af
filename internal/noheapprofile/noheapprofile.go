// Package noheapprofile turns the runtime's heap profiling off in the
// binaries that import it, before the other packages' initialisation
// allocates.
//
// The runtime samples allocations for a heap profile in any binary that
// links runtime/pprof, and gRPC (through the OTLP exporter) links it. The
// first sample allocates the profile's hash table, 1.4 MiB that stay
// resident for the process's life, and every sample after it a record of
// its stack. Nothing in the reaper reads a heap profile.
//
// The setting is made from an init function, not from main: the packages'
// initialisation allocates several megabytes (the AWS SDK's schemas
// alone, 2 MB) and would already have taken samples. Packages initialise
// in the order of their import paths, each once its imports have; this one
// imports only the runtime, and its path sorts before every package that
// allocates much, so its init runs before theirs (inittrace shows it).
package noheapprofile

import "runtime"

func init() {
	runtime.MemProfileRate = 0
}
