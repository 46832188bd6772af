package fleet

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

func TestStamp(t *testing.T) {
	last := time.Unix(math.MaxInt64+zeroUnix, 0).UTC()
	for _, tc := range []struct {
		name     string
		in       time.Time
		want     time.Time
		wantZero bool
	}{
		{name: "zero is unknown", in: time.Time{}, want: time.Time{}, wantZero: true},
		{name: "the Unix epoch is a time, not unknown", in: time.Unix(0, 0), want: time.Unix(0, 0).UTC()},
		{name: "a Kubernetes time comes back whole", in: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC), want: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)},
		{name: "another zone is the same instant in UTC", in: time.Date(2026, 3, 14, 10, 26, 53, 0, time.FixedZone("CET", 3600)), want: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)},
		{name: "a fraction of a second is dropped", in: time.Date(2026, 3, 14, 9, 26, 53, 999999999, time.UTC), want: time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)},
		{name: "before the epoch", in: time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), want: time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)},
		{name: "the year 9999 an RFC 3339 time can name", in: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), want: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
		{name: "past the last second held", in: time.Unix(math.MaxInt64, 0), want: last},
		{name: "the second after time's zero", in: time.Time{}.Add(time.Second), want: time.Time{}.Add(time.Second)},
		{name: "a fraction past time's zero is a time, not unknown", in: time.Time{}.Add(500 * time.Millisecond), want: time.Time{}.Add(-time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := StampOf(tc.in)
			assert.Equal(t, tc.wantZero, s.IsZero())
			assert.Equal(t, tc.want, s.Time())
			assert.Equal(t, tc.want.IsZero(), s.Time().IsZero())
		})
	}
}

func TestStampIsSmall(t *testing.T) {
	assert.Equal(t, uintptr(8), unsafe.Sizeof(Stamp{}), "a Stamp is 8 bytes, not time.Time's 24")
	// 216: the StartWait pointer's and the group's 8 bytes each over the
	// 200 a view was; a wait's reasons live only on the few pods that have
	// not started, and a group's name once per group.
	assert.LessOrEqual(t, unsafe.Sizeof(Pod{}), uintptr(216), "a pod view")
	assert.LessOrEqual(t, unsafe.Sizeof(EphemeralRunner{}), uintptr(160), "an EphemeralRunner view")
}
