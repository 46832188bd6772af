// Package push sends a sweep's metrics to a Prometheus Pushgateway at the
// end of the sweep: a CronJob lives for one sweep, so nothing could scrape
// it. Each push replaces its group whole (HTTP PUT), so a verdict that no
// longer occurs leaves no stale series behind.
//
// Two groups per instance: job="runner-reaper" holds the last sweep's
// figures, and job="runner-reaper-success" the time of the last sweep that
// exited 0, pushed only by such a sweep, so that a run of failing sweeps
// leaves it in place for the alert on its age.
package push

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/push"

	"github.com/runner-reaper/runner-reaper/metrics"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// Job names of the two groups; the alerts and the dashboard read them.
const (
	Job        = "runner-reaper"
	SuccessJob = "runner-reaper-success"
)

// maxAnswer bounds how much of a Pushgateway's answer is read: client_golang
// reads a refusal's body whole into its error, and a proxy or a hostile
// server could send any amount.
const maxAnswer = 64 << 10

// Pusher pushes to one Pushgateway under one instance.
type Pusher struct {
	url, instance string
	client        *http.Client
}

// New returns a Pusher to the Pushgateway at url, grouping under instance.
// timeout bounds each push, from dialling to the last byte.
func New(url, instance string, timeout time.Duration) *Pusher {
	return &Pusher{url: url, instance: instance, client: Client(timeout)}
}

// Push sends res's figures, and its success when it exited 0.
func (p *Pusher) Push(ctx context.Context, res sweep.Result) error {
	if err := p.put(ctx, Job, metrics.Samples(res)); err != nil {
		return err
	}
	if ok := metrics.SuccessSamples(res); len(ok) > 0 {
		return p.put(ctx, SuccessJob, ok)
	}
	return nil
}

func (p *Pusher) put(ctx context.Context, job string, samples []metrics.Sample) error {
	reg, err := metrics.Registry(samples)
	if err != nil {
		return fmt.Errorf("push metrics to the pushgateway (job %s): %w", job, err)
	}
	err = push.New(p.url, job).Grouping("instance", p.instance).Gatherer(reg).Client(p.client).PushContext(ctx)
	if err != nil {
		return fmt.Errorf("push metrics to the pushgateway (job %s): %w", job, err)
	}
	return nil
}

// Client is the HTTP client of a push: bounded in time and in what it
// reads, and following no redirect. A proxy that answers a PUT with a 302
// to a login page would have it fetched with a GET, whose 200 would report
// a push that stored nothing as done.
func Client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: boundedBody{http.DefaultTransport},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// boundedBody cuts every answer's body at maxAnswer.
type boundedBody struct{ next http.RoundTripper }

func (b boundedBody) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = limited{io.LimitReader(resp.Body, maxAnswer), resp.Body}
	return resp, nil
}

type limited struct {
	io.Reader
	io.Closer
}
