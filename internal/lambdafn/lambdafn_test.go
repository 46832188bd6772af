package lambdafn

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/internal/redact"
	"github.com/runner-reaper/runner-reaper/sweep"
)

// The Lambda's answer quotes the sweep's error, which quotes
// servers; its strings, and the error the runtime reports, are redacted and
// then escaped, so that neither a secret nor a control character, a C1
// escape or a bidirectional override reaches the console raw. The error
// still unwraps to what the sweep returned.
func TestAnswerIsRedactedAndEscaped(t *testing.T) {
	const secret = "ghp_lambdaSECRET0123456789"
	cause := fmt.Errorf("list pods: %w: server said %s", fs.ErrPermission, "Bearer "+secret+"\n\x1b[2J\u202e\u009b")
	res := sweep.Result{Status: sweep.StatusFailed, Err: cause, Stopped: "received \u202eSIGTERM"}
	summary, err := answer(res, redact.New(secret))
	require.Error(t, err)
	assert.ErrorIs(t, err, fs.ErrPermission)
	want := `list pods: permission denied: server said Bearer [REDACTED]\n\x1b[2J\u202e\u009b`
	assert.Equal(t, "sweep could not observe or act: "+want, err.Error())
	assert.Equal(t, want, summary["error"])
	assert.Equal(t, `received \u202eSIGTERM`, summary["stopped"])

	b, jerr := json.Marshal(summary)
	require.NoError(t, jerr)
	for _, raw := range []string{"\u202e", "\u009b", secret} {
		assert.NotContains(t, string(b), raw)
	}
	var again map[string]any
	require.NoError(t, json.Unmarshal(b, &again))
	assert.Equal(t, want, again["error"])
	assert.False(t, errors.Is(err, fs.ErrNotExist))
}
