package testenv

// The Lambda's tests run the compiled `bootstrap` under AWS's own Runtime
// Interface Emulator (aws-lambda-rie, built by `make rie` from the module
// in tools/rie), the program AWS ships in its Lambda base images to run a
// function locally: it starts the bootstrap with the environment Lambda
// gives a function, serves it the Runtime API, and turns each HTTP invoke
// into one invocation with the deadline AWS_LAMBDA_FUNCTION_TIMEOUT sets.
// What this file knows of the emulator comes from its source at the pinned
// version (internal/lambda/rie and internal/lambda/rapidcore):
//
//   - It takes both its addresses as flags, so every emulator here listens
//     on loopback ports of its own and any number run at once: the Runtime
//     API on --runtime-api-address (127.0.0.1:9001 when unset; port 0
//     would be handed to the function before it is bound, so the port is
//     chosen here), the invoke endpoint on
//     --runtime-interface-emulator-address.
//   - The function starts on the first invoke (as an on-demand cold start
//     does), with the emulator's whole environment plus AWS_LAMBDA_RUNTIME_API,
//     and stays up between invokes: a warm start. Each invocation carries
//     the invoke's X-Amzn-RequestId as its request id, and an ARN of the
//     emulator's own region and account; no trace id (X-Ray is not
//     emulated).
//   - AWS_LAMBDA_FUNCTION_TIMEOUT is read in whole seconds (300 when unset).
//     At the timeout the emulator kills the function (SIGKILL) and answers
//     200 "Task timed out after N.00 seconds"; the next invoke starts a new
//     process.
//   - An error the function posts to /invocation/{id}/error is answered 200
//     with that body, exactly as posted and without any header saying it is
//     an error (Lambda's X-Amz-Function-Error is not emulated), and the
//     process stays warm. A function that exits, during its init or an
//     invocation, is answered 502 (with what it posted to
//     /runtime/init/error, or the emulator's own Runtime.ExitError
//     document, or nothing at all) and the next invoke starts a new
//     process; its exit status is said only in the emulator's own log.
//   - The function's stdout and stderr both go to the emulator's stdout,
//     where the emulator also prints its START, END and REPORT lines; the
//     emulator's own log goes to its stderr.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FunctionName is AWS_LAMBDA_FUNCTION_NAME for every emulated function; the
// emulator builds the invoked function's ARN from it (FunctionARN).
const FunctionName = "runner-reaper"

// FunctionARN is the Lambda-Runtime-Invoked-Function-Arn the emulator hands
// the function: its own fixed region and account, and FunctionName.
const FunctionARN = "arn:aws:lambda:us-east-1:012345678912:function:" + FunctionName

// RIEPath is where `make rie` puts the emulator.
func RIEPath(root string) string { return filepath.Join(root, ".cache", "bin", "aws-lambda-rie") }

// BuildLambda builds the main package pkg (relative to the repository root,
// e.g. "./functions/lambda") for this machine into dir/bootstrap, with the
// lambda.norpc tag the release build uses, and returns its path.
func BuildLambda(dir, pkg string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// EmulatorOptions configure one emulated function.
type EmulatorOptions struct {
	// Timeout is the function's timeout, AWS_LAMBDA_FUNCTION_TIMEOUT: whole
	// seconds, as the emulator reads it; 50 s (template.yaml's) when zero.
	Timeout time.Duration
	// Env is the function's own environment (its configuration), on top of
	// what Lambda sets; PATH and HOME are the only other variables of the
	// test process it sees.
	Env map[string]string
}

// Emulator is one aws-lambda-rie process running one function: one Lambda
// execution environment.
type Emulator struct {
	cmd       *exec.Cmd
	invokeURL string
	client    *http.Client
	// Timeout is the function's timeout the emulator was started with.
	Timeout time.Duration
	// invoke serialises invocations: one execution environment handles
	// one at a time.
	invoke sync.Mutex
	out    *emulatorOutput
	stderr *syncBuffer
	exited chan struct{}
	// exitErr is set before exited is closed.
	exitErr error
}

// Invocation is one invocation as the emulator answered it.
type Invocation struct {
	// RequestID is the invocation's request id (X-Amzn-RequestId on the
	// invoke), which the function's context carries.
	RequestID string
	// Status is the invoke's HTTP status: 200, or 502 when the function
	// exited.
	Status int
	// Response is the function's answer; nil unless it answered one.
	Response []byte
	// Error is the error document the function posted ({"errorMessage",
	// "errorType"}), to /invocation/{id}/error or /runtime/init/error; nil
	// for none. The emulator answers a posted error 200 with the body as
	// posted and no header: an answer that is exactly such a document is
	// taken for one.
	Error []byte
	// ErrorType is Error's errorType.
	ErrorType string
	// Exited says the function's process ended during this invocation (or
	// its init) without answering: a crash or an exit. Error holds the
	// error document the emulator answered with, if any; the emulator's
	// log (Emulator.EmulatorLog) says the exit status.
	Exited bool
	// TimedOut says the function did not answer within its timeout: the
	// emulator killed it.
	TimedOut bool
	// Body is the invoke's answer as it came.
	Body []byte
	// Started and Finished bracket the invoke, as the test saw it.
	Started, Finished time.Time
	// Log is what the function wrote (stdout and stderr) during this
	// invocation, without the emulator's own lines.
	Log string
}

// NeedEmulator returns the emulator `make rie` builds. Without it the test
// fails naming the make target, or skips under -short; a test that builds
// what the emulator runs calls it first, so that a skip builds nothing.
func NeedEmulator(t testing.TB) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("find the repository: %v", err)
	}
	rie := RIEPath(root)
	if _, err := os.Stat(rie); err != nil {
		if testing.Short() {
			t.Skipf("AWS's Lambda Runtime Interface Emulator is not built (%s); `make rie` builds it, `make test` runs this", rie)
		}
		t.Fatalf("AWS's Lambda Runtime Interface Emulator is not built: run `make rie` (builds %s from tools/rie): %v", rie, err)
	}
	return rie
}

// StartEmulator runs bin (a compiled bootstrap) under the emulator built
// by `make rie` and returns once the emulator accepts invokes; the function
// itself starts on the first invoke, as a cold start. The emulator is
// stopped when the test ends; a failed test gets the function's and the
// emulator's logs. Without the emulator's binary the test fails naming
// the make target, or skips under -short (NeedEmulator).
func StartEmulator(t testing.TB, bin string, opts EmulatorOptions) *Emulator {
	t.Helper()
	rie := NeedEmulator(t)
	if opts.Timeout == 0 {
		opts.Timeout = 50 * time.Second
	}
	if opts.Timeout < time.Second || opts.Timeout%time.Second != 0 {
		t.Fatalf("the emulator takes AWS_LAMBDA_FUNCTION_TIMEOUT in whole seconds, not %s", opts.Timeout)
	}
	// A port chosen here may be taken before the emulator binds it; the
	// emulator then exits at once, and another pair is tried.
	var lastErr error
	for range 3 {
		e, err := startEmulator(rie, bin, opts)
		if err == nil {
			t.Cleanup(func() {
				e.Stop()
				if t.Failed() {
					t.Logf("function log:\n%s\nemulator log:\n%s", tail(e.out.all(), 60), tail(e.EmulatorLog(), 40))
				}
			})
			return e
		}
		lastErr = err
		if !errors.Is(err, errAddressInUse) {
			break
		}
	}
	t.Fatalf("start the Lambda emulator: %v", lastErr)
	return nil
}

var errAddressInUse = errors.New("address already in use")

func startEmulator(rie, bin string, opts EmulatorOptions) (*Emulator, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	runtimeAPI, invokeAddr := ports[0], ports[1]
	env := map[string]string{
		"PATH":                            os.Getenv("PATH"),
		"HOME":                            os.TempDir(),
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(opts.Timeout / time.Second)),
		"AWS_LAMBDA_FUNCTION_NAME":        FunctionName,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_LAMBDA_LOG_FORMAT":           "JSON",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + FunctionName,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "2026/01/01/[$LATEST]0123456789abcdef",
		"_HANDLER":                        filepath.Base(bin),
		"LAMBDA_TASK_ROOT":                filepath.Dir(bin),
		"TZ":                              ":UTC",
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	// The function writes to this pipe directly, as the emulator hands it
	// its own stdout; the test keeps the write end too, to put markers in
	// the stream (see Emulator.logOf).
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("a pipe for the emulator's output: %w", err)
	}
	cmd := exec.Command(rie,
		"--runtime-api-address", runtimeAPI,
		"--runtime-interface-emulator-address", invokeAddr,
		"--log-level", "info",
		bin)
	cmd.Dir = filepath.Dir(bin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	e := &Emulator{
		cmd:       cmd,
		invokeURL: "http://" + invokeAddr + "/2015-03-31/functions/function/invocations",
		client:    &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
		Timeout:   opts.Timeout,
		out:       newEmulatorOutput(pr, pw),
		stderr:    &syncBuffer{},
		exited:    make(chan struct{}),
	}
	cmd.Stdout, cmd.Stderr = pw, e.stderr
	// Should the test process die first, the emulator still stops its
	// function (it kills it on SIGTERM).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return nil, fmt.Errorf("start %s: %w", rie, err)
	}
	go e.out.read()
	go func() {
		e.exitErr = cmd.Wait()
		close(e.exited)
	}()
	if err := e.awaitListening(runtimeAPI, invokeAddr); err != nil {
		e.Stop()
		if strings.Contains(e.EmulatorLog(), "address already in use") {
			return nil, fmt.Errorf("%w: %w", errAddressInUse, err)
		}
		return nil, err
	}
	return e, nil
}

// freePorts finds n distinct free ports on 127.0.0.1, as host:port.
func freePorts(n int) ([]string, error) {
	var addrs []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port for the emulator: %w", err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// awaitListening waits until both of the emulator's addresses accept
// connections, or it exits.
func (e *Emulator) awaitListening(addrs ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range addrs {
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			select {
			case <-e.exited:
				return fmt.Errorf("the emulator exited while starting (%v):\n%s", e.exitErr, tail(e.EmulatorLog(), 20)) //nolint:errorlint // nil when the emulator exited 0, which %w would print as %!w(<nil>)
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the emulator did not listen on %s within 30s:\n%s", addr, tail(e.EmulatorLog(), 20))
			}
		}
	}
	return nil
}

// ScheduledEvent is an EventBridge "Scheduled Event" as a schedule hands
// it to its target at at: what the function is invoked with every minute.
// The sweep reads nothing of it; it is here so that the function is
// invoked with the shape it meets in AWS, not an empty object.
func ScheduledEvent(at time.Time) []byte {
	b, _ := json.Marshal(map[string]any{
		"version":     "0",
		"id":          newRequestID(),
		"detail-type": "Scheduled Event",
		"source":      "aws.scheduler",
		"account":     "012345678912",
		"time":        at.UTC().Format(time.RFC3339),
		"region":      "us-east-1",
		"resources":   []string{"arn:aws:scheduler:us-east-1:012345678912:schedule/default/" + FunctionName},
		"detail":      map[string]any{},
	})
	return b
}

// InvokeScheduled invokes the function with a ScheduledEvent of now.
func (e *Emulator) InvokeScheduled(ctx context.Context) (Invocation, error) {
	return e.Invoke(ctx, ScheduledEvent(time.Now()))
}

// Invoke invokes the function with payload and waits for its answer: a
// response, an error, a timeout or an exit, each said in the Invocation.
// Its error is for an invoke the emulator did not answer (it exited, or
// ctx ended) or answered with something other than an invocation's answer.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) (Invocation, error) {
	e.invoke.Lock()
	defer e.invoke.Unlock()
	inv := Invocation{RequestID: newRequestID(), Started: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.invokeURL, bytes.NewReader(payload))
	if err != nil {
		return inv, fmt.Errorf("invoke request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Amzn-RequestId", inv.RequestID)
	resp, err := e.client.Do(req)
	if err != nil {
		return inv, fmt.Errorf("invoke the function through the emulator: %w\nemulator log:\n%s", err, tail(e.EmulatorLog(), 20))
	}
	inv.Body, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	inv.Finished = time.Now()
	inv.Status = resp.StatusCode
	if err != nil {
		return inv, fmt.Errorf("read the emulator's answer: %w", err)
	}
	if inv.Log, err = e.logOf(inv.RequestID); err != nil {
		return inv, err
	}
	switch {
	case resp.StatusCode == http.StatusOK && bytes.HasPrefix(inv.Body, []byte("Task timed out after ")):
		inv.TimedOut = true
	case resp.StatusCode == http.StatusOK:
		if typ, ok := errorDocument(inv.Body); ok {
			inv.Error, inv.ErrorType = inv.Body, typ
		} else {
			inv.Response = inv.Body
		}
	case resp.StatusCode == http.StatusBadGateway:
		inv.Exited = true
		if typ, ok := errorDocument(inv.Body); ok {
			inv.Error, inv.ErrorType = inv.Body, typ
		}
	default:
		return inv, fmt.Errorf("the emulator answered %s: %s\nemulator log:\n%s", resp.Status, inv.Body, tail(e.EmulatorLog(), 20))
	}
	return inv, nil
}

// errorDocument says whether b is a Lambda function error, as aws-lambda-go
// and Lambda's Runtime API write one: an object of errorMessage and
// errorType (and a stackTrace after a panic), and nothing else.
func errorDocument(b []byte) (string, bool) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		return "", false
	}
	var typ, msg string
	if json.Unmarshal(doc["errorType"], &typ) != nil || typ == "" || json.Unmarshal(doc["errorMessage"], &msg) != nil {
		return "", false
	}
	for k := range doc {
		if k != "errorType" && k != "errorMessage" && k != "stackTrace" {
			return "", false
		}
	}
	return typ, true
}

// logOf is what the function wrote during the invocation id. The function
// writes into the pipe itself, so its last lines may still be in the pipe
// when the invoke is answered: a marker written now into the same pipe
// comes after everything written before the answer, and once it has been
// read, so has the invocation's output.
func (e *Emulator) logOf(id string) (string, error) {
	end, err := e.out.mark()
	if err != nil {
		return "", err
	}
	all := e.out.all()[:end]
	if i := strings.LastIndex(all, "START RequestId: "+id+" "); i >= 0 {
		all = all[i:]
	}
	return functionLines(all), nil
}

// Log is everything the function has written so far, without the
// emulator's own lines: what Lambda would put in its log group.
func (e *Emulator) Log() string { return functionLines(e.out.all()) }

// EmulatorLog is the emulator's own log (its stderr): init and invoke
// phases, and the function's exits with their status.
func (e *Emulator) EmulatorLog() string { return e.stderr.String() }

// Stop stops the emulator, which kills its function: SIGTERM, then
// SIGKILL after ten seconds. It returns once the emulator is gone and its
// output read; it is safe to call more than once.
func (e *Emulator) Stop() {
	select {
	case <-e.exited:
	default:
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(10 * time.Second):
			_ = e.cmd.Process.Kill()
			<-e.exited
		}
	}
	e.out.close()
}

// functionLines is s without the lines the emulator itself prints among
// the function's output.
func functionLines(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(line, "START RequestId: ") && !strings.HasPrefix(line, "END RequestId: ") &&
			!strings.HasPrefix(line, "REPORT RequestId: ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// emulatorOutput reads the emulator's stdout, the pipe the function writes
// to as well, and takes out the markers the test puts in it.
type emulatorOutput struct {
	r, w *os.File
	done chan struct{} // closed when reading has ended

	mu      sync.Mutex
	text    strings.Builder
	next    int                   // the next marker's number
	waiting map[int]chan struct{} // closed when that marker is read
	at      map[int]int           // where in text a marker was read
}

// markerTag begins a marker line; no function writes it.
const markerTag = "\x1e" + "testenv-rie-marker "

func newEmulatorOutput(r, w *os.File) *emulatorOutput {
	return &emulatorOutput{r: r, w: w, done: make(chan struct{}), waiting: map[int]chan struct{}{}, at: map[int]int{}}
}

func (o *emulatorOutput) read() {
	defer close(o.done)
	br := bufio.NewReader(o.r)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			o.take(line)
		}
		if err != nil {
			return
		}
	}
}

// take adds line to the text, less a marker, which may follow a partial
// line the function left without its newline.
func (o *emulatorOutput) take(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := strings.Index(line, markerTag)
	if i < 0 {
		o.text.WriteString(line)
		return
	}
	o.text.WriteString(line[:i])
	n, err := strconv.Atoi(strings.TrimSpace(line[i+len(markerTag):]))
	if err != nil {
		return
	}
	o.at[n] = o.text.Len()
	if ch, ok := o.waiting[n]; ok {
		close(ch)
		delete(o.waiting, n)
	}
}

// mark writes a marker and returns, once it has been read, how much text
// came before it.
func (o *emulatorOutput) mark() (int, error) {
	o.mu.Lock()
	n := o.next
	o.next++
	ch := make(chan struct{})
	o.waiting[n] = ch
	w := o.w
	o.mu.Unlock()
	if w == nil {
		return 0, errors.New("the emulator's output is closed")
	}
	if _, err := fmt.Fprintf(w, "%s%d\n", markerTag, n); err != nil {
		return 0, fmt.Errorf("mark the emulator's output: %w", err)
	}
	select {
	case <-ch:
	case <-o.done:
		return 0, errors.New("the emulator's output ended before its marker")
	case <-time.After(10 * time.Second):
		return 0, errors.New("the emulator's output was not read to its marker within 10s")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.at[n], nil
}

func (o *emulatorOutput) all() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.text.String()
}

// close drops the test's write end, so that reading ends once the
// emulator and its function have let go of theirs, and ends it anyway
// after five seconds (a function that outlived its emulator).
func (o *emulatorOutput) close() {
	o.mu.Lock()
	w := o.w
	o.w = nil
	o.mu.Unlock()
	if w == nil {
		return
	}
	_ = w.Close()
	select {
	case <-o.done:
	case <-time.After(5 * time.Second):
		_ = o.r.Close()
		<-o.done
	}
	_ = o.r.Close()
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// syncBuffer is a buffer a process writes and tests read at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
