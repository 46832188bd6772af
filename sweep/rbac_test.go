package sweep_test

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runner-reaper/runner-reaper/internal/app"
	"github.com/runner-reaper/runner-reaper/sweep"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

// Safety rule 5: the sweep needs no more than its actions; with any one
// permission taken away it says which action was refused, and never
// deletes what it could not first record or mark.
func TestSafetyRule5LeastPrivilege(t *testing.T) {
	env := plane.Env(t)
	cases := []struct {
		name    string
		drop    []string // permissions taken away, as testenv.Permission names them
		status  sweep.Status
		podGone bool
		want    string // in the logs
	}{
		{"exactly the needed rules: the whole job", nil, sweep.StatusComplete, true, `"result":"deleted"`},
		{"no pod list: the watch-list observes, the whole job", []string{"list pods"}, sweep.StatusComplete, true, `"result":"deleted"`},
		{"no pod watch: the pods are read in pages, the whole job", []string{"watch pods"}, sweep.StatusComplete, true, `pods listed in pages`},
		{"neither pod list nor watch: cannot observe, deletes nothing", []string{"list pods", "watch pods"}, sweep.StatusFailed, false, `observe pods`},
		{"no pod delete: the refusal is an action error", []string{"delete pods"}, sweep.StatusFailed, false, `delete pod`},
		{"no event create: the pod goes, the missing Event is reported", []string{"create events"}, sweep.StatusComplete, true, `"event_error"`},
		{"no ledger read: cannot observe, deletes nothing", []string{"get configmaps runner-reaper-ledger"}, sweep.StatusFailed, false, `load ledger`},
		{"no ledger write: no action at all", []string{"update configmaps runner-reaper-ledger"}, sweep.StatusFailed, false, `save ledger before acting`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.pod("acme-dead", testenv.PodState{Phase: corev1.PodFailed, Terminated: testenv.Terminated(137, 0, "OOMKilled")})
			rules := testenv.Without(testenv.LeastPrivilege(), tc.drop...)
			require.Len(t, rules, len(testenv.LeastPrivilege())-len(tc.drop))
			// Seed the ledger as an admin, so that "no ledger write"
			// is an update refused, not a create.
			if slices.Contains(tc.drop, "update configmaps runner-reaper-ledger") {
				_, err := env.Client.CoreV1().ConfigMaps(r.ns).Create(context.Background(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: "runner-reaper-ledger"}}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			user := "reaper-" + string(rune('a'+i))
			ctx := context.Background()
			env.Grant(t, r.ns, "runner-reaper", user, rules...)
			cfg, err := env.AddUser(user)
			require.NoError(t, err)

			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			s, _, err := app.Build(r.cfg, cfg, log)
			require.NoError(t, err)
			s.Now, s.Local = r.clock.Now, r.clock.Now
			res := reported(ctx, s, sweep.Act, log)
			assert.Equal(t, tc.status, res.Status, logs.String())
			assert.Equal(t, tc.podGone, !r.podExists("acme-dead"))
			assert.Contains(t, logs.String(), tc.want)
			if tc.status == sweep.StatusFailed {
				assert.True(t, strings.Contains(logs.String(), "forbidden"), "the log says what was refused: %s", logs.String())
			}
		})
	}
}
