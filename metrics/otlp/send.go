package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxAttempts bounds the retries of a receiver that keeps asking for one
// (a 503 with Retry-After: 0 would otherwise be asked again until the
// deadline).
const maxAttempts = 3

// firstBackoff is the wait before the first retry when the receiver does
// not say how long: the export has seconds, not the SDK's minute.
const firstBackoff = 500 * time.Millisecond

// maxMessage is how much of a refusal's body an error quotes.
const maxMessage = 256

// maxAnswer is the longest success answer read: an
// ExportMetricsServiceResponse is a count and a message. A longer one is
// an error, not cut: a cut answer could hide the rejection at its end.
const maxAnswer = 16 << 10

// userAgent names the exporter to the receiver, as the SDK's named itself.
const userAgent = "runner-reaper OTLP/HTTP protobuf metrics exporter"

// errRejected is a receiver's success that names points it refused: the
// metrics are not all stored, and the export is not reported done.
var errRejected = errors.New("the receiver rejected part of the export")

// retryable is a refusal OTLP/HTTP says to send again (429, 502, 503, 504),
// after wait when the receiver said how long.
type retryable struct {
	err  error
	wait time.Duration
}

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// send POSTs body to t.URL, again after a retryable refusal while the next
// attempt would still begin before ctx's deadline.
func send(ctx context.Context, client *http.Client, t Target, body []byte) error {
	payload := body
	if t.Gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(body); err != nil {
			return fmt.Errorf("compress the request: %w", err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("compress the request: %w", err)
		}
		payload = b.Bytes()
	}
	wait := firstBackoff
	for attempt := 1; ; attempt++ {
		err := post(ctx, client, t, payload)
		var r retryable
		if err == nil || !errors.As(err, &r) || attempt == maxAttempts {
			return err
		}
		if r.wait > 0 {
			wait = r.wait
		}
		if d, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(d) {
			return fmt.Errorf("%w (not sent again: the receiver's wait of %s passes the deadline)", err, wait)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (not sent again: %w)", err, ctx.Err())
		case <-timer.C:
		}
		wait *= 2
	}
}

// post makes one attempt.
func post(ctx context.Context, client *http.Client, t Target, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	// Set after the user's headers, as the SDK's exporter sets them: a
	// header list cannot make the body say another encoding.
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", userAgent)
	if t.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	} else {
		req.Header.Del("Content-Encoding")
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("send: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("read the answer to %s: %w", resp.Status, err)
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		if len(answer) == 0 || !strings.EqualFold(mediaType(resp.Header.Get("Content-Type")), "application/x-protobuf") {
			return nil
		}
		if len(answer) > maxAnswer {
			return fmt.Errorf("%s: the answer is longer than %d bytes, which no OTLP response is", resp.Status, maxAnswer)
		}
		n, msg, err := partialSuccess(answer)
		if err != nil {
			return fmt.Errorf("%s: %w", resp.Status, err)
		}
		if n != 0 || msg != "" {
			return fmt.Errorf("%w: %d data points (%q)", errRejected, n, clip(msg))
		}
		return nil
	case code == http.StatusTooManyRequests || code == http.StatusBadGateway ||
		code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		return retryable{err: fmt.Errorf("%s: %q", resp.Status, quote(answer, t.Headers)), wait: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	default:
		return fmt.Errorf("%s: %q", resp.Status, quote(answer, t.Headers))
	}
}

// quote is a refusal's body for an error: clipped, and with every header
// value the receiver echoed (a 401 that quotes the Authorization it
// refused) taken out, since headers are secrets.
func quote(answer []byte, headers map[string]string) string {
	s := string(answer)
	for _, v := range headers {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[header value]")
		}
	}
	return clip(s)
}

// retryAfter is how long a Retry-After asks to wait: seconds, or a date;
// 0 when it says nothing usable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0
		}
		// Past any deadline the export has; capped so it cannot overflow.
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// mediaType is a Content-Type without its parameters.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	return strings.TrimSpace(mt)
}

// clip shortens a receiver's text for an error.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage] + "…"
}
