package coalesce

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// socket is a connection with everything it will ever receive already
// received: each read takes as much as it asks for, as a socket's read
// takes what its receive buffer holds.
type socket struct {
	net.Conn
	in     *bytes.Reader
	reads  int
	closed bool
	wrote  []byte
}

func (s *socket) Read(p []byte) (int, error) {
	s.reads++
	return s.in.Read(p)
}

func (s *socket) Write(p []byte) (int, error) {
	s.wrote = append(s.wrote, p...)
	return len(p), nil
}

func (s *socket) Close() error {
	s.closed = true
	return nil
}

func TestDialReadsTheSocketInLargePieces(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	tests := []struct {
		name      string
		readSize  int
		wantReads int
	}{
		// TLS asks for a record's worth or so: the socket is read a
		// buffer at a time, then once more for the end of the stream.
		{"small reads", 5 << 10, len(data)/connBuffer + 1},
		// A read as large as the buffer goes straight to the socket.
		{"reads of the buffer's size", connBuffer, len(data)/connBuffer + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &socket{in: bytes.NewReader(data)}
			c, err := Dial(func(context.Context, string, string) (net.Conn, error) { return s, nil })(context.Background(), "tcp", "x:1")
			require.NoError(t, err)
			var got bytes.Buffer
			b := make([]byte, tt.readSize)
			for {
				n, err := c.Read(b)
				got.Write(b[:n])
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
			}
			assert.Equal(t, data, got.Bytes())
			assert.Equal(t, tt.wantReads, s.reads)
		})
	}
}

func TestDialKeepsTheConnectionsOwnWritesCloseAndErrors(t *testing.T) {
	refused := errors.New("connection refused")
	_, err := Dial(func(context.Context, string, string) (net.Conn, error) { return nil, refused })(context.Background(), "tcp", "x:1")
	require.ErrorIs(t, err, refused)

	s := &socket{in: bytes.NewReader(nil)}
	c, err := Dial(func(context.Context, string, string) (net.Conn, error) { return s, nil })(context.Background(), "tcp", "x:1")
	require.NoError(t, err)
	_, err = c.Write([]byte("GET / HTTP/1.1\r\n"))
	require.NoError(t, err)
	require.NoError(t, c.Close())
	assert.Equal(t, "GET / HTTP/1.1\r\n", string(s.wrote))
	assert.True(t, s.closed)
}
