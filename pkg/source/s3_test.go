package source_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

func TestS3Layouts(t *testing.T) {
	srv, bucket := startMinio(t)
	fx := newFixture(t)
	c := srv.Client()
	upload(t, c, bucket, "single/rmat.dorylus", fx.prepared)
	upload(t, c, bucket, "folder/"+graph.PreparedFileName, fx.prepared)
	uploadDir(t, c, bucket, "text/cora", "../../datasets/cora")
	ctx := context.Background()

	// One object, with credentials from a mounted folder instead of the environment.
	cfg := srv.Config()
	var err error
	if cfg.CredentialsDir, err = srv.CredentialsDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	p, err := source.Fetch(ctx, dataset(t, "s3://"+bucket+"/single/rmat.dorylus"), options(t, cfg))
	if err != nil {
		t.Fatal(err)
	}
	d, err := graph.Load(p, graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameDataset(t, fx.d, d)

	// A prepared folder and a plain-text folder, credentials from the default chain.
	srv.Env(t)
	p, err = source.Fetch(ctx, dataset(t, "s3://"+bucket+"/folder/"), options(t, srv.Config()))
	if err != nil {
		t.Fatal(err)
	}
	if d, err = graph.Load(p, graph.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	sameDataset(t, fx.d, d)
	p, err = source.Fetch(ctx, dataset(t, "s3://"+bucket+"/text/cora"), options(t, srv.Config()))
	if err != nil {
		t.Fatal(err)
	}
	if d, err = graph.Load(p, graph.LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	cora, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameDataset(t, cora, d)
}

// TestS3OwnPartitionOnly checks that a graph server downloads only its own partition file.
func TestS3OwnPartitionOnly(t *testing.T) {
	srv, bucket := startMinio(t)
	fx := newFixture(t)
	uploadDir(t, srv.Client(), bucket, "parts", fx.parts)
	opts := options(t, srv.Config())
	opts.Partition, opts.Partitions = 1, 3
	dir, err := source.Fetch(context.Background(), dataset(t, "s3://"+bucket+"/parts"), opts)
	if err != nil {
		t.Fatal(err)
	}
	name := graph.PartitionFileName(1, 3)
	if got := files(t, opts.Dir); len(got) != 2 || !slices.Contains(got, filepath.Join(filepath.Base(dir), name)) {
		t.Fatalf("downloaded %v, want only %s (and its ETag note)", got, name)
	}
	got, err := graph.ReadPartitionFile(filepath.Join(dir, name), 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	want, err := graph.ReadPartitionFile(filepath.Join(fx.parts, name), 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Adj.ColIdx, want.Adj.ColIdx) || !slices.Equal(got.GhostIDs, want.GhostIDs) {
		t.Fatal("downloaded partition differs from the local one")
	}
	// A second fetch at the same ETag keeps the file.
	st, _ := os.Stat(filepath.Join(dir, name))
	if _, err := source.Fetch(context.Background(), dataset(t, "s3://"+bucket+"/parts"), opts); err != nil {
		t.Fatal(err)
	}
	if st2, _ := os.Stat(filepath.Join(dir, name)); !st2.ModTime().Equal(st.ModTime()) {
		t.Error("an unchanged partition file was downloaded again")
	}
}

func TestS3Errors(t *testing.T) {
	srv, bucket := startMinio(t)
	fx := newFixture(t)
	c := srv.Client()
	b, err := os.ReadFile(fx.prepared)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(b)
	bad[len(bad)-100] ^= 0x40 // inside the last section
	putBytes(t, c, bucket, "corrupt.dorylus", bad)
	putBytes(t, c, bucket, "short.dorylus", b[:len(b)/2])
	ctx := context.Background()
	cases := []struct {
		name, spec string
		cfg        func(objstore.Config) objstore.Config
		want       []error
		msg        []string
	}{
		{"missing key", "s3://" + bucket + "/nope/dataset.dorylus", nil, []error{objstore.ErrNotFound}, []string{"s3://" + bucket + "/nope/dataset.dorylus", "not found"}},
		{"missing bucket", "s3://no-such-bucket-x/data", nil, []error{objstore.ErrNotFound}, []string{"s3://no-such-bucket-x/", "not found", "NoSuchBucket"}},
		{"bad credentials", "s3://" + bucket + "/corrupt.dorylus", func(c objstore.Config) objstore.Config {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "accessKeyID"), []byte("wrong"), 0o600)
			os.WriteFile(filepath.Join(dir, "secretAccessKey"), []byte("wrong-secret"), 0o600)
			c.CredentialsDir = dir
			return c
		}, []error{objstore.ErrAccessDenied}, []string{"s3://" + bucket, "access denied"}},
		{"corrupt object", "s3://" + bucket + "/corrupt.dorylus", nil, []error{source.ErrChecksum, graph.ErrCorrupt}, []string{"s3://" + bucket + "/corrupt.dorylus", "checksum mismatch", "section"}},
		{"truncated object", "s3://" + bucket + "/short.dorylus", nil, []error{source.ErrChecksum, graph.ErrCorrupt}, []string{"s3://" + bucket + "/short.dorylus", "truncated"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := srv.Config()
			if tc.cfg != nil {
				cfg = tc.cfg(cfg)
			}
			opts := options(t, cfg)
			start := time.Now()
			_, err := source.Fetch(ctx, dataset(t, tc.spec), opts)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not wrap %v", err, w)
				}
			}
			for _, m := range tc.msg {
				if err == nil || !strings.Contains(err.Error(), m) {
					t.Errorf("error %v does not say %q", err, m)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v to fail: permanent errors must not be retried", d)
			}
			for _, f := range files(t, opts.Dir) {
				if strings.HasSuffix(f, ".dorylus") || strings.Contains(f, ".part-") {
					t.Errorf("left %s behind after a failed download", f)
				}
			}
		})
	}
}

// TestS3Faults runs downloads through a proxy that answers 500s, cuts bodies and stalls, in
// front of the real server.
func TestS3Faults(t *testing.T) {
	srv, bucket := startMinio(t)
	fx := newFixture(t)
	upload(t, srv.Client(), bucket, "rmat.dorylus", fx.prepared)
	size := int64(len(mustRead(t, fx.prepared)))
	spec := "s3://" + bucket + "/rmat.dorylus"
	ctx := context.Background()
	fetchVia := func(t *testing.T, p *minio.FaultProxy) (string, error) {
		cfg := srv.Config()
		cfg.Endpoint = p.URL
		opts := options(t, cfg)
		opts.StallTimeout = 300 * time.Millisecond
		return source.Fetch(ctx, dataset(t, spec), opts)
	}
	check := func(t *testing.T, p string) {
		d, err := graph.Load(p, graph.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameDataset(t, fx.d, d)
	}
	t.Run("500s for a while", func(t *testing.T) {
		p := minio.NewFaultProxy(t, srv.Endpoint)
		p.Fail = 3
		path, err := fetchVia(t, p)
		if err != nil {
			t.Fatal(err)
		}
		check(t, path)
		if gets, _ := p.Seen(); gets != 4 {
			t.Errorf("%d GETs, want 3 failed and 1 good", gets)
		}
	})
	t.Run("cut connections resume", func(t *testing.T) {
		p := minio.NewFaultProxy(t, srv.Endpoint)
		p.Cuts, p.CutAfter = 3, size/5
		path, err := fetchVia(t, p)
		if err != nil {
			t.Fatal(err)
		}
		check(t, path)
		_, ranges := p.Seen()
		if len(ranges) != 4 || ranges[0] != "" {
			t.Fatalf("ranges requested %q, want a whole GET then 3 resumed ones", ranges)
		}
		for i, r := range ranges[1:] {
			if !strings.HasPrefix(r, "bytes=") || r == "bytes=0-" {
				t.Errorf("resume %d asked for %q, want a range from where the cut left off", i+1, r)
			}
		}
	})
	t.Run("stalled transfer is retried", func(t *testing.T) {
		p := minio.NewFaultProxy(t, srv.Endpoint)
		p.Stalls = 2
		start := time.Now()
		path, err := fetchVia(t, p)
		if err != nil {
			t.Fatal(err)
		}
		check(t, path)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %v with a 300ms stall timeout", d)
		}
	})
	t.Run("500s forever give up", func(t *testing.T) {
		p := minio.NewFaultProxy(t, srv.Endpoint)
		p.Fail = 1000
		_, err := fetchVia(t, p)
		if err == nil || !strings.Contains(err.Error(), spec) || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "gave up after 5 tries") {
			t.Fatalf("got %v, want a 500 error naming %s after 5 tries", err, spec)
		}
	})
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
