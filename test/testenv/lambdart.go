package testenv

// A small implementation of the AWS Lambda Runtime API, so that tests run the
// real compiled `bootstrap` as a process the way Lambda runs it: the process
// polls for the next invocation, receives the payload with its deadline,
// request id, function ARN and trace id in headers, and posts a response or
// an error. A process that keeps running between invocations is a warm start.
//
// Runtime API reference:
// https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html

import (
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
	"time"
)

const (
	runtimeAPIPrefix = "/2018-06-01/runtime/"

	// FunctionARN is the Lambda-Runtime-Invoked-Function-Arn every
	// invocation carries.
	FunctionARN = "arn:aws:lambda:eu-west-1:123456789012:function:runner-reaper"
	// FunctionName is AWS_LAMBDA_FUNCTION_NAME in StartProcess.
	FunctionName = "runner-reaper"

	// lateGrace is how long Invoke keeps waiting past the deadline, so that
	// a response that arrives late is still reported (as ErrTimedOut, with
	// the response) rather than lost.
	lateGrace = 2 * time.Second
)

var (
	// ErrTimedOut: the function did not respond before the invocation's
	// deadline (Lambda's "Task timed out"). The Invocation returned with it
	// holds the late response or error, if one came within a short grace.
	ErrTimedOut = errors.New("lambda runtime: task timed out: no response before the deadline")
	// ErrInitFailed: the function posted to /runtime/init/error.
	ErrInitFailed = errors.New("lambda runtime: the function reported an init error")
	// ErrProcessExited: the process started with StartProcess exited while
	// an invocation was waiting for it.
	ErrProcessExited = errors.New("lambda runtime: the function process exited")
	// ErrClosed: the runtime was closed.
	ErrClosed = errors.New("lambda runtime: closed")
)

// Invocation is one invocation as the function answered it.
type Invocation struct {
	RequestID string
	// Response is the body posted to /invocation/{id}/response, nil if the
	// function posted an error.
	Response []byte
	// Error is the body posted to /invocation/{id}/error (aws-lambda-go
	// posts {"errorMessage":...,"errorType":...}).
	Error []byte
	// ErrorType is the Lambda-Runtime-Function-Error-Type header, or the
	// body's errorType when the header is absent (aws-lambda-go sends none).
	ErrorType string
	// Deadline is what Lambda-Runtime-Deadline-Ms said: the moment the
	// invocation was handed to the function plus its timeout.
	Deadline time.Time
	// Started is when the function received the invocation (its /next
	// returned); Finished when its response or error arrived.
	Started, Finished time.Time
	// ContentType is the Content-Type of the response or error post.
	ContentType string
}

// InitError is what the function posted to /runtime/init/error.
type InitError struct {
	Body      []byte
	ErrorType string
}

type invocation struct {
	id       string
	payload  []byte
	timeout  time.Duration
	picked   chan struct{} // closed when /next hands it out
	done     chan struct{} // closed when result is set
	mu       sync.Mutex
	result   Invocation
	finished bool
}

// Runtime is a Lambda Runtime API on 127.0.0.1. One function process at a
// time polls it, as in one Lambda execution environment.
type Runtime struct {
	ln     net.Listener
	srv    *http.Server
	queue  chan *invocation
	closed chan struct{}
	once   sync.Once

	mu        sync.Mutex
	inflight  map[string]*invocation
	initErr   *InitError
	initFail  chan struct{}
	nextCalls int
	proc      *Process
}

// StartRuntime serves the Runtime API on a free port of 127.0.0.1.
func StartRuntime() (*Runtime, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lambda runtime: listen: %w", err)
	}
	r := &Runtime{
		ln:       ln,
		queue:    make(chan *invocation, 64),
		closed:   make(chan struct{}),
		inflight: map[string]*invocation{},
		initFail: make(chan struct{}),
	}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// Addr is host:port, the value of AWS_LAMBDA_RUNTIME_API.
func (r *Runtime) Addr() string { return r.ln.Addr().String() }

// NextCalls counts the function's GET /invocation/next requests so far.
func (r *Runtime) NextCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nextCalls
}

// InitError is what the function posted to /runtime/init/error, or nil.
func (r *Runtime) InitError() *InitError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.initErr
}

// Close stops serving; a blocked /next returns and waiting Invokes fail
// with ErrClosed. It does not stop a process: Process.Stop does.
func (r *Runtime) Close() {
	r.once.Do(func() {
		close(r.closed)
		_ = r.srv.Close()
	})
}

// Invoke queues one invocation with payload and waits until the function
// responds or reports an error. The deadline (Lambda-Runtime-Deadline-Ms)
// is set when the function picks the invocation up: then plus timeout, as
// Lambda counts a function's timeout from the start of the invocation.
//
// The error is ErrTimedOut when no answer came before the deadline (the
// Invocation then holds a late answer if one came within a short grace),
// ErrInitFailed, ErrProcessExited, ErrClosed, or ctx's error. A function
// error is not an error of Invoke: it is in Invocation.Error.
func (r *Runtime) Invoke(ctx context.Context, payload []byte, timeout time.Duration) (Invocation, error) {
	if timeout <= 0 {
		return Invocation{}, errors.New("lambda runtime: Invoke needs a positive timeout")
	}
	inv := &invocation{
		id:      newRequestID(),
		payload: append([]byte(nil), payload...),
		timeout: timeout,
		picked:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	r.mu.Lock()
	r.inflight[inv.id] = inv
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.inflight, inv.id)
		r.mu.Unlock()
	}()

	select {
	case r.queue <- inv:
	case <-r.closed:
		return Invocation{RequestID: inv.id}, ErrClosed
	case <-ctx.Done():
		return Invocation{RequestID: inv.id}, ctx.Err()
	}

	// Wait for the function to pick it up.
	exited := r.procExited()
	select {
	case <-inv.picked:
	case <-inv.done: // answered before /next returned: cannot happen, but harmless
	case <-r.initFail:
		return inv.snapshot(), r.initFailure()
	case <-exited:
		return inv.snapshot(), r.exitFailure()
	case <-r.closed:
		return inv.snapshot(), ErrClosed
	case <-ctx.Done():
		return inv.snapshot(), ctx.Err()
	}

	deadline := inv.snapshot().Deadline
	exited = r.procExited()
	late := time.NewTimer(time.Until(deadline) + lateGrace)
	defer late.Stop()
	select {
	case <-inv.done:
	case <-late.C:
		return inv.snapshot(), ErrTimedOut
	case <-r.initFail:
		return inv.snapshot(), r.initFailure()
	case <-exited:
		// An answer posted just before the exit (a panic's error) counts.
		select {
		case <-inv.done:
		default:
			return inv.snapshot(), r.exitFailure()
		}
	case <-r.closed:
		return inv.snapshot(), ErrClosed
	case <-ctx.Done():
		return inv.snapshot(), ctx.Err()
	}
	res := inv.snapshot()
	if res.Finished.After(res.Deadline) {
		return res, ErrTimedOut
	}
	return res, nil
}

func (inv *invocation) snapshot() Invocation {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.result
}

func (r *Runtime) initFailure() error {
	if ie := r.InitError(); ie != nil {
		return fmt.Errorf("%w: %s: %s", ErrInitFailed, ie.ErrorType, ie.Body)
	}
	return ErrInitFailed
}

// procExited is the exit channel of the attached process, or nil (a nil
// channel never fires).
func (r *Runtime) procExited() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return nil
	}
	return r.proc.exited
}

func (r *Runtime) exitFailure() error {
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p == nil {
		return ErrProcessExited
	}
	return fmt.Errorf("%w (%v); stderr:\n%s", ErrProcessExited, p.ExitErr(), p.Stderr())
}

func (r *Runtime) serve(w http.ResponseWriter, req *http.Request) {
	path, ok := strings.CutPrefix(req.URL.Path, runtimeAPIPrefix)
	if !ok {
		apiError(w, http.StatusNotFound, "UnknownPath", req.URL.Path)
		return
	}
	switch {
	case path == "invocation/next" && req.Method == http.MethodGet:
		r.next(w, req)
	case path == "init/error" && req.Method == http.MethodPost:
		r.postInitError(w, req)
	case strings.HasPrefix(path, "invocation/") && req.Method == http.MethodPost:
		id, kind, ok := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		if !ok || id == "" || (kind != "response" && kind != "error") {
			apiError(w, http.StatusNotFound, "UnknownPath", req.URL.Path)
			return
		}
		r.postResult(w, req, id, kind == "error")
	default:
		apiError(w, http.StatusNotFound, "UnknownPath", req.Method+" "+req.URL.Path)
	}
}

// next blocks until an invocation is queued, then hands it out with
// Lambda's headers.
func (r *Runtime) next(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.nextCalls++
	r.mu.Unlock()
	var inv *invocation
	for inv == nil {
		select {
		case inv = <-r.queue:
		case <-req.Context().Done():
			return
		case <-r.closed:
			apiError(w, http.StatusInternalServerError, "ServiceException", "runtime closed")
			return
		}
		// Skip an invocation whose Invoke gave up (its context ended)
		// before the function asked for it.
		r.mu.Lock()
		if r.inflight[inv.id] == nil {
			inv = nil
		}
		r.mu.Unlock()
	}
	now := time.Now()
	deadline := now.Add(inv.timeout).Truncate(time.Millisecond)
	inv.mu.Lock()
	inv.result = Invocation{RequestID: inv.id, Deadline: deadline, Started: now}
	inv.mu.Unlock()
	close(inv.picked)

	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
	h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(deadline.UnixMilli(), 10))
	h.Set("Lambda-Runtime-Invoked-Function-Arn", FunctionARN)
	h.Set("Lambda-Runtime-Trace-Id", newTraceID(now))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(inv.payload)
}

func (r *Runtime) postResult(w http.ResponseWriter, req *http.Request, id string, isError bool) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", "read body: "+err.Error())
		return
	}
	r.mu.Lock()
	inv := r.inflight[id]
	r.mu.Unlock()
	if inv == nil {
		apiError(w, http.StatusBadRequest, "InvalidRequestID", "no invocation "+id)
		return
	}
	select {
	case <-inv.picked:
	default:
		apiError(w, http.StatusBadRequest, "InvalidRequestID", "invocation "+id+" was not handed out")
		return
	}
	inv.mu.Lock()
	if inv.finished {
		inv.mu.Unlock()
		apiError(w, http.StatusBadRequest, "InvalidStateTransition", "invocation "+id+" was already answered")
		return
	}
	inv.finished = true
	inv.result.Finished = time.Now()
	inv.result.ContentType = req.Header.Get("Content-Type")
	if isError {
		inv.result.Error = body
		inv.result.ErrorType = errorType(req, body)
	} else {
		inv.result.Response = body
	}
	inv.mu.Unlock()
	close(inv.done)
	accepted(w)
}

func (r *Runtime) postInitError(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", "read body: "+err.Error())
		return
	}
	r.mu.Lock()
	first := r.initErr == nil
	if first {
		r.initErr = &InitError{Body: body, ErrorType: errorType(req, body)}
	}
	r.mu.Unlock()
	if first {
		close(r.initFail)
	}
	accepted(w)
}

// errorType is the Lambda-Runtime-Function-Error-Type header, else the
// errorType of the body, which is what aws-lambda-go sends.
func errorType(req *http.Request, body []byte) string {
	if t := req.Header.Get("Lambda-Runtime-Function-Error-Type"); t != "" {
		return t
	}
	var e struct {
		ErrorType string `json:"errorType"`
	}
	if json.Unmarshal(body, &e) == nil {
		return e.ErrorType
	}
	return ""
}

func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"status":"OK"}`))
}

func apiError(w http.ResponseWriter, code int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]string{"errorType": typ, "errorMessage": msg})
	_, _ = w.Write(b)
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func newTraceID(now time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", now.Unix(), hex.EncodeToString(b[:]), hex.EncodeToString(b[:8]))
}

// ---------------------------------------------------------------------------
// The function process

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

// Process is a function process polling a Runtime: one Lambda execution
// environment, warm between invocations.
type Process struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	exited         chan struct{}
	exitErr        error
}

// LambdaEnv is the environment Lambda gives a provided.al2023 function,
// for bin polling this runtime. StartProcess adds it under the caller's.
func (r *Runtime) LambdaEnv(bin string) map[string]string {
	return map[string]string{
		"AWS_LAMBDA_RUNTIME_API":          r.Addr(),
		"AWS_LAMBDA_FUNCTION_NAME":        FunctionName,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
		"AWS_LAMBDA_LOG_FORMAT":           "JSON",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + FunctionName,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "2026/01/01/[$LATEST]0123456789abcdef",
		"_HANDLER":                        filepath.Base(bin),
		"LAMBDA_TASK_ROOT":                filepath.Dir(bin),
		"LAMBDA_RUNTIME_DIR":              filepath.Dir(bin),
		"TZ":                              ":UTC",
	}
}

// StartProcess starts bin as this runtime's function process, with exactly
// LambdaEnv, then env on top (PATH and HOME too, nothing else of the test
// process's environment). Stop it with Process.Stop. While it runs, an
// Invoke waiting on it fails with ErrProcessExited if it exits.
func (r *Runtime) StartProcess(bin string, env map[string]string) (*Process, error) {
	all := r.LambdaEnv(bin)
	all["PATH"] = os.Getenv("PATH")
	all["HOME"] = os.TempDir()
	for k, v := range env {
		all[k] = v
	}
	p := &Process{cmd: exec.Command(bin), exited: make(chan struct{})}
	for k, v := range all {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Dir = filepath.Dir(bin)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitErr is the process's exit (nil for status 0), once Exited is closed.
func (p *Process) ExitErr() error {
	select {
	case <-p.exited:
		return p.exitErr
	default:
		return nil
	}
}

// Stdout and Stderr are what the process has written so far.
func (p *Process) Stdout() string { return p.stdout.String() }
func (p *Process) Stderr() string { return p.stderr.String() }

// Stop ends the process as Lambda ends an execution environment: SIGTERM,
// then SIGKILL after a short grace. It returns once the process is gone.
func (p *Process) Stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(2 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

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
