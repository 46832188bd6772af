package coalesce

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// server is a simulated API server streaming over a socket, on a fake
// clock: it writes records of size bytes at rate bytes a second into a
// receive buffer of window bytes, and stops writing while that is full. A
// read takes one record (as a read of TLS does), at once if one is
// buffered, else after waiting for the next.
type server struct {
	now     time.Time
	rate    float64
	size    int
	window  int
	left    int // records not yet written
	ready   time.Time
	held    int // records in the receive buffer
	reads   int
	waits   int
	pauses  []time.Duration
	stalled time.Duration // time the server spent with the buffer full
}

func newServer(rate float64, size, window, records int) *server {
	start := time.Unix(1e9, 0)
	s := &server{now: start, rate: rate, size: size, window: window, left: records}
	s.ready = start.Add(s.gap())
	return s
}

func (s *server) gap() time.Duration {
	return time.Duration(float64(s.size) / s.rate * float64(time.Second))
}

// write lets the server write what it would have by s.now.
func (s *server) write() {
	for s.left > 0 && !s.ready.After(s.now) {
		if (s.held+1)*s.size > s.window {
			// Full: the server waits until the reader makes room.
			s.stalled += s.now.Sub(s.ready)
			s.ready = s.now
			return
		}
		s.held++
		s.left--
		s.ready = s.ready.Add(s.gap())
	}
}

func (s *server) Read(p []byte) (int, error) {
	s.reads++
	s.write()
	if s.held == 0 {
		if s.left == 0 {
			return 0, io.EOF
		}
		s.waits++
		s.now = s.ready
		s.write()
	} else {
		s.now = s.now.Add(5 * time.Microsecond) // decrypt and copy
	}
	s.held--
	return min(len(p), s.size), nil
}

func (s *server) clock() time.Time { return s.now }

func (s *server) sleep(_ context.Context, d time.Duration) {
	s.pauses = append(s.pauses, d)
	s.now = s.now.Add(d)
}

// drain reads r to its end, and says when it ended on s's clock.
func drain(t *testing.T, r io.Reader, s *server) time.Duration {
	start := s.now
	b := make([]byte, 32<<10)
	for {
		_, err := r.Read(b)
		if err == io.EOF {
			return s.now.Sub(start)
		}
		require.NoError(t, err)
	}
}

func TestReaderPausesOnlyWhereItSavesWaitsAndCostsNoTime(t *testing.T) {
	const records = 2000
	tests := []struct {
		name   string
		rate   float64 // bytes a second
		size   int
		window int
		// wantPaused: the paced reader waits for the server at most
		// this fraction of the times the plain one did.
		wantWaits float64
		wantPause time.Duration // the longest pause, at most
	}{
		{"a slow server (an API server encoding JSON): pauses of the longest, few waits", 5e6, 4 << 10, 128 << 10, 0.15, maxPause},
		{"the bench's pods (11 KB records at 40 MB/s)", 40e6, 11 << 10, 128 << 10, 0.5, maxPause},
		{"a server faster than the reader: no pause at all", 2e9, 16 << 10, 128 << 10, 1, 0},
		{"a fast server into a small buffer: short pauses, never a stall", 400e6, 16 << 10, 64 << 10, 1, maxPause},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := newServer(tt.rate, tt.size, tt.window, records)
			plainTook := drain(t, plain, plain)

			s := newServer(tt.rate, tt.size, tt.window, records)
			r := &Reader{ctx: context.Background(), r: s, now: s.clock, sleep: s.sleep, maxPause: maxPause}
			took := drain(t, r, s)

			t.Logf("waits %d paced (%d pauses), %d plain; %s paced, %s plain", s.waits, len(s.pauses), plain.waits, took, plainTook)
			assert.LessOrEqual(t, float64(s.waits), tt.wantWaits*float64(plain.waits), "waits: %d paced, %d plain", s.waits, plain.waits)
			for _, d := range s.pauses {
				assert.GreaterOrEqual(t, d, minPause)
				assert.LessOrEqual(t, d, tt.wantPause)
			}
			// Never later than one pause after the plain reader, and
			// the server never held up by a full buffer.
			assert.LessOrEqual(t, took, plainTook+maxPause, "paced %s, plain %s", took, plainTook)
			assert.Zero(t, s.stalled, "the server waited on a full buffer")
		})
	}
}

// A read that failed is not followed by a pause: the caller is on its way
// out, or trying again on a new stream.
func TestReaderDoesNotPauseAfterAnError(t *testing.T) {
	s := newServer(1e6, 1, 1<<20, 1)
	slowFail := readerFunc(func([]byte) (int, error) {
		s.now = s.now.Add(time.Second)
		return 0, io.ErrUnexpectedEOF
	})
	r := &Reader{ctx: context.Background(), r: slowFail, now: s.clock, sleep: s.sleep, maxPause: maxPause}
	for range 2 {
		_, err := r.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	}
	assert.Empty(t, s.pauses)
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// A pause ends when the stream's context does, and the real pause does
// wait when it does not.
func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		sleep(ctx, time.Hour)
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a pause outlived its cancelled context")
	}

	start := time.Now()
	sleep(context.Background(), maxPause)
	assert.GreaterOrEqual(t, time.Since(start), maxPause)
}

// trickle is a stream whose writer adds a byte at a time; a read waits
// for at least one and takes all there are.
type trickle struct {
	mu    sync.Mutex
	more  chan struct{}
	buf   []byte
	done  bool
	reads int
}

func (t *trickle) write(b byte, last bool) {
	t.mu.Lock()
	t.buf = append(t.buf, b)
	t.done = last
	t.mu.Unlock()
	select {
	case t.more <- struct{}{}:
	default:
	}
}

func (t *trickle) Read(p []byte) (int, error) {
	t.reads++
	for {
		t.mu.Lock()
		if len(t.buf) > 0 {
			n := copy(p, t.buf)
			t.buf = t.buf[n:]
			t.mu.Unlock()
			return n, nil
		}
		if t.done {
			t.mu.Unlock()
			return 0, io.EOF
		}
		t.mu.Unlock()
		<-t.more
	}
}

// Paced wires the real clock and timer: over a stream that trickles in a
// byte at a time, its reads each find a batch. The pause is made long so
// that a loaded machine, whose sleeps run long, still sees batches.
func TestPacedGathersATrickle(t *testing.T) {
	const n = 100
	s := &trickle{more: make(chan struct{}, 1)}
	go func() {
		for i := range n {
			time.Sleep(200 * time.Microsecond)
			s.write('x', i == n-1)
		}
	}()
	r := Paced(context.Background(), s)
	r.maxPause = 50 * time.Millisecond
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Len(t, got, n)
	// Read as it comes, about one read a byte.
	assert.Less(t, s.reads, n/2, "reads of a %d-byte trickle", n)
}
