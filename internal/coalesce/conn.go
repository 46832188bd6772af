package coalesce

import (
	"bufio"
	"context"
	"net"
)

// connBuffer is how much a connection reads from its socket at once: about
// two TLS records of the largest size. It is held for the connection's life,
// idle ones included (client-go keeps some for the next request), so it is
// no larger than that; a pause of a paced stream lets in one such read
// (gather).
const connBuffer = 32 << 10

// DialFunc is the dial of net.Dialer and of client-go's rest.Config.
type DialFunc = func(ctx context.Context, network, address string) (net.Conn, error)

// Dial returns dial with each connection it makes reading its socket
// through a connBuffer-byte buffer. Writes and Close are the connection's
// own, and so are deadlines, but for bytes already buffered, which a read
// returns past its deadline (net/http's client sets none). A read as large
// as the buffer, with nothing buffered, goes straight to the socket.
func Dial(dial DialFunc) DialFunc {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &conn{Conn: c, r: bufio.NewReaderSize(c, connBuffer)}, nil
	}
}

type conn struct {
	net.Conn
	r *bufio.Reader
}

func (c *conn) Read(p []byte) (int, error) { return c.r.Read(p) }
