package coalesce

import (
	"context"
	"io"
	"time"
)

// gather is what a pause should let arrive: half the receive buffer Linux
// gives a TCP socket to begin with (tcp_rmem's default, 128 KiB), so that a
// pause ends before the buffer fills and the server has to stop writing.
const gather = 64 << 10

// maxPause bounds a pause however slowly the stream comes: a stream ends
// at most this much later than it would have.
const maxPause = 5 * time.Millisecond

// minPause is the shortest pause worth a timer; a stream that comes faster
// than gather in it is read as it comes.
const minPause = 200 * time.Microsecond

// waited is how long a read must take to count as one that waited for the
// server rather than one that copied and decrypted bytes already received.
const waited = 100 * time.Microsecond

// Reader reads a stream, pausing before a read that follows one that
// waited for the server, for as long as the stream, at the rate it has
// come so far, takes to bring gather bytes. A reader that never waits (the
// reader is the slower side) never pauses, and neither does one whose
// server writes fast enough to fill the socket's buffer in a pause.
type Reader struct {
	ctx      context.Context
	r        io.Reader
	now      func() time.Time
	sleep    func(context.Context, time.Duration)
	maxPause time.Duration
	first    time.Time // when the first bytes came
	got      int64     // bytes read since
	paused   bool      // the last read waited
}

// Paced returns r paced. A pause ends early when ctx ends, so that a
// cancelled sweep is not held up by it; the read after it then fails as
// the stream's context says.
func Paced(ctx context.Context, r io.Reader) *Reader {
	return &Reader{ctx: ctx, r: r, now: time.Now, sleep: sleep, maxPause: maxPause}
}

func (p *Reader) Read(b []byte) (int, error) {
	if p.paused {
		if d := p.pause(); d >= minPause {
			p.sleep(p.ctx, d)
		}
	}
	start := p.now()
	n, err := p.r.Read(b)
	end := p.now()
	if n > 0 && p.first.IsZero() {
		// The wait for the first bytes is the server's answer, not its
		// rate.
		p.first = end
	} else {
		p.got += int64(n)
	}
	p.paused = err == nil && end.Sub(start) > waited
	return n, err
}

// pause is how long gather bytes take at the rate the stream has come
// since its first bytes, at most p.maxPause; none before a rate is known.
func (p *Reader) pause() time.Duration {
	elapsed := p.now().Sub(p.first)
	if p.got <= 0 || elapsed <= 0 {
		// No rate yet: a pause could be too long for it.
		return 0
	}
	d := time.Duration(float64(elapsed) * float64(gather) / float64(p.got))
	return min(d, p.maxPause)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
