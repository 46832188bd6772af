package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The releases whose binaries `make prometheus-tools` builds into
// .cache/bin (mk/prometheus.mk), as tools/prometheus and tools/pushgateway
// pin them: what the tests' alerts and pushes were checked against.
const (
	PrometheusVersion  = "3.16.0"
	PushgatewayVersion = "1.11.0"
)

// RequirePrometheusTool returns the path of one of the binaries `make
// prometheus-tools` builds, named as in .cache/bin. Without it the test
// fails naming the make target, or skips under -short, as the other
// built binaries do: a test that quietly does not run proves nothing.
func RequirePrometheusTool(t testing.TB, name string) string {
	t.Helper()
	bin, err := prometheusTool(name)
	if err != nil {
		if testing.Short() {
			t.Skipf("%v; `make test` runs this", err)
		}
		t.Fatal(err)
	}
	return bin
}

// prometheusTool finds one of the binaries `make prometheus-tools` builds.
func prometheusTool(name string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, ".cache", "bin", name)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s is not built: run `make prometheus-tools` (builds %s, see mk/prometheus.mk): %w", name, bin, err)
	}
	return bin, nil
}

// StartPushgateway runs the real Pushgateway on a free loopback port, in
// memory (no persistence file), and returns its URL. It is stopped when
// the test ends; a failed test gets the end of its log.
func StartPushgateway(t testing.TB) string {
	t.Helper()
	bin := RequirePrometheusTool(t, "pushgateway")
	return startDaemon(t, "pushgateway", bin, func(addr string) ([]string, error) {
		return []string{"--web.listen-address=" + addr, "--log.level=debug"}, nil
	})
}

// StartPrometheus runs the real Prometheus on a free loopback port and
// returns its URL. It scrapes the Pushgateway at pushgatewayHostPort every
// second with honor_labels: true (so a pushed series keeps the job and
// instance of its group, as a production scrape of a Pushgateway must
// be configured), evaluates rulesFile every second (none when empty), and
// keeps its TSDB in the test's temporary directory. It is stopped when the
// test ends; a failed test gets the end of its log.
func StartPrometheus(t testing.TB, pushgatewayHostPort, rulesFile string) string {
	t.Helper()
	bin := RequirePrometheusTool(t, "prometheus")
	args, err := prometheusArgs(t.TempDir(), pushgatewayHostPort, rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, "prometheus", bin, args)
}

// prometheusArgs writes Prometheus's configuration into dir (see
// StartPrometheus) and returns its command line for a listen address.
func prometheusArgs(dir, pushgatewayHostPort, rulesFile string) (func(addr string) ([]string, error), error) {
	var rules string
	if rulesFile != "" {
		abs, err := filepath.Abs(rulesFile)
		if err != nil {
			return nil, fmt.Errorf("prometheus: rules file %s: %w", rulesFile, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("prometheus: rules file: %w", err)
		}
		// JSON strings are YAML strings: the path is quoted whatever it
		// holds.
		q, _ := json.Marshal(abs)
		rules = "rule_files:\n  - " + string(q) + "\n"
	}
	target, _ := json.Marshal(pushgatewayHostPort)
	config := "global:\n" +
		"  scrape_interval: 1s\n" +
		"  scrape_timeout: 1s\n" +
		"  evaluation_interval: 1s\n" +
		rules +
		"scrape_configs:\n" +
		"  - job_name: pushgateway\n" +
		"    honor_labels: true\n" +
		"    static_configs:\n" +
		"      - targets: [" + string(target) + "]\n"
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("prometheus: write its config: %w", err)
	}
	return func(addr string) ([]string, error) {
		data, err := os.MkdirTemp(dir, "tsdb")
		if err != nil {
			return nil, fmt.Errorf("prometheus: TSDB directory: %w", err)
		}
		return []string{
			"--config.file=" + configPath,
			"--storage.tsdb.path=" + data,
			"--web.listen-address=" + addr,
			// OTLP/HTTP at /api/v1/otlp/v1/metrics: the reaper's other
			// sink lands in the same Prometheus.
			"--web.enable-otlp-receiver",
			"--log.level=debug",
		}, nil
	}, nil
}

// Monitoring is a real Pushgateway and a real Prometheus scraping it and
// evaluating a rule file, for a program (the demo) rather than a test.
type Monitoring struct {
	Pushgateway, Prometheus string
	daemons                 []*daemon
}

// LaunchMonitoring starts both, with Prometheus's data under dir.
func LaunchMonitoring(dir, rulesFile string) (*Monitoring, error) {
	m := &Monitoring{}
	pgwBin, err := prometheusTool("pushgateway")
	if err != nil {
		return nil, err
	}
	promBin, err := prometheusTool("prometheus")
	if err != nil {
		return nil, err
	}
	d, u, err := launchDaemon("pushgateway", pgwBin, dir, func(addr string) ([]string, error) {
		return []string{"--web.listen-address=" + addr}, nil
	})
	if err != nil {
		return nil, err
	}
	m.Pushgateway, m.daemons = u, append(m.daemons, d)
	args, err := prometheusArgs(dir, strings.TrimPrefix(u, "http://"), rulesFile)
	if err == nil {
		d, u, err = launchDaemon("prometheus", promBin, dir, args)
	}
	if err != nil {
		m.Stop()
		return nil, err
	}
	m.Prometheus, m.daemons = u, append(m.daemons, d)
	return m, nil
}

// Stop ends both.
func (m *Monitoring) Stop() {
	for _, d := range m.daemons {
		d.stop()
	}
}

// daemon is one of the Prometheus tools, running.
type daemon struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error
}

// stop ends the process, SIGTERM then SIGKILL after ten seconds; it is
// safe to call more than once.
func (d *daemon) stop() {
	select {
	case <-d.exited:
		return
	default:
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
}

// startDaemon runs bin with the arguments args gives for a free loopback
// address, waits for its /-/ready, and returns its URL. A free port can be
// taken between finding it and the process listening on it; the process
// then exits at once, and another port is tried.
func startDaemon(t testing.TB, name, bin string, args func(addr string) ([]string, error)) string {
	t.Helper()
	d, u, err := launchDaemon(name, bin, t.TempDir(), args)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("%s log, its last lines:\n%s", name, tail(d.out.String(), 40))
		}
	})
	return u
}

// launchDaemon is startDaemon without a test: the caller stops the daemon.
func launchDaemon(name, bin, home string, args func(addr string) ([]string, error)) (*daemon, string, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freeLoopbackPort()
		if err != nil {
			return nil, "", err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		a, err := args(addr)
		if err != nil {
			return nil, "", err
		}
		d := &daemon{cmd: exec.Command(bin, a...), out: &syncBuffer{}, exited: make(chan struct{})}
		d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
		d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
		// Dies with the process that started it, however that ends.
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := d.cmd.Start(); err != nil {
			return nil, "", fmt.Errorf("start %s: %w", name, err)
		}
		go func() {
			d.err = d.cmd.Wait()
			close(d.exited)
		}()
		u := "http://" + addr
		if err := waitReady(u, d.exited, 30*time.Second); err != nil {
			d.stop()
			lastErr = fmt.Errorf("%s on %s: %w\n%s", name, addr, err, tail(d.out.String(), 40))
			continue
		}
		return d, u, nil
	}
	return nil, "", lastErr
}

// waitReady polls the /-/ready endpoint both tools serve until it answers
// 200, the process exits, or the time is up.
func waitReady(u string, exited <-chan struct{}, within time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(within)
	for {
		select {
		case <-exited:
			return errors.New("exited before it was ready")
		default:
		}
		if resp, err := hc.Get(u + "/-/ready"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PromSample is one sample of a query's answer.
type PromSample struct {
	Labels map[string]string
	Value  float64
}

// PromAlert is one alert of Prometheus's /api/v1/alerts: pending or
// firing.
type PromAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// promAnswer is the envelope of every answer of Prometheus's HTTP API.
type promAnswer struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// promGet sends a GET to Prometheus's HTTP API and returns the answer's
// data, or its error.
func promGet(ctx context.Context, base, path string, query url.Values) (json.RawMessage, error) {
	u := base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("ask prometheus %s: %w", path, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ask prometheus %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read prometheus's answer to %s: %w", path, err)
	}
	var a promAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, fmt.Errorf("prometheus's answer to %s (HTTP %d) is not its API's JSON: %w: %s", path, resp.StatusCode, err, bytes.TrimSpace(body))
	}
	if a.Status != "success" {
		return nil, fmt.Errorf("prometheus answered %s with %s (HTTP %d): %s: %s", path, a.Status, resp.StatusCode, a.ErrorType, a.Error)
	}
	return a.Data, nil
}

// PromQuery evaluates expr now with Prometheus's /api/v1/query and returns
// the samples of its answer: a vector's, or a scalar's as one sample
// without labels.
func PromQuery(ctx context.Context, promURL, expr string) ([]PromSample, error) {
	data, err := promGet(ctx, promURL, "/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", expr, err)
	}
	var r struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("query %q: read its data: %w", expr, err)
	}
	switch r.ResultType {
	case "vector":
		var v []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return nil, fmt.Errorf("query %q: read its vector: %w", expr, err)
		}
		out := make([]PromSample, 0, len(v))
		for _, s := range v {
			f, err := promValue(s.Value)
			if err != nil {
				return nil, fmt.Errorf("query %q: %w", expr, err)
			}
			out = append(out, PromSample{Labels: s.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var s [2]any
		if err := json.Unmarshal(r.Result, &s); err != nil {
			return nil, fmt.Errorf("query %q: read its scalar: %w", expr, err)
		}
		f, err := promValue(s)
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", expr, err)
		}
		return []PromSample{{Labels: map[string]string{}, Value: f}}, nil
	default:
		return nil, fmt.Errorf("query %q: a %s answer; PromQuery reads vectors and scalars", expr, r.ResultType)
	}
}

// promValue reads the [time, "value"] pair Prometheus answers a sample with.
func promValue(pair [2]any) (float64, error) {
	s, ok := pair[1].(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", pair[1])
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("sample value %q: %w", s, err)
	}
	return f, nil
}

// PromAlerts returns the alerts Prometheus holds now (/api/v1/alerts),
// pending and firing.
func PromAlerts(ctx context.Context, promURL string) ([]PromAlert, error) {
	data, err := promGet(ctx, promURL, "/api/v1/alerts", nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Alerts []PromAlert `json:"alerts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read prometheus's alerts: %w", err)
	}
	return r.Alerts, nil
}

// PromAlertRule is one alerting rule of Prometheus's /api/v1/rules, with
// its state: inactive, pending or firing.
type PromAlertRule struct {
	Name  string  `json:"name"`
	State string  `json:"state"`
	For   float64 `json:"duration"`
}

// PromAlertRules lists every alerting rule Prometheus evaluates.
func PromAlertRules(ctx context.Context, promURL string) ([]PromAlertRule, error) {
	data, err := promGet(ctx, promURL, "/api/v1/rules", url.Values{"type": {"alert"}})
	if err != nil {
		return nil, err
	}
	var r struct {
		Groups []struct {
			Rules []PromAlertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("read prometheus's rules: %w", err)
	}
	var out []PromAlertRule
	for _, g := range r.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// WaitPromQuery evaluates expr every 200 ms until done accepts its
// samples, and returns them; or, once ctx ends, the last samples and an
// error saying what was last seen. Scrapes and rule evaluations land a
// second apart, so a test waits for what it expects rather than sleeping.
func WaitPromQuery(ctx context.Context, promURL, expr string, done func([]PromSample) bool) ([]PromSample, error) {
	var last []PromSample
	var lastErr error
	for {
		s, err := PromQuery(ctx, promURL, expr)
		if err == nil && done(s) {
			return s, nil
		}
		last, lastErr = s, err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("query %q: not as expected before %w; last answer %v (error %v)", expr, ctx.Err(), last, lastErr) //nolint:errorlint // the timeout is the cause; the last answer's error, nil when it was only not as expected, is context
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitPromAlerts is WaitPromQuery for /api/v1/alerts.
func WaitPromAlerts(ctx context.Context, promURL string, done func([]PromAlert) bool) ([]PromAlert, error) {
	var last []PromAlert
	var lastErr error
	for {
		a, err := PromAlerts(ctx, promURL)
		if err == nil && done(a) {
			return a, nil
		}
		last, lastErr = a, err
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("alerts: not as expected before %w; last answer %v (error %v)", ctx.Err(), last, lastErr) //nolint:errorlint // the timeout is the cause; the last answer's error, nil when it was only not as expected, is context
		case <-time.After(200 * time.Millisecond):
		}
	}
}
