package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseNameSource(t *testing.T) {
	tests := []struct {
		in      string
		want    NameSource
		wantErr string
	}{
		{"", NameSource{From: NameFromPod}, ""},
		{"pod-name", NameSource{From: NameFromPod}, ""},
		{"label:pool/runner", NameSource{From: NameFromLabel, Key: "pool/runner"}, ""},
		{" annotation:pool/runner ", NameSource{From: NameFromAnnotation, Key: "pool/runner"}, ""},
		{"label:", NameSource{}, "is not pod-name"},
		{"env:RUNNER", NameSource{}, "unknown kind"},
		{"podname", NameSource{}, "is not pod-name"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseNameSource(tc.in)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
