package fleet

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseJobRef(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Job
		err  bool
	}{
		{in: "acme/api/123", want: Job{Owner: "acme", Repo: "api", RunID: 123}},
		{in: "acme/api.go/123/456", want: Job{Owner: "acme", Repo: "api.go", RunID: 123, JobID: 456}},
		{in: "Acme-Corp/my_repo/9223372036854775807", want: Job{Owner: "Acme-Corp", Repo: "my_repo", RunID: 9223372036854775807}},
		{in: "", err: true},
		{in: "acme/api", err: true},
		{in: "acme/api/123/456/789", err: true},
		{in: "acme/../123", err: true},
		{in: "../api/123", err: true},
		{in: "acme/api/0", err: true},
		{in: "acme/api/-1", err: true},
		{in: "acme/api/+1", err: true},
		{in: "acme/api/0123", err: true},
		{in: "acme/api/12x", err: true},
		{in: "acme/api/9223372036854775808", err: true},
		{in: "acme/api/123/0", err: true},
		{in: "acme/api/123/", err: true},
		{in: "acme/a?b/123", err: true},
		{in: "acme/a%2fb/123", err: true},
		{in: "ac me/api/123", err: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseJobRef(tc.in)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.True(t, got.Known())
		})
	}
}

func TestJobRunURL(t *testing.T) {
	j := Job{Owner: "acme", Repo: "api", RunID: 42}
	assert.Equal(t, "https://github.com/acme/api/actions/runs/42", j.RunURL(""))
	assert.Equal(t, "https://ghe.example.com/acme/api/actions/runs/42", j.RunURL("ghe.example.com"))
	assert.False(t, (*Job)(nil).Known())
	assert.False(t, (&Job{Owner: "acme", Repo: "api"}).Known())
}
