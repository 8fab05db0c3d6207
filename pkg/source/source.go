package source

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

var (
	// ErrChecksum reports downloaded bytes that fail a checksum: a prepared file's CRC-32C or an
	// archive's SHA-256.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrChanged reports an object that changed while it was being downloaded.
	ErrChanged = errors.New("object changed during download")
	// ErrStalled reports a transfer that received no data for Options.StallTimeout.
	ErrStalled = errors.New("transfer stalled")
)

// DefaultStallTimeout is how long an attempt may receive nothing before it is retried.
const DefaultStallTimeout = 30 * time.Second

// Options say where downloads go and how to reach the stores.
type Options struct {
	Dir          string           // cache folder for downloads; empty: $TMPDIR/dorylus-datasets
	S3           objstore.Config  // how to reach S3 where the dataset's own S3 fields are empty
	HTTPClient   *http.Client     // client for http(s) URLs; nil: http.DefaultClient
	Partition    int              // with Partitions > 0: the partition a graph server holds
	Partitions   int              // > 0: fetch only Partition's file of a partitioned dataset
	Backoff      objstore.Backoff // retries of failed and interrupted transfers
	StallTimeout time.Duration    // 0: DefaultStallTimeout
}

// IsRemote reports whether spec names a remote dataset: s3://, http:// or https://.
func IsRemote(spec string) bool {
	return strings.HasPrefix(spec, "s3://") || strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://")
}

// Parse turns the dataset spec of the command line into the run config's typed source, once:
// s3://bucket/prefix is an s3 source (its store reached as Options.S3 and the SDK's
// environment say), an http(s):// URL an http source, an existing local file or folder a pvc
// (local path) source, and anything else a builtin name or rmat: generator spec, which
// graph.Load resolves.
func Parse(spec string) (jobconfig.Dataset, error) {
	switch {
	case spec == "":
		return jobconfig.Dataset{}, errors.New("source: empty dataset spec")
	case strings.HasPrefix(spec, "s3://"):
		bucket, prefix, err := ParseS3(spec)
		if err != nil {
			return jobconfig.Dataset{}, err
		}
		return jobconfig.Dataset{Source: jobconfig.SourceS3, S3: &jobconfig.S3{Bucket: bucket, Prefix: prefix}}, nil
	case IsRemote(spec):
		return jobconfig.Dataset{Source: jobconfig.SourceHTTP, URL: spec}, nil
	}
	if _, err := os.Stat(spec); err == nil {
		return jobconfig.Dataset{Source: jobconfig.SourcePVC, Path: spec}, nil
	}
	return jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: spec}, nil
}

// Spec returns the command-line form of d: what Parse reads back to d.
func Spec(d jobconfig.Dataset) string {
	switch d.Source {
	case jobconfig.SourceS3:
		if d.S3 == nil {
			return "s3://"
		}
		return "s3://" + d.S3.Bucket + "/" + strings.Trim(d.S3.Prefix, "/")
	case jobconfig.SourceHTTP:
		return d.URL
	case jobconfig.SourcePVC:
		return d.Path
	}
	return d.Name
}

// Fetch returns a local path for dataset d: a builtin name or generator spec as it is (for
// graph.Load), a pvc source's path, or the folder or file a remote dataset was downloaded to
// under opts.Dir (see the package documentation). An s3 source's region, endpoint and
// credentials override opts.S3's; an http source's SHA256 is checked.
// No error of Fetch prints a URL's password or query (see Redact).
func Fetch(ctx context.Context, d jobconfig.Dataset, opts Options) (string, error) {
	local, err := fetch(ctx, d, opts)
	return local, redactErr(err, Spec(d))
}

func fetch(ctx context.Context, d jobconfig.Dataset, opts Options) (string, error) {
	switch d.Source {
	case jobconfig.SourceBuiltin:
		return d.Name, nil
	case jobconfig.SourcePVC:
		return d.Path, nil
	case jobconfig.SourceS3:
		if d.S3 == nil {
			return "", errors.New("source: s3 dataset without a bucket")
		}
		if d.S3.Region != "" {
			opts.S3.Region = d.S3.Region
		}
		if d.S3.Endpoint != "" {
			opts.S3.Endpoint = d.S3.Endpoint
		}
		if d.S3.CredentialsDir != "" {
			opts.S3.CredentialsDir = d.S3.CredentialsDir
		}
	case jobconfig.SourceHTTP:
	default:
		return "", fmt.Errorf("source: dataset source %q: want %s, %s, %s or %s", d.Source,
			jobconfig.SourceBuiltin, jobconfig.SourcePVC, jobconfig.SourceS3, jobconfig.SourceHTTP)
	}
	spec := Spec(d)
	if opts.Partitions < 0 || (opts.Partitions > 0 && (opts.Partition < 0 || opts.Partition >= opts.Partitions)) {
		return "", fmt.Errorf("source: %s: partition %d of %d", spec, opts.Partition, opts.Partitions)
	}
	root := opts.Dir
	if root == "" {
		root = filepath.Join(os.TempDir(), "dorylus-datasets")
	}
	sum := sha256.Sum256([]byte(spec))
	f := &fetcher{opts: opts, sha256: d.SHA256, dir: filepath.Join(root, fmt.Sprintf("%x", sum[:8]))}
	if f.opts.StallTimeout <= 0 {
		f.opts.StallTimeout = DefaultStallTimeout
	}
	if f.opts.HTTPClient == nil {
		f.opts.HTTPClient = http.DefaultClient
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return "", fmt.Errorf("source: %s: %w", spec, err)
	}
	if d.Source == jobconfig.SourceS3 {
		return f.fetchS3(ctx, d.S3, spec)
	}
	return f.fetchHTTP(ctx, d.URL)
}

// fetcher downloads one dataset into dir.
type fetcher struct {
	opts   Options
	sha256 string // expected hex SHA-256 of a single http(s) object, if known
	dir    string
}

// partitionFile returns the name of the partition file to fetch, or "" for the whole dataset.
func (f *fetcher) partitionFile() string {
	if f.opts.Partitions == 0 {
		return ""
	}
	return graph.PartitionFileName(f.opts.Partition, f.opts.Partitions)
}

// localPath returns the local path of rel (a slash-separated path inside the dataset),
// refusing one that would leave the download folder.
func (f *fetcher) localPath(desc, rel string) (string, error) {
	clean := path.Clean("/" + rel)[1:]
	if clean == "" || clean != strings.TrimPrefix(rel, "./") || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("source: %s: unsafe path %q inside the dataset", desc, rel)
	}
	return filepath.Join(f.dir, filepath.FromSlash(clean)), nil
}
