package objstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// EnvEndpoint is the standard SDK variable naming an S3 endpoint; Client honours it when
// Config.Endpoint is empty, with path-style addressing as for an explicit endpoint.
const EnvEndpoint = "AWS_ENDPOINT_URL_S3"

// defaultRegion is the region used with an endpoint override when none is configured:
// S3-compatible stores (MinIO) accept any region but the SDK needs one to sign.
const defaultRegion = "us-east-1"

// Config says how to reach an S3-compatible store.
type Config struct {
	Region         string // the bucket's region; empty: the SDK's default (AWS_REGION, ~/.aws/config)
	Endpoint       string // endpoint override (an S3-compatible store); implies path-style addressing
	PathStyle      bool   // path-style addressing even without an endpoint override
	CredentialsDir string // folder with files accessKeyID, secretAccessKey and optionally sessionToken; empty: the default chain
}

// Client returns an S3 client for c, with the SDK's retries off (callers retry with Backoff).
func (c Config) Client(ctx context.Context) (*s3.Client, error) {
	var opts []func(*config.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	if c.CredentialsDir != "" {
		p, err := StaticCredentials(c.CredentialsDir)
		if err != nil {
			return nil, err
		}
		opts = append(opts, config.WithCredentialsProvider(p))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("objstore: S3 configuration: %w", err)
	}
	endpoint := c.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv(EnvEndpoint)
	}
	if cfg.Region == "" {
		if endpoint == "" {
			return nil, fmt.Errorf("objstore: no S3 region: set the bucket's region (or AWS_REGION)")
		}
		cfg.Region = defaultRegion
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
		if c.PathStyle {
			o.UsePathStyle = true
		}
		o.Retryer = aws.NopRetryer{}
		o.DisableLogOutputChecksumValidationSkipped = true // MinIO answers without checksums; the SDK would log each GET
	}), nil
}

// StaticCredentials reads the credential files of a mounted Secret (jobconfig's
// CredentialsDir): accessKeyID, secretAccessKey and optionally sessionToken.
func StaticCredentials(dir string) (credentials.StaticCredentialsProvider, error) {
	read := func(name string, required bool) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			if !required && os.IsNotExist(err) {
				return "", nil
			}
			return "", fmt.Errorf("credentials: %w", err)
		}
		v := strings.TrimSpace(string(b))
		if required && v == "" {
			return "", fmt.Errorf("credentials: %s is empty", filepath.Join(dir, name))
		}
		return v, nil
	}
	id, err := read("accessKeyID", true)
	if err != nil {
		return credentials.StaticCredentialsProvider{}, err
	}
	secret, err := read("secretAccessKey", true)
	if err != nil {
		return credentials.StaticCredentialsProvider{}, err
	}
	token, err := read("sessionToken", false)
	if err != nil {
		return credentials.StaticCredentialsProvider{}, err
	}
	return credentials.NewStaticCredentialsProvider(id, secret, token), nil
}
