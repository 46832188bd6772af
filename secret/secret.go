// Package secret reads the one secret the Lambda needs (the GitHub App's
// private key or a token) from AWS Secrets Manager. The caller reads it once
// per cold start and keeps it; this package keeps nothing.
package secret

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// Get returns the current value (AWSCURRENT) of the secret named by arn:
// its SecretString, or its SecretBinary as a string when it has no string.
// An empty secret is an error. Errors name the ARN and wrap the SDK's
// error (so errors.As finds *types.ResourceNotFoundException and the like),
// and never hold any part of the value. The endpoint is awsCfg's, so
// AWS_ENDPOINT_URL_SECRETS_MANAGER (a VPC endpoint) applies when awsCfg was
// loaded with config.LoadDefaultConfig.
func Get(ctx context.Context, awsCfg aws.Config, arn string) (string, error) {
	if arn == "" {
		return "", errors.New("get secret: no secret ARN")
	}
	out, err := secretsmanager.NewFromConfig(awsCfg).GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		// The SDK's error holds the service's message and request id,
		// never the value: an error answer carries no secret.
		return "", fmt.Errorf("get secret %s: %w", arn, err)
	}
	v := aws.ToString(out.SecretString)
	if v == "" {
		v = string(out.SecretBinary)
	}
	if v == "" {
		return "", fmt.Errorf("get secret %s: the secret's current value is empty", arn)
	}
	return v, nil
}
