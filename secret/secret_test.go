package secret

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	arnKey     = "arn:aws:secretsmanager:us-west-2:123456789012:secret:runner-reaper/github-app-AbCdEf"
	arnMissing = "arn:aws:secretsmanager:us-west-2:123456789012:secret:runner-reaper/gone-XyZ123"
	arnDenied  = "arn:aws:secretsmanager:us-west-2:123456789012:secret:other-team/key-QwErTy"
	arnBinary  = "arn:aws:secretsmanager:us-west-2:123456789012:secret:runner-reaper/binary-BbBbBb"
	arnEmpty   = "arn:aws:secretsmanager:us-west-2:123456789012:secret:runner-reaper/empty-EeEeEe"
	// theValue stands for a private key: it must appear in no error.
	theValue = "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretsecretsecret\n-----END RSA PRIVATE KEY-----\n"
)

// request is what the stand-in saw of one call.
type request struct {
	Method, Path, Target, ContentType, Auth string
	SecretID                                string
}

// smStub stands in for Secrets Manager's awsJson1_1 protocol: POST / with
// X-Amz-Target: secretsmanager.GetSecretValue and {"SecretId": ...}.
type smStub struct {
	mu   sync.Mutex
	seen []request
}

func (s *smStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in struct{ SecretId string }
	_ = json.Unmarshal(body, &in)
	s.mu.Lock()
	s.seen = append(s.seen, request{r.Method, r.URL.Path, r.Header.Get("X-Amz-Target"), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), in.SecretId})
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	fail := func(code, msg string) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "Message": msg})
	}
	if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
		fail("InvalidRequestException", "unexpected request")
		return
	}
	out := map[string]any{"ARN": in.SecretId, "Name": in.SecretId[strings.LastIndex(in.SecretId, ":")+1:], "VersionId": "v1", "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": 1.7e9}
	switch in.SecretId {
	case arnKey:
		out["SecretString"] = theValue
	case arnBinary:
		out["SecretBinary"] = base64.StdEncoding.EncodeToString([]byte(theValue))
	case arnEmpty:
		out["SecretString"] = ""
	case arnDenied:
		fail("AccessDeniedException", "User: arn:aws:sts::123456789012:assumed-role/runner-reaper/fn is not authorized to perform: secretsmanager:GetSecretValue on resource: "+in.SecretId+" because no identity-based policy allows the secretsmanager:GetSecretValue action")
		return
	default:
		fail("ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (s *smStub) requests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]request(nil), s.seen...)
}

func staticCreds() aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIASECRETTEST000001", SecretAccessKey: "test-secret-key", Source: "test"}, nil
	})
}

// awsConfigFor loads an AWS config as the Lambda does, isolated from the
// machine's AWS files, with the Secrets Manager endpoint overridden by
// AWS_ENDPOINT_URL_SECRETS_MANAGER.
func awsConfigFor(t *testing.T, endpoint string) aws.Config {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", endpoint)
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-west-2"), config.WithCredentialsProvider(staticCreds()))
	require.NoError(t, err)
	return cfg
}

func newStub(t *testing.T) (*smStub, aws.Config) {
	stub := &smStub{}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	return stub, awsConfigFor(t, srv.URL)
}

func TestGetString(t *testing.T) {
	stub, cfg := newStub(t)
	v, err := Get(context.Background(), cfg, arnKey)
	require.NoError(t, err)
	assert.Equal(t, theValue, v)

	seen := stub.requests()
	require.Len(t, seen, 1, "one call")
	r := seen[0]
	assert.Equal(t, "POST", r.Method)
	assert.Equal(t, "/", r.Path)
	assert.Equal(t, "secretsmanager.GetSecretValue", r.Target)
	assert.Equal(t, "application/x-amz-json-1.1", r.ContentType)
	assert.Equal(t, arnKey, r.SecretID, "the SecretId is the ARN, as given")
	assert.Contains(t, r.Auth, "/us-west-2/secretsmanager/aws4_request", "signed for Secrets Manager in awsCfg's region")
}

func TestGetBinary(t *testing.T) {
	_, cfg := newStub(t)
	v, err := Get(context.Background(), cfg, arnBinary)
	require.NoError(t, err)
	assert.Equal(t, theValue, v, "SecretBinary, decoded, as a string")
}

// BaseEndpoint on the config reaches the stand-in too, for callers that
// build aws.Config themselves.
func TestGetBaseEndpoint(t *testing.T) {
	stub := &smStub{}
	srv := httptest.NewServer(stub)
	defer srv.Close()
	cfg := aws.Config{Region: "us-west-2", Credentials: staticCreds(), BaseEndpoint: aws.String(srv.URL)}
	v, err := Get(context.Background(), cfg, arnKey)
	require.NoError(t, err)
	assert.Equal(t, theValue, v)
	assert.Len(t, stub.requests(), 1)
}

func TestGetErrors(t *testing.T) {
	_, cfg := newStub(t)

	t.Run("not found", func(t *testing.T) {
		v, err := Get(context.Background(), cfg, arnMissing)
		require.Error(t, err)
		assert.Empty(t, v)
		var nf *types.ResourceNotFoundException
		require.ErrorAs(t, err, &nf)
		assert.True(t, strings.HasPrefix(err.Error(), "get secret "+arnMissing+": "), "got %q", err)
		assert.Contains(t, err.Error(), "can't find the specified secret")
		assertNoValue(t, err)
	})

	t.Run("access denied", func(t *testing.T) {
		v, err := Get(context.Background(), cfg, arnDenied)
		require.Error(t, err)
		assert.Empty(t, v)
		var api smithy.APIError
		require.ErrorAs(t, err, &api)
		assert.Equal(t, "AccessDeniedException", api.ErrorCode())
		assert.Contains(t, err.Error(), "is not authorized to perform: secretsmanager:GetSecretValue")
		assertNoValue(t, err)
	})

	t.Run("empty", func(t *testing.T) {
		v, err := Get(context.Background(), cfg, arnEmpty)
		require.EqualError(t, err, "get secret "+arnEmpty+": the secret's current value is empty")
		assert.Empty(t, v)
	})

	t.Run("no arn", func(t *testing.T) {
		_, err := Get(context.Background(), cfg, "")
		require.EqualError(t, err, "get secret: no secret ARN")
	})
}

// assertNoValue checks that no line of the secret is in the error.
func assertNoValue(t *testing.T, err error) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(theValue), "\n") {
		assert.NotContains(t, err.Error(), line)
	}
	for e := err; e != nil; e = errors.Unwrap(e) {
		assert.NotContains(t, e.Error(), "MIIEsecret")
	}
}
