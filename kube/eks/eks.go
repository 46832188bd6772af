// Package eks reaches an EKS cluster's API server from outside the
// cluster, as the Lambda does: the endpoint and CA from DescribeCluster,
// and a bearer token presigned from the function's own IAM role, renewed
// before it expires, because a Lambda has no kubeconfig and no in-cluster
// ServiceAccount to lean on.
package eks

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awseks "github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/aws-iam-authenticator/pkg/token"
)

const (
	// eksMinRefreshMargin is the least time a cached token must still have
	// before it is used: a token that may expire while a request is in
	// flight (or on a skewed API server clock) is regenerated instead.
	eksMinRefreshMargin = time.Minute
	// eksRefreshFraction is the share of a token's validity that is the
	// margin when it is larger than eksMinRefreshMargin.
	eksRefreshFraction = 10
)

// RESTConfig is the way into an EKS cluster from outside it (the Lambda):
// DescribeCluster gives its endpoint and CA, and an aws-iam-authenticator
// token (a presigned sts:GetCallerIdentity URL bound to the cluster's name)
// authenticates as the AWS identity of awsCfg, which the cluster's access
// entries or aws-auth map to a Kubernetes user.
//
// A token lives 15 minutes, and a warm Lambda may live for hours, so the
// returned config does not carry a fixed BearerToken: its WrapTransport sets
// the Authorization header of every request from a cached token that is
// regenerated when less than max(1 minute, 10% of its validity) is left, and
// also after the API server answers 401. The first token is made here, so
// that missing AWS credentials fail the cold start rather than the first
// request. The STS client is built from awsCfg, so its region and any
// endpoint override (AWS_ENDPOINT_URL_STS) apply. The token is never logged
// nor put into an error.
func RESTConfig(ctx context.Context, awsCfg aws.Config, cluster string) (*rest.Config, error) {
	return eksRESTConfig(ctx, awsCfg, cluster, eksOptions{})
}

// eksOptions are the seams of RESTConfig for tests.
type eksOptions struct {
	// now is the clock that token expiry is measured on; nil means
	// time.Now.
	now func() time.Time
	// generate makes a token; nil means aws-iam-authenticator's generator
	// with an STS client from awsCfg.
	generate func(ctx context.Context) (token.Token, error)
}

func eksRESTConfig(ctx context.Context, awsCfg aws.Config, cluster string, opts eksOptions) (*rest.Config, error) {
	if cluster == "" {
		return nil, errors.New("eks cluster: no cluster name")
	}
	out, err := awseks.NewFromConfig(awsCfg).DescribeCluster(ctx, &awseks.DescribeClusterInput{Name: aws.String(cluster)})
	if err != nil {
		return nil, fmt.Errorf("describe eks cluster %s: %w", cluster, err)
	}
	c := out.Cluster
	if c == nil {
		return nil, fmt.Errorf("describe eks cluster %s: the answer holds no cluster", cluster)
	}
	if c.Status != ekstypes.ClusterStatusActive {
		return nil, fmt.Errorf("describe eks cluster %s: cluster is %s, not %s", cluster, orNone(string(c.Status)), ekstypes.ClusterStatusActive)
	}
	endpoint := aws.ToString(c.Endpoint)
	if endpoint == "" {
		return nil, fmt.Errorf("describe eks cluster %s: cluster has no endpoint", cluster)
	}
	if u, err := url.Parse(endpoint); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("describe eks cluster %s: endpoint %q is not an https URL", cluster, endpoint)
	}
	var caB64 string
	if c.CertificateAuthority != nil {
		caB64 = aws.ToString(c.CertificateAuthority.Data)
	}
	if caB64 == "" {
		return nil, fmt.Errorf("describe eks cluster %s: cluster has no certificate authority data", cluster)
	}
	ca, err := base64.StdEncoding.DecodeString(caB64)
	if err != nil {
		return nil, fmt.Errorf("describe eks cluster %s: certificate authority data is not base64: %w", cluster, err)
	}
	if _, err := certutil.ParseCertsPEM(ca); err != nil {
		return nil, fmt.Errorf("describe eks cluster %s: certificate authority data: %w", cluster, err)
	}

	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.generate == nil {
		gen, err := token.NewGenerator(false, false)
		if err != nil {
			return nil, fmt.Errorf("eks token generator for cluster %s: %w", cluster, err)
		}
		stsClient := sts.NewFromConfig(awsCfg)
		opts.generate = func(context.Context) (token.Token, error) {
			return gen.GetWithSTS(cluster, stsClient)
		}
	}
	ts := &eksTokenSource{cluster: cluster, now: opts.now, generate: opts.generate}
	if _, err := ts.get(ctx); err != nil {
		return nil, err
	}

	cfg := &rest.Config{
		Host:            endpoint,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &eksAuthTransport{base: rt, ts: ts}
	})
	return cfg, nil
}

func orNone(s string) string {
	if s == "" {
		return "(no status)"
	}
	return s
}

// eksTokenSource caches one token and makes a new one when the cached one
// is close to expiry. It is safe for concurrent use; one token is made at a
// time.
type eksTokenSource struct {
	cluster  string
	now      func() time.Time
	generate func(ctx context.Context) (token.Token, error)

	mu        sync.Mutex
	token     string
	expires   time.Time // on ts.now's clock
	refreshAt time.Time // when to make a new one, on ts.now's clock
}

// get returns a token with more than the refresh margin left.
func (ts *eksTokenSource) get(ctx context.Context) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.now()
	if ts.token != "" && now.Before(ts.refreshAt) {
		return ts.token, nil
	}
	wall := time.Now()
	tok, err := ts.generate(ctx)
	if err != nil {
		// The generator's errors name the STS client's trouble
		// (credentials, region), never a token.
		return "", fmt.Errorf("eks token for cluster %s: %w", ts.cluster, err)
	}
	if tok.Token == "" {
		return "", fmt.Errorf("eks token for cluster %s: the generator made an empty token", ts.cluster)
	}
	// The generator states expiry on the wall clock; carry the validity
	// over to ts.now's clock, which is the wall clock outside tests.
	validity := tok.Expiration.Sub(wall)
	if validity <= 0 {
		return "", fmt.Errorf("eks token for cluster %s: the generator made a token that is already expired", ts.cluster)
	}
	margin := validity / eksRefreshFraction
	if margin < eksMinRefreshMargin {
		margin = eksMinRefreshMargin
	}
	if margin > validity {
		margin = validity
	}
	ts.token, ts.expires = tok.Token, now.Add(validity)
	ts.refreshAt = ts.expires.Add(-margin)
	return ts.token, nil
}

// invalidate drops the cached token if it is still the one a request was
// refused with, so the next request makes a new one.
func (ts *eksTokenSource) invalidate(used string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.token == used {
		ts.token = ""
	}
}

// eksAuthTransport sets the bearer token on each request.
type eksAuthTransport struct {
	base http.RoundTripper
	ts   *eksTokenSource
}

func (t *eksAuthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.ts.get(req.Context())
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		// The request is not retried here (its body may be spent), but
		// the next one does not repeat a token the server refused.
		t.ts.invalidate(tok)
	}
	return resp, err
}

// WrappedRoundTripper lets client-go's debugging and connection management
// see the transport underneath.
func (t *eksAuthTransport) WrappedRoundTripper() http.RoundTripper { return t.base }
