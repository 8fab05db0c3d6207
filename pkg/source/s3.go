package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// ParseS3 splits s3://bucket/prefix into the bucket and the prefix (without surrounding slashes).
func ParseS3(spec string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(spec, "s3://")
	bucket, prefix, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("source: %q: want s3://bucket/prefix", spec)
	}
	return bucket, strings.Trim(prefix, "/"), nil
}

// s3Object is one object to fetch and where it goes.
type s3Object struct {
	key, rel string // the key, and its path relative to the dataset
}

// fetchS3 fetches the dataset at loc, spec in messages.
func (f *fetcher) fetchS3(ctx context.Context, loc *jobconfig.S3, spec string) (string, error) {
	bucket, prefix := loc.Bucket, strings.Trim(loc.Prefix, "/")
	if bucket == "" {
		return "", fmt.Errorf("source: %q: want s3://bucket/prefix", spec)
	}
	client, err := f.opts.S3.Client(ctx)
	if err != nil {
		return "", fmt.Errorf("source: %s: %w", spec, err)
	}
	desc := func(key string) string { return "s3://" + bucket + "/" + key }
	folder := prefix + "/"
	if prefix == "" {
		folder = ""
	}
	if name := f.partitionFile(); name != "" {
		key := folder + name
		ok, err := f.s3Exists(ctx, client, bucket, key)
		if err != nil {
			return "", err
		}
		if ok {
			return f.dir, f.s3Get(ctx, client, bucket, s3Object{key, name}, desc(key))
		}
	}
	objs, err := f.s3List(ctx, client, bucket, folder)
	if err != nil {
		return "", err
	}
	if len(objs) == 0 { // not a folder: a single object
		if prefix == "" {
			return "", fmt.Errorf("source: s3://%s/: bucket holds no objects: %w", bucket, objstore.ErrNotFound)
		}
		ok, err := f.s3Exists(ctx, client, bucket, prefix)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("source: %s: no such object and no objects under %s: %w", desc(prefix), desc(folder), objstore.ErrNotFound)
		}
		dst := filepath.Join(f.dir, graph.PreparedFileName)
		return dst, f.s3Get(ctx, client, bucket, s3Object{prefix, graph.PreparedFileName}, desc(prefix))
	}
	for _, o := range objs {
		if err := f.s3Get(ctx, client, bucket, o, desc(o.key)); err != nil {
			return "", err
		}
	}
	return f.dir, nil
}

// s3Exists reports whether the object exists (HEAD), retrying transient failures.
func (f *fetcher) s3Exists(ctx context.Context, client *s3.Client, bucket, key string) (bool, error) {
	err := f.opts.Backoff.Do(ctx, func(ctx context.Context) error {
		_, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		return err
	})
	switch err = objstore.Classify(err); {
	case err == nil:
		return true, nil
	case errors.Is(err, objstore.ErrNotFound) && !f.bucketMissing(ctx, client, bucket):
		return false, nil
	}
	return false, fmt.Errorf("source: s3://%s/%s: %w", bucket, key, err)
}

// bucketMissing tells a missing bucket from a missing key (HEAD answers 404 for both).
func (f *fetcher) bucketMissing(ctx context.Context, client *s3.Client, bucket string) bool {
	_, err := client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	return errors.Is(objstore.Classify(err), objstore.ErrNotFound)
}

// s3List returns the objects under folder (every key, recursively), skipping folder markers.
func (f *fetcher) s3List(ctx context.Context, client *s3.Client, bucket, folder string) ([]s3Object, error) {
	var out []s3Object
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(folder)})
	for p.HasMorePages() {
		var page *s3.ListObjectsV2Output
		err := f.opts.Backoff.Do(ctx, func(ctx context.Context) (err error) {
			page, err = p.NextPage(ctx)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("source: s3://%s/%s: list: %w", bucket, folder, objstore.Classify(err))
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if rel := strings.TrimPrefix(key, folder); rel != "" && !strings.HasSuffix(rel, "/") {
				out = append(out, s3Object{key, rel})
			}
		}
	}
	return out, nil
}

// s3Get downloads one object into the dataset folder.
func (f *fetcher) s3Get(ctx context.Context, client *s3.Client, bucket string, o s3Object, desc string) error {
	dst, err := f.localPath(desc, o.rel)
	if err != nil {
		return err
	}
	open := func(ctx context.Context, off int64, etag string) (io.ReadCloser, int64, string, error) {
		in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key)}
		if off > 0 {
			in.Range = aws.String(fmt.Sprintf("bytes=%d-", off))
		}
		if etag != "" {
			in.IfMatch = aws.String(etag)
		}
		out, err := client.GetObject(ctx, in)
		if err != nil {
			if st, _ := statusCode(err); st == 412 {
				return nil, 0, "", fmt.Errorf("%w (ETag %s no longer matches)", ErrChanged, etag)
			}
			return nil, 0, "", err
		}
		size := int64(-1)
		if out.ContentLength != nil {
			size = off + *out.ContentLength
		}
		return out.Body, size, aws.ToString(out.ETag), nil
	}
	return f.download(ctx, desc, open, dst, "")
}

// statusCode returns the HTTP status an error carries, if any.
func statusCode(err error) (int, bool) {
	var e *objstore.Error
	if errors.As(objstore.Classify(err), &e) && e.Status != 0 {
		return e.Status, true
	}
	return 0, false
}
