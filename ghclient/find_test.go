package ghclient

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/fleet"
)

func TestFindRunner(t *testing.T) {
	scope := fleet.Scope{Kind: fleet.OrgScope, Name: "acme"}
	cases := []struct {
		name    string
		status  int
		body    string
		want    *fleet.Registration
		wantErr bool
	}{
		{"found", 200, `{"total_count":1,"runners":[{"id":5,"name":"acme-a b","os":"linux","status":"offline","busy":true,"labels":[]}]}`,
			&fleet.Registration{ID: 5, Name: "acme-a b", Busy: true}, false},
		{"absent", 200, `{"total_count":0,"runners":[]}`, nil, false},
		{"short answer is not absence", 200, `{"total_count":1,"runners":[]}`, nil, true},
		{"a body without the list is not absence", 200, `{}`, nil, true},
		{"5xx is not absence", 502, `{"message":"bad gateway"}`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, mux, _ := setup(t, 0)
			mux.HandleFunc("/orgs/acme/actions/runners", func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, "acme-a b", r.URL.Query().Get("name"), "exact name, escaped")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			})
			got, err := c.FindRunner(t.Context(), scope, "acme-a b")
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
