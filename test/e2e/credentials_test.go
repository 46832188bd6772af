package e2e_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runner-reaper/runner-reaper/test/ghsim"
	"github.com/runner-reaper/runner-reaper/test/testenv"
)

const (
	appID          = 4242
	installationID = 77
)

// newAppWorld is newWorld authenticated as a GitHub App: its simulator
// accepts only the installation tokens it minted for a JWT signed with the
// App's key, given inline. exec then checks that no run prints a line of
// the key, a JWT or an installation token.
func newAppWorld(t *testing.T, extra map[string]string) *world {
	t.Helper()
	w := newWorld(t, extra)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	sim := ghsim.New(ghsim.Options{AppID: appID, AppKey: &key.PublicKey})
	url, err := sim.Start()
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	sim.AddScope(scope)
	w.sim, w.token = sim, ""
	delete(w.env, "REAPER_GITHUB_TOKEN")
	w.env["REAPER_GITHUB_API_URL"] = url
	w.env["REAPER_GITHUB_APP_ID"] = strconv.Itoa(appID)
	w.env["REAPER_GITHUB_INSTALLATION_ID"] = strconv.Itoa(installationID)
	w.env["REAPER_GITHUB_PRIVATE_KEY"] = keyPEM
	for _, l := range strings.Split(keyPEM, "\n") {
		if len(l) >= 8 {
			w.secrets = append(w.secrets, l)
		}
	}
	return w
}

// authWorlds are the two ways to authenticate, each a world maker.
var authWorlds = []struct {
	name string
	make func(t *testing.T, extra map[string]string) *world
}{
	{"token", newWorld},
	{"app", newAppWorld},
}

// elsewhere is another GitHub on another loopback port that takes any
// credential and serves the scope with no runners: a list a sweep would
// gladly read as "every runner is gone".
func elsewhere(t *testing.T) (*ghsim.Sim, string) {
	t.Helper()
	other := ghsim.New(ghsim.Options{})
	url, err := other.Start()
	require.NoError(t, err)
	t.Cleanup(other.Close)
	other.AddScope(scope)
	return other, url
}

// Credentials stay on the configured API host. A runner list answered with
// a redirect to another host is refused before the redirect is followed:
// the scope is skipped (exit 3) and the other host gets nothing, not the
// token, not the App's installation token, not a request. A registration
// delete so redirected fails its action (exit 1), and the pod stays.
func TestRedirectOffHostIsRefused(t *testing.T) {
	t.Parallel()
	for _, aw := range authWorlds {
		for _, status := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect} {
			t.Run(fmt.Sprintf("%s/%d", aw.name, status), func(t *testing.T) {
				t.Parallel()
				w := aw.make(t, nil)
				other, otherURL := elsewhere(t)
				otherHost := strings.TrimSuffix(strings.TrimPrefix(otherURL, "http://"), "/")
				zombie := w.runner("acme-zombie", "offline", false)
				w.pod("acme-zombie", testenv.Running())
				healthy := w.runner("acme-healthy", "online", false)
				w.pod("acme-healthy", testenv.Running())

				// The list goes elsewhere: refused, the scope is skipped.
				w.sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Redirect: otherURL, RedirectStatus: status, Times: 1})
				first := w.sweep()
				first.requireCode(t, 3)
				skipped := first.msg("scope skipped")
				require.Len(t, skipped, 1)
				t.Logf("reason: %v", skipped[0]["reason"])
				assert.Equal(t, scope, skipped[0]["scope"])
				assert.Contains(t, skipped[0]["reason"], "refused")
				assert.Contains(t, skipped[0]["reason"], otherHost, "the reason names the refused host")
				assert.Empty(t, other.Requests(), "the other host received a request")
				assert.Empty(t, first.msg("action"))

				// The list answers again: the zombie is marked.
				w.sweep().requireCode(t, 0)

				// Its registration delete goes elsewhere: refused, the
				// action fails, nothing is deleted anywhere.
				w.sim.Fault(scope, ghsim.EndpointDelete, ghsim.Fault{Redirect: otherURL, RedirectStatus: status})
				time.Sleep(pastConfirm)
				third := w.sweep()
				third.requireCode(t, 1)
				acted := third.actions(t)
				require.Contains(t, acted, "acme-zombie")
				assert.Equal(t, "error", acted["acme-zombie"]["result"])
				assert.Contains(t, acted["acme-zombie"]["error"], "refused")
				assert.Contains(t, acted["acme-zombie"]["error"], otherHost)
				assert.Empty(t, other.Requests(), "the other host received a request")
				assert.True(t, w.podExists("acme-zombie"))
				assert.True(t, w.runnerExists(zombie.ID))
				assert.True(t, w.podExists("acme-healthy"))
				assert.True(t, w.runnerExists(healthy.ID))
			})
		}
	}
}

// An error page that echoes the request's headers (some proxies do) puts
// the credential into the error text. Every text that leaves the process
// is redacted: the scope skipped line, the audit's table, a failed action's
// line. exec checks that the token, or the App's JWTs, installation tokens
// and key lines, appear in no output; the marker proves the echo was there.
func TestEchoedCredentialsAreRedacted(t *testing.T) {
	t.Parallel()
	for _, aw := range authWorlds {
		t.Run(aw.name, func(t *testing.T) {
			t.Parallel()
			w := aw.make(t, nil)
			w.runner("acme-zombie", "offline", false)
			w.pod("acme-zombie", testenv.Running())

			w.sim.Fault(scope, ghsim.EndpointList, ghsim.Fault{Echo: true, Times: 2})
			first := w.sweep()
			first.requireCode(t, 3)
			skipped := first.msg("scope skipped")
			require.Len(t, skipped, 1)
			t.Logf("reason: %v", skipped[0]["reason"])
			assert.Contains(t, skipped[0]["reason"], "Authorization: ", "the echo reached the reason")
			assert.Contains(t, skipped[0]["reason"], "[REDACTED]")

			audit := w.exec("audit")
			audit.requireCode(t, 3)
			assert.Contains(t, audit.Stdout, "skipped")
			assert.Contains(t, audit.Stdout, "[REDACTED]", "the audit table quotes the reason, redacted")

			w.sweep().requireCode(t, 0) // marks the zombie
			w.sim.Fault(scope, ghsim.EndpointDelete, ghsim.Fault{Echo: true, Status: http.StatusBadRequest})
			time.Sleep(pastConfirm)
			third := w.sweep()
			third.requireCode(t, 1)
			line := third.actions(t)["acme-zombie"]
			require.NotNil(t, line)
			assert.Equal(t, "error", line["result"])
			assert.Contains(t, line["error"], "[REDACTED]")
			assert.Contains(t, third.summary(t)["error"], "[REDACTED]")
			if aw.name == "app" {
				assert.NotEmpty(t, w.sim.Credentials(), "the App flow ran")
			}
		})
	}
}
