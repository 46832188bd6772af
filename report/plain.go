package report

import (
	"errors"
	"strings"

	"github.com/runner-reaper/runner-reaper/internal/config"
	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/internal/safetext"
)

// PlainError is err as the entry points print it in plain text, on stderr
// or as a Lambda's error: redacted by secrets (nil redacts nothing), then
// escaped (package safetext), because its text can quote a server's answer,
// a file's path or a variable's name and a person reads it in a terminal.
// A configuration error keeps the one problem a line that the loader lays
// out: those line breaks are the reaper's own, and each problem is escaped
// on its own, so that a line break from outside cannot add a problem. The
// result unwraps to err, so errors.Is and errors.As see what they saw; a nil
// err stays nil.
func PlainError(err error, secrets *redact.Set) error {
	if err == nil {
		return nil
	}
	line := func(s string) string { return safetext.String(secrets.String(s)) }
	text := err.Error()
	safe := line(text)
	var cfg *config.Error
	if errors.As(err, &cfg) && cfg != nil {
		if before, after, found := strings.Cut(text, cfg.Error()); found {
			problems := make([]config.Problem, len(cfg.Problems))
			for i, p := range cfg.Problems {
				problems[i] = config.Problem{Var: line(p.Var), What: line(p.What), Example: line(p.Example)}
			}
			safe = line(before) + (&config.Error{Problems: problems}).Error() + line(after)
		}
	}
	if safe == text {
		return err
	}
	return &plainError{msg: safe, err: err}
}

// plainError is an error whose text was made safe to print.
type plainError struct {
	msg string
	err error
}

func (e *plainError) Error() string { return e.msg }
func (e *plainError) Unwrap() error { return e.err }
