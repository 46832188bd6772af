package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestWriteStatus: a status write is sent until one lands, and an object
// is taken for written only as the server has it, never from the local
// copy a failed attempt set the status on. The attempts are not paused
// here: which of them are sent is what is tested, not when.
func TestWriteStatus(t *testing.T) {
	timedOut := errors.New("etcdserver: request timed out")
	type object struct{ status string }
	tests := []struct {
		name string
		// updates and gets are what each attempt's write and read answer.
		updates     []error
		gets        []error
		serverTakes []bool // whether each update went through anyway
		wantErr     bool
		wantUpdates int
		wantStatus  string
	}{
		{name: "lands at once", updates: []error{nil}, serverTakes: []bool{true}, wantUpdates: 1, wantStatus: "Running"},
		{name: "fails, the read fails too, then it lands", updates: []error{timedOut, nil}, serverTakes: []bool{false, true},
			gets: []error{timedOut, nil}, wantUpdates: 2, wantStatus: "Running"},
		{name: "went through though it answered an error", updates: []error{timedOut}, serverTakes: []bool{true},
			gets: []error{nil}, wantUpdates: 1, wantStatus: "Running"},
		{name: "a lasting refusal", updates: []error{errors.New("forbidden")}, serverTakes: []bool{false},
			wantErr: true, wantUpdates: 1, wantStatus: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			server := &object{}
			updates, gets := 0, 0
			get := func() (*object, error) {
				err := tc.gets[gets]
				gets++
				if err != nil {
					return nil, err
				}
				c := *server
				return &c, nil
			}
			update := func(o *object) error {
				o.status = "Running"
				if tc.serverTakes[updates] {
					server.status = "Running"
				}
				err := tc.updates[updates]
				updates++
				return err
			}
			local := *server
			err := writeStatus(context.Background(), 0, &local, get, func(o *object) bool { return o.status == "Running" }, update)
			if tc.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tc.wantUpdates, updates, "status writes sent")
			assert.Equal(t, tc.wantStatus, server.status, "the server's status")
		})
	}
}
