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
// clock. It writes records of size bytes, the i-th gap(i) after the one
// before, into the socket's window, and stops while the window is full:
// it writes again one round trip (rtt) after a read makes room, when the
// window's update reaches it. A read takes one record (as a read of TLS
// does), at once if one is held, else after waiting for the next.
type server struct {
	now     time.Time
	size    int
	window  int
	rtt     time.Duration
	gap     func(i int) time.Duration
	records int
	written int
	ready   time.Time // when the next record is written
	full    time.Time // when the server found the window full; zero if not
	held    int       // records in the window
	reads   int
	waits   int
	pauses  []time.Duration
	ctxs    []context.Context // each pause's
	stalled time.Duration     // time the server spent on a full window
}

func newServer(size, window, records int, rtt time.Duration, gap func(int) time.Duration) *server {
	s := &server{now: time.Unix(1e9, 0), size: size, window: window, rtt: rtt, gap: gap, records: records}
	s.ready = s.now.Add(gap(0))
	return s
}

// steady is the gap of records of size bytes at rate bytes a second.
func steady(rate float64, size int) func(int) time.Duration {
	g := time.Duration(float64(size) / rate * float64(time.Second))
	return func(int) time.Duration { return g }
}

// write lets the server write what it would have by s.now.
func (s *server) write() {
	for s.written < s.records && s.full.IsZero() && !s.ready.After(s.now) {
		if (s.held+1)*s.size > s.window {
			s.full = s.ready
			return
		}
		s.held++
		s.written++
		s.ready = s.ready.Add(s.gap(s.written))
	}
}

func (s *server) Read(p []byte) (int, error) {
	s.reads++
	s.write()
	if s.held == 0 {
		if s.written == s.records {
			return 0, io.EOF
		}
		s.waits++
		s.now = s.ready
		s.write()
	} else {
		s.now = s.now.Add(5 * time.Microsecond) // decrypt and copy
	}
	s.held--
	if !s.full.IsZero() {
		resume := s.now.Add(s.rtt)
		s.stalled += resume.Sub(s.full)
		s.ready, s.full = resume, time.Time{}
	}
	return min(len(p), s.size), nil
}

func (s *server) clock() time.Time { return s.now }

func (s *server) sleep(ctx context.Context, d time.Duration) {
	s.pauses = append(s.pauses, d)
	s.ctxs = append(s.ctxs, ctx)
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

type ctxKey struct{}

func TestReaderPausesOnlyWhereItSavesWaitsAndCostsNoTime(t *testing.T) {
	const kib = 1 << 10
	// bursts: 1 MiB at 200 MB/s, then 20 ms of nothing, and again.
	bursts := func(i int) time.Duration {
		if i > 0 && i%64 == 0 {
			return 20 * time.Millisecond
		}
		return steady(200e6, 16*kib)(i)
	}
	// slowStart: 64 records at 2 MB/s (the server filling its cache),
	// then 100 MB/s.
	slowStart := func(i int) time.Duration {
		if i < 64 {
			return steady(2e6, 16*kib)(i)
		}
		return steady(100e6, 16*kib)(i)
	}
	tests := []struct {
		name    string
		size    int
		window  int
		rtt     time.Duration
		gap     func(int) time.Duration
		records int
		// maxWaits: the paced reader waits for the server at most
		// this fraction of the times the plain one did.
		maxWaits float64
		// slower: the paced reader ends at most this fraction later
		// than the plain one did, and a pause.
		slower float64
		// pauses: whether the paced reader pauses at all.
		pauses bool
	}{
		{"a slow server (an API server encoding JSON)", 4 * kib, 64 * kib, 50 * time.Microsecond, steady(5e6, 4*kib), 2000, 0.2, 0, true},
		{"the bench's pods: 11 KB at 40 MB/s", 11 * kib, 64 * kib, 50 * time.Microsecond, steady(40e6, 11*kib), 2000, 0.5, 0, true},
		{"40 MB/s, a millisecond away", 11 * kib, 64 * kib, time.Millisecond, steady(40e6, 11*kib), 2000, 0.5, 0.05, true},
		{"100 MB/s into a small window", 16 * kib, 64 * kib, 300 * time.Microsecond, steady(100e6, 16*kib), 4000, 1, 0.05, true},
		{"a slow start, then 100 MB/s", 16 * kib, 64 * kib, 300 * time.Microsecond, slowStart, 4000, 1, 0.05, true},
		{"bursts of 200 MB/s between idle spells", 16 * kib, 64 * kib, 300 * time.Microsecond, bursts, 4096, 1, 0.05, true},
		{"a server faster than a pause is worth", 16 * kib, 128 * kib, 50 * time.Microsecond, steady(2e9, 16*kib), 2000, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := newServer(tt.size, tt.window, tt.records, tt.rtt, tt.gap)
			plainTook := drain(t, plain, plain)

			s := newServer(tt.size, tt.window, tt.records, tt.rtt, tt.gap)
			ctx := context.WithValue(context.Background(), ctxKey{}, tt.name)
			r := &Reader{ctx: ctx, r: s, now: s.clock, sleep: s.sleep, maxPause: maxPause}
			took := drain(t, r, s)
			t.Logf("waits %d paced (%d pauses), %d plain; %s paced, %s plain; server stalled %s paced, %s plain",
				s.waits, len(s.pauses), plain.waits, took, plainTook, s.stalled, plain.stalled)

			assert.LessOrEqual(t, float64(s.waits), tt.maxWaits*float64(plain.waits), "waits")
			assert.Equal(t, tt.pauses, len(s.pauses) > 0, "paused")
			for i, d := range s.pauses {
				assert.GreaterOrEqual(t, d, minPause)
				assert.LessOrEqual(t, d, maxPause)
				assert.Same(t, ctx, s.ctxs[i], "a pause not bound to the stream's context")
			}
			assert.LessOrEqual(t, took, time.Duration(float64(plainTook)*(1+tt.slower))+maxPause, "paced %s, plain %s", took, plainTook)
		})
	}
}

// A read that failed is not followed by a pause: the caller is on its way
// out, or trying again on a new stream.
func TestReaderDoesNotPauseAfterAnError(t *testing.T) {
	s := newServer(1, 1<<20, 1, 0, steady(1e6, 1))
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
