// Command echo is the tiny Lambda function that rie_test.go runs under AWS's
// Runtime Interface Emulator: it answers with the payload, what the invocation's
// context says (request id, function ARN, deadline, remaining time) and
// what this process has seen (pid, invocation count), so that a test can
// tell a warm start from a cold one. A payload field asks for the other
// paths: "fail" returns an error, "panic" panics, "stop_before_deadline_ms"
// works until that long before the deadline (a handler honouring it), and
// "sleep_ms" overruns whatever the deadline; "say" is written to stdout and
// "complain" to stderr, so that a test can tell whose log a line is.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type request struct {
	Fail                 string `json:"fail"`
	Panic                bool   `json:"panic"`
	StopBeforeDeadlineMS int64  `json:"stop_before_deadline_ms"`
	SleepMS              int64  `json:"sleep_ms"`
	Say                  string `json:"say"`
	Complain             string `json:"complain"`
}

type response struct {
	Payload      json.RawMessage `json:"payload"`
	RequestID    string          `json:"request_id"`
	FunctionARN  string          `json:"function_arn"`
	TraceID      string          `json:"trace_id"`
	DeadlineMS   int64           `json:"deadline_ms"`
	RemainingMS  int64           `json:"remaining_ms"`
	StoppedEarly bool            `json:"stopped_early,omitempty"`
	PID          int             `json:"pid"`
	Invocation   int             `json:"invocation"`
	InitAt       string          `json:"init_at"`
}

// sweepError is the error the failing path returns; its type name is the
// errorType aws-lambda-go reports.
type sweepError struct{ msg string }

func (e *sweepError) Error() string { return e.msg }

var (
	initAt      = time.Now().UTC().Format(time.RFC3339Nano) // once per process: a cold start
	invocations int                                         // survives between invocations: a warm start
)

func handle(ctx context.Context, payload json.RawMessage) (*response, error) {
	invocations++
	var req request
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	if req.Say != "" {
		fmt.Fprintln(os.Stdout, req.Say)
	}
	if req.Complain != "" {
		fmt.Fprintln(os.Stderr, req.Complain)
	}
	if req.Panic {
		panic("echo: asked to panic")
	}
	if req.Fail != "" {
		return nil, &sweepError{msg: req.Fail}
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil, &sweepError{msg: "no deadline on the context"}
	}
	lc, _ := lambdacontext.FromContext(ctx)
	resp := &response{
		Payload:     payload,
		DeadlineMS:  deadline.UnixMilli(),
		RemainingMS: time.Until(deadline).Milliseconds(),
		PID:         os.Getpid(),
		Invocation:  invocations,
		InitAt:      initAt,
	}
	if lc != nil {
		resp.RequestID, resp.FunctionARN = lc.AwsRequestID, lc.InvokedFunctionArn
	}
	resp.TraceID, _ = ctx.Value("x-amzn-trace-id").(string)
	if req.StopBeforeDeadlineMS > 0 {
		stop, cancel := context.WithDeadline(ctx, deadline.Add(-time.Duration(req.StopBeforeDeadlineMS)*time.Millisecond))
		defer cancel()
		<-stop.Done()
		resp.StoppedEarly = true
	}
	if req.SleepMS > 0 {
		time.Sleep(time.Duration(req.SleepMS) * time.Millisecond)
	}
	return resp, nil
}

func main() { lambda.Start(handle) }
