package fleet

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseScopeAccepts(t *testing.T) {
	cases := []struct {
		in   string
		want Scope
	}{
		{"org:acme", Scope{Kind: OrgScope, Name: "acme"}},
		{" org:Acme-Corp ", Scope{Kind: OrgScope, Name: "Acme-Corp"}},
		{"repo:acme/web", Scope{Kind: RepoScope, Owner: "acme", Name: "web"}},
		{"repo:octo_acme/.github", Scope{Kind: RepoScope, Owner: "octo_acme", Name: ".github"}},
		{"repo:acme/my.repo_v2-x", Scope{Kind: RepoScope, Owner: "acme", Name: "my.repo_v2-x"}},
		{"enterprise:acme-corp", Scope{Kind: EnterpriseScope, Name: "acme-corp"}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseScope(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			again, err := ParseScope(got.String())
			require.NoError(t, err, "a scope's own form parses back")
			assert.Equal(t, got, again)
		})
	}
}

// Scope names end up in request paths: a dot segment, a slash, an escape or
// a control character would send a request somewhere no scope is.
func TestParseScopeRefusesHostileNames(t *testing.T) {
	cases := map[string]string{
		"org:..":                          "must start with a letter or digit",
		"org:.":                           "must start with a letter or digit",
		"repo:../..":                      "owner must start",
		"repo:acme/..":                    "path segment",
		"repo:acme/.":                     "path segment",
		"repo:acme/web/extra":             "'/'",
		"repo:acme":                       "repo:OWNER/NAME",
		"repo:/web":                       "owner must be 1 to",
		"repo:acme/":                      "repository name must be 1 to",
		"org:acme/web":                    "'/'",
		"org:%2e%2e":                      "must start with a letter or digit",
		"org:ac%2Fme":                     "'%'",
		"org:acme?x=1":                    "'?'",
		"org:acme#frag":                   "'#'",
		"org:ac me":                       "' '",
		"org:ac\x00me":                    "'\\x00'",
		"org:-acme":                       "must start with a letter or digit",
		"org:acmé":                        "'é'",
		"enterprise:acme_corp":            "'_'",
		"enterprise:..":                   "must start",
		"org:" + strings.Repeat("a", 101): "1 to 100",
		"team:acme":                       "unknown kind",
		"acme":                            "not KIND:NAME",
		"org:":                            "not KIND:NAME",
	}
	for in, want := range cases {
		t.Run(in, func(t *testing.T) {
			_, err := ParseScope(in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), want)
		})
	}
}
