package testenv

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The emulator answers a function's error as it answers a response, 200
// with the body: only an error document in the shape the Runtime API
// takes is read as an error, so that no answer of the sweep is.
func TestErrorDocument(t *testing.T) {
	for _, tc := range []struct {
		name, body, typ string
		isError         bool
	}{
		{"aws-lambda-go's error", `{"errorMessage":"boom","errorType":"sweepError"}`, "sweepError", true},
		{"a panic, with its stack", `{"errorMessage":"boom","errorType":"string","stackTrace":[{"path":"main.go","line":1}]}`, "string", true},
		{"the sweep's summary", `{"mode":"sweep","status":0,"results":{}}`, "", false},
		{"a summary that quotes an error type", `{"status":1,"errorType":"x","errorMessage":"y","results":{}}`, "", false},
		{"no type", `{"errorMessage":"boom"}`, "", false},
		{"an empty type", `{"errorMessage":"boom","errorType":""}`, "", false},
		{"no message", `{"errorType":"sweepError"}`, "", false},
		{"not an object", `"boom"`, "", false},
		{"not JSON", `Task timed out after 1.00 seconds`, "", false},
		{"nothing", ``, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			typ, ok := errorDocument([]byte(tc.body))
			assert.Equal(t, tc.isError, ok)
			assert.Equal(t, tc.typ, typ)
		})
	}
}
