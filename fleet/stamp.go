package fleet

import (
	"math"
	"time"
)

// Stamp is a time to the second, in 8 bytes where time.Time takes 24. A
// sweep holds two for every pod and two for every EphemeralRunner, which at
// 100,000 runners is 6.4 MB of its peak. Nothing is lost: Kubernetes keeps
// its times to the second, in JSON (RFC 3339 without a fraction) and in
// protobuf (metav1.Time writes no nanoseconds).
//
// It counts seconds from time.Time's zero, so that the zero Stamp is the
// zero time (unknown) and stays apart from any real one, the Unix epoch
// included: a hostile 1970 timestamp is read as 1970, not as unknown.
type Stamp struct{ s int64 }

// zeroUnix is time.Time's zero in Unix seconds (year 1).
const zeroUnix = -62135596800

// StampOf is t to the second, rounded down, in UTC. A time past the last
// second a Stamp holds (hundreds of billions of years away; only a hostile
// server sends one) is held as that last second; a time in time.Time's
// first second but its zero, as the second before.
func StampOf(t time.Time) Stamp {
	if t.IsZero() {
		return Stamp{}
	}
	u := t.Unix()
	switch {
	case u > math.MaxInt64+zeroUnix:
		return Stamp{math.MaxInt64}
	case u == zeroUnix:
		// A time in time.Time's first second that is not its zero (a
		// fraction past it, from a hostile server) must not read as
		// unknown: an EphemeralRunner deleting since then would look
		// not deleting at all. It is held as the second before.
		return Stamp{-1}
	}
	return Stamp{u - zeroUnix}
}

// Time is the stamp as a time.Time in UTC; the zero time when it is zero.
func (s Stamp) Time() time.Time {
	if s.s == 0 {
		return time.Time{}
	}
	return time.Unix(s.s+zeroUnix, 0).UTC()
}

// IsZero reports whether the time is unknown.
func (s Stamp) IsZero() bool { return s.s == 0 }
