package otlp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/runner-reaper/runner-reaper/fleet"
	"github.com/runner-reaper/runner-reaper/loops"
	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/reap"
	"github.com/runner-reaper/runner-reaper/reconcile"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// received is what a receiver was sent.
type received struct {
	path    string
	header  http.Header
	request *colmetrics.ExportMetricsServiceRequest
}

// receiver decodes each request as OTLP's own generated message (the one
// the exporter does not link) and answers with answer.
func receiver(t *testing.T, answer http.HandlerFunc) (*httptest.Server, func() []received) {
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if !assert.NoError(t, err) {
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		assert.NoError(t, err)
		var req colmetrics.ExportMetricsServiceRequest
		assert.NoError(t, proto.Unmarshal(b, &req))
		mu.Lock()
		got = append(got, received{path: r.URL.Path, header: r.Header.Clone(), request: &req})
		mu.Unlock()
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

// ok answers as an OpenTelemetry Collector does: an empty response.
func ok(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	_, _ = w.Write(out)
}

func oneResult() sweep.Result {
	return sweep.Result{Mode: sweep.DryRun, Status: sweep.StatusComplete, Started: time.Unix(1_790_000_000, 0), StreaksKnown: true,
		Outcomes: []reap.Outcome{{Candidate: reconcile.Candidate{Finding: reconcile.Finding{Verdict: fleet.Ghost}}, Result: fleet.WouldDelete}},
		Looked:   true, Loops: []loops.Loop{{Group: fleet.GroupOf(fleet.GroupScaleSet, "arc", "broken"), Count: 5, Fingerprint: "outdated"}}}
}

// The export is one OTLP/HTTP protobuf request with the Prometheus names,
// the labels as attributes, the instance as service.instance.id, the
// user's headers and resource attributes, compressed or not.
func TestExportSendsTheFamiliesOnce(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(t *testing.T) {
			srv, sent := receiver(t, ok)
			target := Target{URL: srv.URL + "/v1/metrics", Gzip: gz, Timeout: 5 * time.Second,
				Headers:  map[string]string{"Authorization": "Bearer hunter2", "Content-Type": "text/plain", "Content-Encoding": "br"},
				Resource: map[string]string{"k8s.cluster.name": "eu-west", "service.name": "not-the-reaper", "service.instance.id": "not-the-instance"}}
			require.NoError(t, Export(context.Background(), oneResult(), "eu-west", time.Second, target))

			reqs := sent()
			require.Len(t, reqs, 1, "one export per sweep")
			assert.Equal(t, "/v1/metrics", reqs[0].path)
			assert.Equal(t, "Bearer hunter2", reqs[0].header.Get("Authorization"))
			assert.Equal(t, userAgent, reqs[0].header.Get("User-Agent"))
			assert.Equal(t, "application/x-protobuf", reqs[0].header.Get("Content-Type"), "a header list cannot change the body's type")
			assert.Equal(t, map[bool]string{true: "gzip"}[gz], reqs[0].header.Get("Content-Encoding"), "nor its encoding")
			rms := reqs[0].request.GetResourceMetrics()
			require.Len(t, rms, 1)
			attrs := map[string]string{}
			for _, kv := range rms[0].GetResource().GetAttributes() {
				attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			assert.Equal(t, map[string]string{"service.name": "runner-reaper", "service.instance.id": "eu-west", "k8s.cluster.name": "eu-west"}, attrs)

			got := map[string]float64{}
			names := map[string]bool{}
			require.Len(t, rms[0].GetScopeMetrics(), 1)
			sm := rms[0].GetScopeMetrics()[0]
			assert.Equal(t, scopeName, sm.GetScope().GetName())
			for _, m := range sm.GetMetrics() {
				require.NotNil(t, m.GetGauge(), "%s is a gauge", m.GetName())
				assert.Empty(t, m.GetUnit(), "no unit for a translator to append")
				assert.NotEmpty(t, m.GetDescription())
				assert.False(t, names[m.GetName()], "%s once", m.GetName())
				names[m.GetName()] = true
				for _, dp := range m.GetGauge().GetDataPoints() {
					assert.NotZero(t, dp.GetTimeUnixNano())
					key := m.GetName()
					for _, kv := range dp.GetAttributes() {
						key += "|" + kv.GetKey() + "=" + kv.GetValue().GetStringValue()
					}
					got[key] = dp.GetAsDouble()
				}
			}
			assert.Equal(t, 1.0, got[metrics.PromActions+"|verdict=ghost|result=would-delete"])
			assert.Equal(t, 0.0, got[metrics.PromExitCode+"|mode=dry-run"])
			assert.Equal(t, 1_790_000_000.0, got[metrics.PromLastSuccess])
			pushed := 0
			for _, f := range metrics.Families() {
				if f.EMF != metrics.ServeOnly {
					pushed++
				}
			}
			assert.Len(t, names, pushed, "every family a sweep pushes, success included: %v", names)
		})
	}
}

// A receiver's refusal is an error that says what it answered and never
// what the headers held; OTLP's retryable refusals are sent again, a
// bounded number of times and only while the deadline allows; a success
// that names rejected points is not reported done; a redirect is not
// followed.
func TestExportAnswers(t *testing.T) {
	protobuf := func(code int, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(code)
			_, _ = w.Write(body)
		}
	}
	partial := func(n int64, msg string) []byte {
		b, err := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{PartialSuccess: &colmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: n, ErrorMessage: msg}})
		require.NoError(t, err)
		return b
	}
	refuse := func(code int, retryAfter string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
			http.Error(w, "busy hunter2", code)
		}
	}
	cases := []struct {
		name     string
		answers  []http.HandlerFunc // in turn; the last repeats
		attempts int
		err      string // "" for success
		rejected bool
	}{
		{name: "a collector's empty answer", answers: []http.HandlerFunc{ok}, attempts: 1},
		{name: "an empty 200 without a type (Prometheus)", answers: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {}}, attempts: 1},
		{name: "an empty partial success", answers: []http.HandlerFunc{protobuf(200, partial(0, ""))}, attempts: 1},
		{name: "rejected points", answers: []http.HandlerFunc{protobuf(200, partial(3, "bad name"))}, attempts: 1, err: `3 data points ("bad name")`, rejected: true},
		{name: "a warning alone", answers: []http.HandlerFunc{protobuf(200, partial(0, "slow down"))}, attempts: 1, err: `"slow down"`, rejected: true},
		{name: "an answer that is not protobuf", answers: []http.HandlerFunc{protobuf(200, []byte{0x0a, 0x05, 0x08})}, attempts: 1, err: "read the answer"},
		{name: "a bad request is not sent again", answers: []http.HandlerFunc{refuse(400, "")}, attempts: 1, err: `400 Bad Request: "busy hunter2"`},
		{name: "unavailable, then stored", answers: []http.HandlerFunc{refuse(503, "0"), ok}, attempts: 2},
		{name: "a gateway's timeout, then a bad gateway, then stored", answers: []http.HandlerFunc{refuse(504, "0"), refuse(502, "0"), ok}, attempts: 3},
		{name: "rate-limited for ever", answers: []http.HandlerFunc{refuse(429, "0")}, attempts: 3, err: "429 Too Many Requests"},
		{name: "a refusal that quotes the credential", answers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "bad auth "+r.Header.Get("Authorization"), http.StatusUnauthorized)
		}}, attempts: 1, err: `401 Unauthorized: "bad auth [header value]"`},
		{name: "a success that is not protobuf is taken as it is", answers: []http.HandlerFunc{func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(partial(3, "bad name"))
		}}, attempts: 1},
		{name: "a success answer too long to read whole", answers: []http.HandlerFunc{protobuf(200, append(bytes.Repeat(protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1), maxAnswer), partial(9, "")...))},
			attempts: 1, err: "longer than"},
		{name: "a wait past the deadline", answers: []http.HandlerFunc{refuse(502, "3600")}, attempts: 1, err: "passes the deadline"},
		{name: "a redirect to a login page", answers: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/login", http.StatusFound)
		}}, attempts: 1, err: "302 Found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			srv, _ := receiver(t, func(w http.ResponseWriter, r *http.Request) {
				i := int(n.Add(1)) - 1
				tc.answers[min(i, len(tc.answers)-1)](w, r)
			})
			// The retries wait out their real backoffs, so the cases run
			// side by side, under a deadline far past those backoffs
			// however late they run.
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := Export(ctx, oneResult(), "eu", time.Second, Target{URL: srv.URL + "/v1/metrics", Headers: map[string]string{"Authorization": "Bearer s3cr3t-token"}})
			assert.Equal(t, tc.attempts, int(n.Load()), "attempts")
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "export metrics over otlp to "+srv.URL)
			assert.Contains(t, err.Error(), tc.err)
			assert.NotContains(t, err.Error(), "s3cr3t-token")
			assert.Equal(t, tc.rejected, errors.Is(err, errRejected))
		})
	}
}

// The target's own timeout bounds the export, as the SDK's does: the
// receiver holds the export until the client gives up, and would store it
// after a minute, so an export its timeout did not end would succeed.
func TestExportTimeout(t *testing.T) {
	srv, _ := receiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
			ok(w, r)
		}
	})
	err := Export(context.Background(), oneResult(), "eu", 10*time.Minute, Target{URL: srv.URL, Timeout: 200 * time.Millisecond})
	require.Error(t, err)
}

// The request is what the generated ExportMetricsServiceRequest encodes to.
func TestEncodeIsTheServiceRequest(t *testing.T) {
	rm := request(oneResult(), "eu", map[string]string{"team": "ci"}, time.Unix(1, 0))
	b, err := encode(rm)
	require.NoError(t, err)
	want, err := proto.Marshal(&colmetrics.ExportMetricsServiceRequest{ResourceMetrics: []*metricpb.ResourceMetrics{rm}})
	require.NoError(t, err)
	assert.Equal(t, want, b)
}

// A response's partial success is read as protobuf reads it: a message
// seen twice merges, the last value of each field winning; unknown fields
// are skipped; a cut message is an error.
func TestPartialSuccess(t *testing.T) {
	msg := func(ps *colmetrics.ExportMetricsPartialSuccess) []byte {
		b, err := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{PartialSuccess: ps})
		require.NoError(t, err)
		return b
	}
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 7)
	cases := []struct {
		name     string
		body     []byte
		rejected int64
		msg      string
		err      bool
	}{
		{name: "empty", body: nil},
		{name: "none", body: msg(nil)},
		{name: "both", body: msg(&colmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: 2, ErrorMessage: "no"}), rejected: 2, msg: "no"},
		{name: "merged", body: append(msg(&colmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: 2, ErrorMessage: "first"}),
			msg(&colmetrics.ExportMetricsPartialSuccess{ErrorMessage: "last"})...), rejected: 2, msg: "last"},
		{name: "the last count wins", body: append(msg(&colmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: 2}),
			msg(&colmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: 5})...), rejected: 5},
		{name: "a field of another wire type is unknown",
			body: protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
				protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("x")))},
		{name: "unknown fields", body: append(append([]byte(nil), unknown...), msg(&colmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: 1})...), rejected: 1},
		{name: "cut", body: msg(&colmetrics.ExportMetricsPartialSuccess{RejectedDataPoints: 1, ErrorMessage: "no"})[:4], err: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, m, err := partialSuccess(tc.body)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.rejected, n)
			assert.Equal(t, tc.msg, m)
			if tc.body != nil {
				var want colmetrics.ExportMetricsServiceResponse
				require.NoError(t, proto.Unmarshal(tc.body, &want))
				assert.Equal(t, want.GetPartialSuccess().GetRejectedDataPoints(), n, "as protobuf reads it")
				assert.Equal(t, want.GetPartialSuccess().GetErrorMessage(), m, "as protobuf reads it")
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "0": 0, "2": 2 * time.Second, " 3 ": 3 * time.Second, "-1": 0, "soon": 0,
		"99999999999999999":             24 * time.Hour,
		"Sat, 28 Nov 2026 05:00:07 GMT": 7 * time.Second,
		"Sat, 28 Nov 2026 04:59:00 GMT": 0,
	} {
		assert.Equal(t, want, retryAfter(v, now), "%q", v)
	}
}
