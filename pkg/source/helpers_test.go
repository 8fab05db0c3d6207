package source_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

// fixture is a small R-MAT dataset written as a prepared file and as 3 partition files.
type fixture struct {
	d        *graph.Dataset
	prepared string // the prepared file
	parts    string // the partitioned folder
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	d, err := graph.RMAT(graph.RMATParams{Nodes: 3000, Edges: 30000, Features: 16, Classes: 4, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := fixture{d: d, prepared: filepath.Join(dir, "rmat.dorylus"), parts: filepath.Join(dir, "parts")}
	if err := graph.WritePreparedFile(f.prepared, d); err != nil {
		t.Fatal(err)
	}
	if _, _, err := partition.WritePrepared(f.prepared, 3, f.parts); err != nil {
		t.Fatal(err)
	}
	return f
}

// sameDataset fails t unless a and b hold the same graph, features and split.
func sameDataset(t *testing.T, a, b *graph.Dataset) {
	t.Helper()
	switch {
	case a.NumNodes() != b.NumNodes() || !slices.Equal(a.Adj.ColIdx, b.Adj.ColIdx) || !slices.Equal(a.Adj.RowPtr, b.Adj.RowPtr):
		t.Fatalf("adjacency differs: %d vs %d nodes", a.NumNodes(), b.NumNodes())
	case !slices.Equal(a.Labels, b.Labels) || !slices.Equal(a.Train, b.Train) || !slices.Equal(a.Test, b.Test):
		t.Fatal("labels or splits differ")
	case a.Features.Dense != nil && !slices.Equal(a.Features.Dense.Data, b.Features.Dense.Data):
		t.Fatal("dense features differ")
	case a.Features.Sparse != nil && !slices.Equal(a.Features.Sparse.ColIdx, b.Features.Sparse.ColIdx):
		t.Fatal("sparse features differ")
	}
}

// upload puts the file at path under key.
func upload(t *testing.T, c *s3.Client, bucket, key, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	putBytes(t, c, bucket, key, b)
}

func putBytes(t *testing.T, c *s3.Client, bucket, key string, b []byte) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(b)}); err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

// uploadDir puts every file of dir under prefix/.
func uploadDir(t *testing.T, c *s3.Client, bucket, prefix, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		upload(t, c, bucket, prefix+"/"+e.Name(), filepath.Join(dir, e.Name()))
	}
}

// files lists the names of the regular files under dir, recursively, relative to it.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// options returns fetch options for srv with fast retries and a fresh download folder.
func options(t *testing.T, cfg objstore.Config) source.Options {
	return source.Options{Dir: t.TempDir(), S3: cfg, StallTimeout: 2 * time.Second,
		Backoff: objstore.Backoff{Attempts: 5, Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}}
}

// startMinio starts MinIO with one bucket.
func startMinio(t *testing.T) (*minio.Server, string) {
	srv := minio.Start(t)
	srv.Env(t)
	return srv, srv.Bucket(t, "datasets")
}

// dataset parses a command-line dataset spec, as dorylus train does.
func dataset(t *testing.T, spec string) jobconfig.Dataset {
	t.Helper()
	d, err := source.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
