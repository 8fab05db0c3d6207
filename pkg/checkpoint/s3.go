package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// S3 is a key prefix in an S3 bucket holding checkpoints. Transient failures are retried
// with Backoff; errors name the bucket and key.
type S3 struct {
	Client  *s3.Client
	Bucket  string
	Prefix  string // without surrounding slashes; empty for the bucket's root
	Backoff objstore.Backoff
}

func (s S3) key(name string) string {
	if s.Prefix == "" {
		return name
	}
	return s.Prefix + "/" + name
}

// String returns s3://bucket/prefix.
func (s S3) String() string { return "s3://" + s.Bucket + "/" + s.Prefix }

func (s S3) fail(op, name string, err error) error {
	return fmt.Errorf("checkpoint: %s s3://%s/%s: %w", op, s.Bucket, s.key(name), objstore.Classify(err))
}

// Put uploads data as one object (visible only once complete).
func (s S3) Put(ctx context.Context, name string, data []byte) error {
	err := s.Backoff.Do(ctx, func(ctx context.Context) error {
		_, err := s.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(s.key(name)),
			Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
		return objstore.Classify(err)
	})
	if err != nil {
		return s.fail("put", name, err)
	}
	return nil
}

// Get downloads an object.
func (s S3) Get(ctx context.Context, name string) ([]byte, error) {
	var b []byte
	err := s.Backoff.Do(ctx, func(ctx context.Context) error {
		out, err := s.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(s.key(name))})
		if err != nil {
			return objstore.Classify(err)
		}
		defer out.Body.Close()
		b, err = io.ReadAll(out.Body)
		return objstore.Classify(err)
	})
	if err != nil {
		return nil, s.fail("get", name, err)
	}
	return b, nil
}

// List returns the names of the objects directly under the prefix.
func (s S3) List(ctx context.Context) ([]string, error) {
	names, _, err := s.list(ctx)
	return names, err
}

// Folders returns the names of the folders (common prefixes) directly under the prefix.
func (s S3) Folders(ctx context.Context) ([]string, error) {
	_, folders, err := s.list(ctx)
	return folders, err
}

// Sub returns the prefix prefix/name.
func (s S3) Sub(name string) Store {
	s.Prefix = strings.Trim(s.key(name), "/")
	return s
}

// list returns the names of the objects and of the folders directly under the prefix.
func (s S3) list(ctx context.Context) (names, folders []string, _ error) {
	folder := s.key("")
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(folder), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		var page *s3.ListObjectsV2Output
		err := s.Backoff.Do(ctx, func(ctx context.Context) error {
			var err error
			page, err = p.NextPage(ctx)
			return objstore.Classify(err)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("checkpoint: list s3://%s/%s: %w", s.Bucket, folder, err)
		}
		for _, o := range page.Contents {
			names = append(names, aws.ToString(o.Key)[len(folder):])
		}
		for _, c := range page.CommonPrefixes {
			folders = append(folders, strings.TrimSuffix(aws.ToString(c.Prefix)[len(folder):], "/"))
		}
	}
	return names, folders, nil
}

// Delete removes an object; a missing one is not an error.
func (s S3) Delete(ctx context.Context, name string) error {
	err := s.Backoff.Do(ctx, func(ctx context.Context) error {
		_, err := s.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(s.key(name))})
		return objstore.Classify(err)
	})
	if err != nil && !errors.Is(err, objstore.ErrNotFound) {
		return s.fail("delete", name, err)
	}
	return nil
}
