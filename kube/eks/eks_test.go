package eks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/aws-iam-authenticator/pkg/token"

	"github.com/runner-reaper/runner-reaper/kube"
)

const (
	testAccessKey = "AKIAEKSTESTKEY000001"
	testSecretKey = "eks-test-secret-key-never-in-a-token"
)

// eksCluster is what the DescribeCluster stand-in answers for one name.
type eksCluster struct {
	Name                 string            `json:"name"`
	Endpoint             string            `json:"endpoint,omitempty"`
	CertificateAuthority map[string]string `json:"certificateAuthority,omitempty"`
	Status               string            `json:"status,omitempty"`
}

// eksStub answers DescribeCluster (restJson1: GET /clusters/{name}) for the
// clusters it holds, and ResourceNotFoundException for any other name.
type eksStub struct {
	mu       sync.Mutex
	clusters map[string]eksCluster
	paths    []string
	auth     []string
}

func (s *eksStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.Method+" "+r.URL.Path)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	name, ok := strings.CutPrefix(r.URL.Path, "/clusters/")
	if r.Method != http.MethodGet || !ok {
		w.Header().Set("X-Amzn-Errortype", "InvalidRequestException")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"message":"unexpected request"}`)
		return
	}
	c, ok := s.clusters[name]
	if !ok {
		w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException:http://internal.amazon.com/coral/com.amazonaws.eks/")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"message":"No cluster found for name: %s.","clusterName":%q}`, name, name)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"cluster": c})
}

// awsConfigFor loads an AWS config the way the Lambda does
// (config.LoadDefaultConfig), isolated from the machine's AWS files and
// with static credentials, its EKS endpoint overridden through
// AWS_ENDPOINT_URL_EKS.
func awsConfigFor(t *testing.T, eksURL string, env map[string]string) aws.Config {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	for _, k := range []string{"AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_ENDPOINT_URL_EKS", eksURL)
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-west-2"),
		config.WithCredentialsProvider(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey, Source: "test"}, nil
		})),
	)
	require.NoError(t, err)
	return cfg
}

// testCA is a self-signed CA certificate in PEM.
func testCA(t *testing.T) []byte {
	t.Helper()
	cert, _, err := certutil.GenerateSelfSignedCertKey("eks-test-ca", nil, nil)
	require.NoError(t, err)
	return cert
}

func caData(pemBytes []byte) map[string]string {
	return map[string]string{"data": base64.StdEncoding.EncodeToString(pemBytes)}
}

func newEKSStub(t *testing.T, clusters ...eksCluster) (*eksStub, *httptest.Server) {
	t.Helper()
	stub := &eksStub{clusters: map[string]eksCluster{}}
	for _, c := range clusters {
		stub.clusters[c.Name] = c
	}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	return stub, srv
}

// headerCatcher is an API server stand-in that records the Authorization
// header of each request.
type headerCatcher struct {
	mu     sync.Mutex
	auth   []string
	status int
}

func (h *headerCatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.auth = append(h.auth, r.Header.Get("Authorization"))
	status := h.status
	h.mu.Unlock()
	if status != 0 {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"runner-reaper-ledger","namespace":"default"}}`)
}

func (h *headerCatcher) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.auth...)
}

// roundTrip sends one GET through cfg's transport (the WrapTransport
// included) to url.
func roundTrip(t *testing.T, cfg *rest.Config, url string) int {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.TLSClientConfig = rest.TLSClientConfig{} // the catcher is plain http
	rt, err := rest.TransportFor(c)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestEKSRESTConfigHostAndCA(t *testing.T) {
	ca := testCA(t)
	stub, srv := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: "https://ABCD.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: caData(ca), Status: "ACTIVE"})
	cfg, err := RESTConfig(context.Background(), awsConfigFor(t, srv.URL, nil), "fleet")
	require.NoError(t, err)

	assert.Equal(t, "https://ABCD.gr7.us-west-2.eks.amazonaws.com", cfg.Host)
	assert.Equal(t, ca, cfg.TLSClientConfig.CAData, "CA is the decoded PEM")
	assert.False(t, cfg.TLSClientConfig.Insecure)
	assert.Empty(t, cfg.BearerToken, "the token is set per request, not fixed in the config")
	assert.NotNil(t, cfg.WrapTransport)
	assert.Equal(t, []string{"GET /clusters/fleet"}, stub.paths, "one DescribeCluster, through AWS_ENDPOINT_URL_EKS")
	assert.True(t, strings.HasPrefix(stub.auth[0], "AWS4-HMAC-SHA256 Credential="+testAccessKey+"/"), "DescribeCluster is signed with awsCfg's credentials")
	assert.Contains(t, stub.auth[0], "/us-west-2/eks/aws4_request")
}

// decodeToken checks an Authorization header's form and returns the
// presigned URL inside the token.
func decodeToken(t *testing.T, header string) *url.URL {
	t.Helper()
	tok, ok := strings.CutPrefix(header, "Bearer k8s-aws-v1.")
	require.True(t, ok, "header %.30q... is not a bearer k8s-aws-v1 token", header)
	require.NotContains(t, tok, "=", "base64url without padding")
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	require.NoError(t, err)
	u, err := url.Parse(string(raw))
	require.NoError(t, err)
	return u
}

func TestEKSTokenForm(t *testing.T) {
	ca := testCA(t)
	_, srv := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: "https://ABCD.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: caData(ca), Status: "ACTIVE"})
	cfg, err := RESTConfig(context.Background(), awsConfigFor(t, srv.URL, nil), "fleet")
	require.NoError(t, err)

	catcher := &headerCatcher{}
	api := httptest.NewServer(catcher)
	defer api.Close()
	require.Equal(t, http.StatusOK, roundTrip(t, cfg, api.URL+"/api/v1/namespaces/default"))

	seen := catcher.seen()
	require.Len(t, seen, 1)
	u := decodeToken(t, seen[0])
	assert.Equal(t, "https", u.Scheme)
	assert.Equal(t, "sts.us-west-2.amazonaws.com", u.Host, "the STS client takes awsCfg's region")
	q := u.Query()
	assert.Equal(t, "GetCallerIdentity", q.Get("Action"))
	assert.Equal(t, "2011-06-15", q.Get("Version"))
	assert.Equal(t, "AWS4-HMAC-SHA256", q.Get("X-Amz-Algorithm"))
	assert.Regexp(t, `^`+testAccessKey+`/\d{8}/us-west-2/sts/aws4_request$`, q.Get("X-Amz-Credential"))
	assert.Equal(t, "60", q.Get("X-Amz-Expires"))
	_, err = time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	assert.NoError(t, err, "X-Amz-Date")
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	assert.Contains(t, signed, "host")
	assert.Contains(t, signed, "x-k8s-aws-id")
	assert.NotEmpty(t, q.Get("X-Amz-Signature"))
	assert.NotContains(t, seen[0], testSecretKey)

	// The token is nowhere in what a log line could print of the config.
	tok := strings.TrimPrefix(seen[0], "Bearer ")
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), cfg.String()} {
		assert.NotContains(t, s, tok)
		assert.NotContains(t, s, tok[:40])
	}
}

// The STS client is built from awsCfg, so an STS endpoint override (a VPC
// endpoint, a FIPS endpoint) is what the token is a presigned URL for.
func TestEKSTokenUsesSTSEndpointOverride(t *testing.T) {
	ca := testCA(t)
	_, srv := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: "https://ABCD.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: caData(ca), Status: "ACTIVE"})
	awsCfg := awsConfigFor(t, srv.URL, map[string]string{"AWS_ENDPOINT_URL_STS": "https://sts-vpce.example.test"})
	cfg, err := RESTConfig(context.Background(), awsCfg, "fleet")
	require.NoError(t, err)

	catcher := &headerCatcher{}
	api := httptest.NewServer(catcher)
	defer api.Close()
	roundTrip(t, cfg, api.URL)
	u := decodeToken(t, catcher.seen()[0])
	assert.Equal(t, "sts-vpce.example.test", u.Host)
	assert.Equal(t, "GetCallerIdentity", u.Query().Get("Action"))
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// countingGenerator makes distinct tokens valid as long as the real ones
// (expiry 14 minutes after issue, stated on the wall clock).
type countingGenerator struct {
	mu sync.Mutex
	n  int
}

func (g *countingGenerator) generate(context.Context) (token.Token, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	return token.Token{Token: fmt.Sprintf("k8s-aws-v1.fake-%d", g.n), Expiration: time.Now().Add(14 * time.Minute)}, nil
}

func (g *countingGenerator) count() int { g.mu.Lock(); defer g.mu.Unlock(); return g.n }

func TestEKSTokenRefreshedBeforeExpiry(t *testing.T) {
	ca := testCA(t)
	_, srv := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: "https://ABCD.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: caData(ca), Status: "ACTIVE"})
	clock := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gen := &countingGenerator{}
	cfg, err := eksRESTConfig(context.Background(), awsConfigFor(t, srv.URL, nil), "fleet", eksOptions{now: clock.Now, generate: gen.generate})
	require.NoError(t, err)
	require.Equal(t, 1, gen.count(), "the first token is made up front")

	catcher := &headerCatcher{}
	api := httptest.NewServer(catcher)
	defer api.Close()

	// Validity 14m, margin max(1m, 10%) = 84s: renewed from 12m36s on.
	steps := []struct {
		at   time.Duration
		want string
	}{
		{0, "fake-1"},
		{5 * time.Minute, "fake-1"},
		{12 * time.Minute, "fake-1"},
		{12*time.Minute + 30*time.Second, "fake-1"},
		{12*time.Minute + 40*time.Second, "fake-2"}, // less than 10% left
		{13 * time.Minute, "fake-2"},
		{20 * time.Minute, "fake-2"},
		{60 * time.Minute, "fake-3"}, // a warm Lambda an hour later
		{61 * time.Minute, "fake-3"},
	}
	start := clock.Now()
	for _, s := range steps {
		clock.Set(start.Add(s.at))
		roundTrip(t, cfg, api.URL)
		seen := catcher.seen()
		assert.Equal(t, "Bearer k8s-aws-v1."+s.want, seen[len(seen)-1], "at +%s", s.at)
	}
	assert.Equal(t, 3, gen.count())

	// Copies of the config (kube.New copies it) share the cache.
	roundTrip(t, rest.CopyConfig(cfg), api.URL)
	assert.Equal(t, 3, gen.count())
}

func TestEKSTokenRenewedAfter401(t *testing.T) {
	ca := testCA(t)
	_, srv := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: "https://ABCD.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: caData(ca), Status: "ACTIVE"})
	clock := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	gen := &countingGenerator{}
	cfg, err := eksRESTConfig(context.Background(), awsConfigFor(t, srv.URL, nil), "fleet", eksOptions{now: clock.Now, generate: gen.generate})
	require.NoError(t, err)

	catcher := &headerCatcher{status: http.StatusUnauthorized}
	api := httptest.NewServer(catcher)
	defer api.Close()
	assert.Equal(t, http.StatusUnauthorized, roundTrip(t, cfg, api.URL))
	catcher.status = 0
	assert.Equal(t, http.StatusOK, roundTrip(t, cfg, api.URL))
	assert.Equal(t, []string{"Bearer k8s-aws-v1.fake-1", "Bearer k8s-aws-v1.fake-2"}, catcher.seen())
}

func TestEKSTokenErrorNamesClusterNotToken(t *testing.T) {
	ca := testCA(t)
	_, srv := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: "https://ABCD.gr7.us-west-2.eks.amazonaws.com", CertificateAuthority: caData(ca), Status: "ACTIVE"})
	boom := errors.New("no EC2 IMDS role found")
	_, err := eksRESTConfig(context.Background(), awsConfigFor(t, srv.URL, nil), "fleet", eksOptions{generate: func(context.Context) (token.Token, error) {
		return token.Token{}, boom
	}})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, "eks token for cluster fleet: no EC2 IMDS role found", err.Error())
}

func TestEKSRESTConfigRefusals(t *testing.T) {
	ca := testCA(t)
	_, srv := newEKSStub(t,
		eksCluster{Name: "creating", Endpoint: "https://x.eks.amazonaws.com", CertificateAuthority: caData(ca), Status: "CREATING"},
		eksCluster{Name: "no-status", Endpoint: "https://x.eks.amazonaws.com", CertificateAuthority: caData(ca)},
		eksCluster{Name: "no-endpoint", CertificateAuthority: caData(ca), Status: "ACTIVE"},
		eksCluster{Name: "no-ca", Endpoint: "https://x.eks.amazonaws.com", Status: "ACTIVE"},
		eksCluster{Name: "bad-ca", Endpoint: "https://x.eks.amazonaws.com", CertificateAuthority: map[string]string{"data": "%%%"}, Status: "ACTIVE"},
		eksCluster{Name: "not-pem", Endpoint: "https://x.eks.amazonaws.com", CertificateAuthority: caData([]byte("hello")), Status: "ACTIVE"},
	)
	awsCfg := awsConfigFor(t, srv.URL, nil)
	for name, want := range map[string]string{
		"creating":    "describe eks cluster creating: cluster is CREATING, not ACTIVE",
		"no-status":   "describe eks cluster no-status: cluster is (no status), not ACTIVE",
		"no-endpoint": "describe eks cluster no-endpoint: cluster has no endpoint",
		"no-ca":       "describe eks cluster no-ca: cluster has no certificate authority data",
		"bad-ca":      "describe eks cluster bad-ca: certificate authority data is not base64",
		"not-pem":     "describe eks cluster not-pem: certificate authority data",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := RESTConfig(context.Background(), awsCfg, name)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), want), "got %q", err)
		})
	}

	t.Run("not found", func(t *testing.T) {
		_, err := RESTConfig(context.Background(), awsCfg, "missing")
		require.Error(t, err)
		var nf *ekstypes.ResourceNotFoundException
		require.ErrorAs(t, err, &nf, "the SDK's typed error is wrapped, not flattened")
		assert.True(t, strings.HasPrefix(err.Error(), "describe eks cluster missing: "), "got %q", err)
		assert.Contains(t, err.Error(), "No cluster found for name: missing.")
	})

	t.Run("no name", func(t *testing.T) {
		_, err := RESTConfig(context.Background(), awsCfg, "")
		require.EqualError(t, err, "eks cluster: no cluster name")
	})
}

// The whole path a Lambda takes: DescribeCluster gives the endpoint and CA
// of a TLS API server stand-in, kube.New builds the counted client on that
// config, and a request reaches the server over TLS verified against the
// CA from DescribeCluster, with the EKS token, and is counted once.
func TestEKSRESTConfigWithKubeClient(t *testing.T) {
	catcher := &headerCatcher{}
	api := httptest.NewTLSServer(catcher)
	defer api.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw})
	_, srv := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: api.URL, CertificateAuthority: caData(ca), Status: "ACTIVE"})

	cfg, err := RESTConfig(context.Background(), awsConfigFor(t, srv.URL, nil), "fleet")
	require.NoError(t, err)
	c, err := kube.New(cfg, kube.Options{Instance: "test"})
	require.NoError(t, err)
	cm, err := c.ConfigMaps("default").Get(context.Background(), "runner-reaper-ledger", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "runner-reaper-ledger", cm.Name)
	assert.Equal(t, int64(1), c.Counts().Requests)
	seen := catcher.seen()
	require.Len(t, seen, 1)
	assert.Equal(t, "GetCallerIdentity", decodeToken(t, seen[0]).Query().Get("Action"))

	// A CA that did not sign the server's certificate is refused.
	other := testCA(t)
	_, srv2 := newEKSStub(t, eksCluster{Name: "fleet", Endpoint: api.URL, CertificateAuthority: caData(other), Status: "ACTIVE"})
	cfg2, err := RESTConfig(context.Background(), awsConfigFor(t, srv2.URL, nil), "fleet")
	require.NoError(t, err)
	c2, err := kube.New(cfg2, kube.Options{Instance: "test"})
	require.NoError(t, err)
	_, err = c2.ConfigMaps("default").Get(context.Background(), "runner-reaper-ledger", metav1.GetOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "certificate")
	assert.Len(t, catcher.seen(), 1, "no request got through with the wrong CA")
}
