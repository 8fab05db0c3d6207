package source_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

// fileServer serves named byte slices with ETags and Range support, cutting the first cuts
// bodies after cutAfter bytes.
type fileServer struct {
	files    map[string][]byte
	mu       sync.Mutex
	cuts     int
	cutAfter int64
	ranges   []string
}

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, ok := s.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	sum := sha256.Sum256(b)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	cut := s.cuts > 0
	if cut {
		s.cuts--
	}
	s.mu.Unlock()
	var rw http.ResponseWriter = w
	if cut {
		rw = &minio.CutWriter{ResponseWriter: w, Left: s.cutAfter}
	}
	http.ServeContent(rw, r, "", time.Time{}, bytes.NewReader(b))
}

func targz(t *testing.T, dir, top string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tw.WriteHeader(&tar.Header{Name: top + "/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, e := range entries {
		b := mustRead(t, filepath.Join(dir, e.Name()))
		tw.WriteHeader(&tar.Header{Name: top + "/" + e.Name(), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b))})
		tw.Write(b)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestHTTP(t *testing.T) {
	fx := newFixture(t)
	archive := targz(t, "../../datasets/cora", "cora")
	sum := sha256.Sum256(archive)
	fs := &fileServer{files: map[string][]byte{
		"/rmat.dorylus": mustRead(t, fx.prepared),
		"/cora.tar.gz":  archive,
		"/evil.tar.gz":  evilArchive(t),
		"/parts/" + graph.PartitionFileName(2, 3): mustRead(t, filepath.Join(fx.parts, graph.PartitionFileName(2, 3))),
	}}
	plain := httptest.NewServer(fs)
	defer plain.Close()
	tls := httptest.NewTLSServer(fs)
	defer tls.Close()
	ctx := context.Background()
	cora, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opts := func(t *testing.T) source.Options {
		o := options(t, objstore.Config{})
		o.HTTPClient = tls.Client() // trusts the test certificate; plain URLs work through it too
		return o
	}

	t.Run("prepared file over https, resumed", func(t *testing.T) {
		fs.cuts, fs.cutAfter = 2, 20000
		fs.ranges = nil
		p, err := source.Fetch(ctx, dataset(t, tls.URL+"/rmat.dorylus"), opts(t))
		if err != nil {
			t.Fatal(err)
		}
		d, err := graph.Load(p, graph.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameDataset(t, fx.d, d)
		if len(fs.ranges) != 3 || fs.ranges[1] != "bytes=20000-" || fs.ranges[2] != "bytes=40000-" {
			t.Errorf("ranges %q, want a whole GET and resumes at 20000 and 40000", fs.ranges)
		}
	})
	t.Run("archive with its SHA-256", func(t *testing.T) {
		o := opts(t)
		ds := dataset(t, plain.URL+"/cora.tar.gz")
		ds.SHA256 = hex.EncodeToString(sum[:])
		p, err := source.Fetch(ctx, ds, o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := graph.Load(p, graph.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameDataset(t, cora, d)
	})
	t.Run("archive with a wrong SHA-256", func(t *testing.T) {
		o := opts(t)
		ds := dataset(t, plain.URL+"/cora.tar.gz")
		ds.SHA256 = strings.Repeat("0", 64)
		_, err := source.Fetch(ctx, ds, o)
		if !errors.Is(err, source.ErrChecksum) || !strings.Contains(err.Error(), plain.URL+"/cora.tar.gz") {
			t.Fatalf("got %v, want a checksum mismatch naming the URL", err)
		}
		for _, f := range files(t, o.Dir) {
			t.Errorf("left %s behind", f)
		}
	})
	t.Run("archive escaping its folder", func(t *testing.T) {
		_, err := source.Fetch(ctx, dataset(t, plain.URL+"/evil.tar.gz"), opts(t))
		if err == nil || !strings.Contains(err.Error(), "leaves the archive's folder") {
			t.Fatalf("got %v, want the escaping entry refused", err)
		}
	})
	t.Run("partition of a folder URL", func(t *testing.T) {
		o := opts(t)
		o.Partition, o.Partitions = 2, 3
		dir, err := source.Fetch(ctx, dataset(t, plain.URL+"/parts/"), o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := graph.ReadPartitionFile(filepath.Join(dir, graph.PartitionFileName(2, 3)), 2, 3); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		_, err := source.Fetch(ctx, dataset(t, plain.URL+"/nope.dorylus"), opts(t))
		if !errors.Is(err, objstore.ErrNotFound) || !strings.Contains(err.Error(), plain.URL+"/nope.dorylus") || !strings.Contains(err.Error(), "404") {
			t.Fatalf("got %v, want not found naming the URL", err)
		}
	})
}

func evilArchive(t *testing.T) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "../escape.txt", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func TestLocalSpecUnchanged(t *testing.T) {
	for _, spec := range []string{"cora", "datasets/cora", "/abs/path", "rmat:nodes=10,edges=20"} {
		if source.IsRemote(spec) {
			t.Errorf("%q counted as remote", spec)
		}
		p, err := source.Fetch(context.Background(), dataset(t, spec), source.Options{})
		if err != nil || p != spec {
			t.Errorf("Fetch(%q) = %q, %v; want it unchanged", spec, p, err)
		}
	}
}
