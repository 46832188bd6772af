package coalesce

import (
	"context"
	"io"
	"time"
)

// gather is what a pause should let arrive: a quarter of the buffer Linux
// gives a TCP socket to begin with (tcp_rmem's default, 128 KiB), of which
// the sender is offered about half, so that a pause at the stream's rate
// ends well before the server has to stop writing.
const gather = 32 << 10

// maxPause bounds a pause however slowly the stream comes.
const maxPause = 5 * time.Millisecond

// minPause is the shortest pause worth a timer; a stream that comes faster
// than gather in it is read as it comes.
const minPause = 200 * time.Microsecond

// waited is how long a read must take to count as one that waited for the
// server rather than one that copied and decrypted bytes already received.
const waited = 100 * time.Microsecond

// Reader reads a stream, pausing before a read that follows one that
// waited for the server, for as long as the stream takes to bring gather
// bytes. A reader that never waits (the reader is the slower side) never
// pauses, and neither does one whose server writes gather in under
// minPause.
//
// The rate is the faster of two: the stream's since its first bytes (which
// counts the server's idle spells and the reader's pauses), and what the
// last pause let in over its length. The second is what keeps a pause
// from holding a fast stream down: a pause long enough to fill the
// socket's window shows the stream as at least window/pause fast, and the
// next pause is shorter, until one no longer fills it.
type Reader struct {
	ctx      context.Context
	r        io.Reader
	now      func() time.Time
	sleep    func(context.Context, time.Duration)
	maxPause time.Duration
	first    time.Time     // when the first bytes came
	got      int64         // bytes read since
	paused   bool          // the last read waited
	last     time.Duration // the last pause, until the next is decided
	since    int64         // bytes read after it without waiting
}

// Paced returns r paced. A pause ends early when ctx ends, so that a
// cancelled sweep is not held up by it; a later read fails as the
// stream's context says.
func Paced(ctx context.Context, r io.Reader) *Reader {
	return &Reader{ctx: ctx, r: r, now: time.Now, sleep: sleep, maxPause: maxPause}
}

func (p *Reader) Read(b []byte) (int, error) {
	if p.paused {
		d := p.pause()
		p.last, p.since = 0, 0
		if d >= minPause {
			p.sleep(p.ctx, d)
			p.last = d
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
	if !p.paused {
		p.since += int64(n)
	}
	return n, err
}

// pause is how long gather bytes take at the stream's rate (see Reader),
// at most p.maxPause; none before a rate is known.
func (p *Reader) pause() time.Duration {
	elapsed := p.now().Sub(p.first)
	if p.got <= 0 || elapsed <= 0 {
		return 0
	}
	rate := float64(p.got) / float64(elapsed) // bytes a nanosecond
	if p.last > 0 {
		rate = max(rate, float64(p.since)/float64(p.last))
	}
	d := float64(gather) / rate
	if d >= float64(p.maxPause) {
		return p.maxPause
	}
	return time.Duration(d)
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
