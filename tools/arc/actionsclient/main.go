// Command actionsclient drives actions-runner-controller's own Actions
// client (package github/actions of the version tools/arc pins) against a
// server, so that test/ghsim can check its simulator against the very code
// ARC's scale-set controllers run, without ARC in the product's go.mod. It
// reads a script from stdin and writes one result per step to stdout, as
// JSON:
//
//	{"configURL": "http://127.0.0.1:PORT/acme", "token": "ghp_...",
//	 "steps": [{"op": "generatejit", "name": "r1", "scaleSetId": 1},
//	           {"op": "get", "id": 1}, {"op": "getByName", "name": "r1"},
//	           {"op": "remove", "id": 1}]}
//
// One client serves every step, as one of ARC's multi-client entries
// does: the first step fetches the registration token and the Actions
// service's admin token, and later steps reuse them. A failed step records
// the error as ARC's controllers see it (an *actions.ActionsError's status
// and exception name) and the script goes on.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/actions/actions-runner-controller/github/actions"
)

type script struct {
	ConfigURL string `json:"configURL"`
	Token     string `json:"token"`
	// RetryMax is the client's retries on a 5xx; ARC's default (4) when nil.
	RetryMax *int   `json:"retryMax"`
	Steps    []step `json:"steps"`
}

type step struct {
	Op         string `json:"op"`
	Name       string `json:"name"`
	ID         int64  `json:"id"`
	ScaleSetID int    `json:"scaleSetId"`
}

type result struct {
	Runner    *actions.RunnerReference `json:"runner,omitempty"`
	JITConfig string                   `json:"jitConfig,omitempty"`
	Error     *stepError               `json:"error,omitempty"`
	// ServiceURL is the Actions service's URL the client holds after the
	// step.
	ServiceURL string `json:"serviceURL"`
}

type stepError struct {
	Message string `json:"message"`
	// Actions is set when the error is an *actions.ActionsError, with its
	// StatusCode and ExceptionName.
	Actions       bool   `json:"actions"`
	StatusCode    int    `json:"statusCode,omitempty"`
	ExceptionName string `json:"exceptionName,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "actionsclient:", err)
		os.Exit(1)
	}
}

func run() error {
	var sc script
	if err := json.NewDecoder(os.Stdin).Decode(&sc); err != nil {
		return fmt.Errorf("read script: %w", err)
	}
	var opts []actions.ClientOption
	if sc.RetryMax != nil {
		opts = append(opts, actions.WithRetryMax(*sc.RetryMax))
	}
	c, err := actions.NewClient(sc.ConfigURL, &actions.ActionsAuth{Token: sc.Token}, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := make([]result, 0, len(sc.Steps))
	for _, s := range sc.Steps {
		var res result
		var err error
		switch s.Op {
		case "generatejit":
			var cfg *actions.RunnerScaleSetJitRunnerConfig
			cfg, err = c.GenerateJitRunnerConfig(ctx, &actions.RunnerScaleSetJitRunnerSetting{Name: s.Name}, s.ScaleSetID)
			if cfg != nil {
				res.Runner, res.JITConfig = cfg.Runner, cfg.EncodedJITConfig
			}
		case "get":
			res.Runner, err = c.GetRunner(ctx, s.ID)
		case "getByName":
			res.Runner, err = c.GetRunnerByName(ctx, s.Name)
		case "remove":
			err = c.RemoveRunner(ctx, s.ID)
		default:
			err = fmt.Errorf("unknown op %q", s.Op)
		}
		if err != nil {
			res.Error = &stepError{Message: err.Error()}
			var ae *actions.ActionsError
			if errors.As(err, &ae) {
				res.Error.Actions, res.Error.StatusCode, res.Error.ExceptionName = true, ae.StatusCode, ae.ExceptionName
			}
		}
		res.ServiceURL = c.ActionsServiceURL
		out = append(out, res)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
