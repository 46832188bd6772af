// Package coalesce makes a stream that arrives in small pieces cost fewer
// system calls: connections that read from the socket into a larger
// buffer (Dial), so that TLS records already received come in one read.
package coalesce
