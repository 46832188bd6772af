// Package configtest holds the hostile-values table of the REAPER_*
// environment: for every variable of docs/configuration.md,
// values a hostile or careless operator could set, each of which the binary
// refuses at start-up. It lives apart from internal/config so that every
// place that accepts the same settings (internal/config's own tests, and
// the Helm chart's schema in test/helm) is checked against one table: a row
// added here is a row each of them must answer for.
//
// Only tests import it; it imports nothing of the product's.
package configtest

import (
	"os"
	"strings"
	"testing"
)

// Hostile lists, for every variable but the GitHub App's, values that must
// be refused at start-up when set alone over an otherwise valid environment
// (a token, a scope and a namespace). A function, not a variable, so that
// no caller can change what another sees.
func Hostile() map[string][]string {
	return map[string][]string{
		"REAPER_SCOPES": {"org:..", "repo:../..", "repo:acme/..", "org:acme/..", "org:%2e%2e", "org:ac me",
			"org:acme?page=2", "org:acme#x", "repo:acme/web/x", "enterprise:acme_corp", "org:\x01acme", "org:acme,,org:web",
			"org:" + strings.Repeat("x", 101), "orgs:acme"},
		"REAPER_NAMESPACES":               {"..", "Arc", "arc_runners", "*,arc-runners", "arc runners", strings.Repeat("a", 64), "-arc"},
		"REAPER_POD_SELECTOR":             {"app in (a", "a=b=c", "x\x01=y", " "},
		"REAPER_RUNNER_CONTAINER":         {"Runner", "run ner", "", strings.Repeat("r", 64), "../runner"},
		"REAPER_RUNNER_NAME_FROM":         {"env:X", "label:", "label:bad key!", "annotation:a/b/c", "podname"},
		"REAPER_SCOPE_LABEL":              {"bad key!", "a/b/c", "-x"},
		"REAPER_JOB_FROM":                 {"label:pool/job", "annotation:", "annotation:bad key!", "annotation:a/b/c", "env:JOB", "pool/job"},
		"REAPER_OWNER_STAMP_LABEL":        {"bad key!", "/x"},
		"REAPER_STAMP_MAX_AGE":            {"0", "-5m", "5", "NaN", "10 minutes", "99999999999h"},
		"REAPER_GHOST_NAME_PREFIX":        {"arc-\n", "arc-\x7f", "ärc-", "a", "ar"},
		"REAPER_GHOST_LABEL":              {"own\x01ed", "lab\tel", "self-hosted", "Linux", "X64", "arm64"},
		"REAPER_ARC_LEAKS":                {"yes", "2"},
		"REAPER_ARC_FAILED_AFTER":         {"0s", "-1m", "forever"},
		"REAPER_ARC_PODLESS_AFTER":        {"0", "Inf"},
		"REAPER_ARC_STUCK_DELETING_AFTER": {"-30m", "1d"},
		"REAPER_ARC_REMOVE_FINALIZERS":    {"on", "true"}, // true without REAPER_ARC_LEAKS
		"REAPER_REGISTRATION_DEADLINE":    {"0", "-10m", "NaN"},
		"REAPER_START_DEADLINE":           {"0", "-15m", "15", "soon"},
		"REAPER_DELETE_UNSCHEDULABLE":     {"sure", "2"},
		"REAPER_CONFIRM_AFTER":            {"0s", "-5m", "5 min"},
		"REAPER_MAX_ACTIONS":              {"0", "-1", "1e3", "99999999999999999999", "ten"},
		"REAPER_MAX_FRACTION":             {"NaN", "nan", "Inf", "+Inf", "-Inf", "0", "-0.1", "1.0001", "1e-400", "1e400"},
		"REAPER_MASS_SUSPICION_FRACTION":  {"NaN", "Inf", "-Inf", "0", "2"},
		"REAPER_MASS_SUSPICION_MIN":       {"0", "-5", "many"},
		"REAPER_DRY_RUN":                  {"yes please", "y"},
		"REAPER_LEDGER": {"redis:x", "configmap:", "configmap:ns", "configmap:NS/x", "configmap:ns/", "file:", "file:a\nb",
			"dynamodb:a", "dynamodb:bad table", "memory:x", "memory:"},
		"REAPER_DELETE_SERVICE_ACCOUNT": {"sure"},
		"REAPER_READ_RUNNER_LOG":        {"sure", "2"},
		"REAPER_KUBE_CONCURRENCY":       {"0", "-1", "65", "1000000"},
		"REAPER_KUBE_TIMEOUT":           {"0", "-1s", "6m", "forever", "NaN"},
		"REAPER_SWEEP_TIMEOUT":          {"0", "-45s", "5s", "1s", "2h", "soon", "Inf"},
		"REAPER_MAX_SCOPES_PER_SWEEP":   {"-1", "ten", "1.5", "1e3", "10001", "99999999999999999999", " "},
		"REAPER_HISTORY_SIZE":           {"-1", "1001", "all", "2.5", "99999999999999999999", " "},
		"REAPER_LOOP_THRESHOLD":         {"1", "0", "-5", "51", "many", "2.5", "99999999999999999999", " "},
		"REAPER_LOOP_WINDOW":            {"0s", "30s", "-30m", "25h", "half an hour", "30", " "},
		"REAPER_LOG_LEVEL":              {"verbose", "trace"},
		"REAPER_GITHUB_TOKEN":           {"ghp_abc\x01def", "ghp_abc def", "ghp_abc\n", "ghp_äbc", "ghp_abc\x7f"},
		"REAPER_GITHUB_API_URL": {"ftp://x", "http://api.github.com/", "http://10.0.0.1/", "https://user:hunter2@ghes.example.com/api/v3/",
			"https://ghes.example.com/api/v3/?x=1", "https://ghes.example.com/#f", "https://", "api.github.com", "https:api.github.com"},
		"REAPER_GITHUB_TIMEOUT":    {"0", "-1s", "1h", "soon"},
		"REAPER_GITHUB_SECRET_ARN": {"runner-reaper-github", "arn:", "arn:aws:s3:::bucket", "arn:aws:secretsmanager:eu-west-1:1:secret:x"},
		"REAPER_EKS_CLUSTER":       {"not a name!", "-fleet", strings.Repeat("c", 101), "fleet\n"},
		"REAPER_METRICS_NAMESPACE": {"Runner Reaper", "AWS/EC2", strings.Repeat("m", 256), "x\x01"},
		"REAPER_PUSHGATEWAY_URL": {"pushgateway:9091", "ftp://pushgateway:9091", "http://user:hunter2@pushgateway:9091",
			"http://pushgateway:9091/?x=1", "http://pushgateway:9091/#f", "http://", "http:pushgateway"},
		"REAPER_METRICS_INSTANCE": {"-eu", "eu west", "eu/west", strings.Repeat("i", 64), "eu\x01", "ëu"},
		"REAPER_INTERVAL":         {"0", "-1m", "9s", "60", "soon"},
		"REAPER_LISTEN":           {"8080", ":0", ":65536", ":08080", "0.0.0.0:http", "bad host!:8080", ":8080\n", " :8080"},
		"REAPER_LEASE_NAME":       {"", "Runner-Reaper", "runner_reaper", "-x", "x.", strings.Repeat("l", 254)},
		"REAPER_LEASE_NAMESPACE":  {"Runner", "a_b", "-ns", "a.b", strings.Repeat("n", 64)},
		"REAPER_LEASE_DURATION":   {"0", "2s", "6m", "15.5s", "-15s", "15", "soon"},
		"REAPER_IDENTITY":         {"a b", "x\x01", "ïd", "id\n", strings.Repeat("i", 129)},
	}
}

// AppHostile are the GitHub App settings' hostile values, each refused when
// set alone over an otherwise valid App environment (an App id, an
// installation id and a private key, no token).
func AppHostile() map[string][]string {
	return map[string][]string{
		"REAPER_GITHUB_APP_ID":           {"-1", "0", "abc", "99999999999999999999"},
		"REAPER_GITHUB_INSTALLATION_ID":  {"-2", "0", "1.5"},
		"REAPER_GITHUB_PRIVATE_KEY":      {"not a key", "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0\n-----END RSA PRIVATE KEY-----\n"},
		"REAPER_GITHUB_PRIVATE_KEY_FILE": {"/nonexistent/key.pem", "/"},
	}
}

// Secrets are the parts of the hostile values above that are secrets: no
// refusal may quote them.
func Secrets() []string { return []string{"hunter2", "c2VjcmV0", "abc\x01def"} }

// Setenv clears every REAPER_ variable of the process, then sets vars (for
// the test's duration), so that config.Load sees exactly the environment a
// test names. Like t.Setenv, it cannot be used in a parallel test.
func Setenv(t testing.TB, vars map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "REAPER_") {
			t.Setenv(k, "") // restored when the test ends
			if err := os.Unsetenv(k); err != nil {
				t.Fatalf("unset %s: %v", k, err)
			}
		}
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
}
