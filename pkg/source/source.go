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
	S3           objstore.Config  // how to reach S3
	HTTPClient   *http.Client     // client for http(s) URLs; nil: http.DefaultClient
	Partition    int              // with Partitions > 0: the partition a graph server holds
	Partitions   int              // > 0: fetch only Partition's file of a partitioned dataset
	SHA256       string           // expected hex SHA-256 of a single http(s) object, if known
	Backoff      objstore.Backoff // retries of failed and interrupted transfers
	StallTimeout time.Duration    // 0: DefaultStallTimeout
}

// IsRemote reports whether spec names a remote dataset: s3://, http:// or https://.
func IsRemote(spec string) bool {
	return strings.HasPrefix(spec, "s3://") || strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://")
}

// Fetch returns a local path for the dataset spec: spec itself when it is not remote, else the
// folder or file it was downloaded to under opts.Dir (see the package documentation).
func Fetch(ctx context.Context, spec string, opts Options) (string, error) {
	if !IsRemote(spec) {
		return spec, nil
	}
	if opts.Partitions < 0 || (opts.Partitions > 0 && (opts.Partition < 0 || opts.Partition >= opts.Partitions)) {
		return "", fmt.Errorf("source: %s: partition %d of %d", spec, opts.Partition, opts.Partitions)
	}
	root := opts.Dir
	if root == "" {
		root = filepath.Join(os.TempDir(), "dorylus-datasets")
	}
	sum := sha256.Sum256([]byte(spec))
	f := &fetcher{opts: opts, dir: filepath.Join(root, fmt.Sprintf("%x", sum[:8]))}
	if f.opts.StallTimeout <= 0 {
		f.opts.StallTimeout = DefaultStallTimeout
	}
	if f.opts.HTTPClient == nil {
		f.opts.HTTPClient = http.DefaultClient
	}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return "", fmt.Errorf("source: %s: %w", spec, err)
	}
	if strings.HasPrefix(spec, "s3://") {
		return f.fetchS3(ctx, spec)
	}
	return f.fetchHTTP(ctx, spec)
}

// fetcher downloads one dataset into dir.
type fetcher struct {
	opts Options
	dir  string
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
