package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

func state(epoch int) State {
	return State{Run: "gcn cora", Epoch: epoch, Position: int64(10 * epoch), Seed: 7, RNG: []byte{1, 2, 3},
		Tensors: map[string][]float32{"w0": {1, 2, float32(epoch)}, "m0": make([]float32, 70000)}}
}

// stores returns a folder and, when MinIO is available, an S3 prefix on a real MinIO server.
func stores(t *testing.T) map[string]Store {
	t.Helper()
	srv := minio.Start(t)
	bucket := srv.Bucket(t, "ckpt")
	return map[string]Store{
		"dir": Dir(filepath.Join(t.TempDir(), "ckpt")),
		"s3":  S3{Client: srv.Client(), Bucket: bucket, Prefix: "runs/a"},
	}
}

func TestSaveLatestKeep(t *testing.T) {
	ctx := context.Background()
	for kind, st := range stores(t) {
		c := Checkpoints{Store: st, Keep: 2}
		if _, _, err := c.Latest(ctx); !errors.Is(err, ErrNone) {
			t.Fatalf("%s: empty store: %v, want ErrNone", kind, err)
		}
		for ep := 1; ep <= 4; ep++ {
			if err := c.Save(ctx, state(ep)); err != nil {
				t.Fatal(err)
			}
		}
		s, skipped, err := c.Latest(ctx)
		if err != nil || len(skipped) != 0 {
			t.Fatal(kind, err, skipped)
		}
		want := state(4)
		if s.Run != want.Run || s.Epoch != 4 || s.Position != 40 || s.Seed != 7 || !slices.Equal(s.RNG, want.RNG) ||
			!slices.Equal(s.Tensors["w0"], want.Tensors["w0"]) || len(s.Tensors["m0"]) != 70000 {
			t.Errorf("%s: restored %+v", kind, s)
		}
		if eps, _ := c.Epochs(ctx); !slices.Equal(eps, []int{4, 3}) {
			t.Errorf("%s: kept %v, want [4 3]", kind, eps)
		}
		names, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(names)
		if want := []string{name(3, ".bin"), name(3, ".json"), name(4, ".bin"), name(4, ".json")}; !slices.Equal(names, want) {
			t.Errorf("%s: objects %v, want %v", kind, names, want)
		}
	}
}

func TestLatestSkipsTornAndCorrupt(t *testing.T) {
	ctx := context.Background()
	for kind, st := range stores(t) {
		c := Checkpoints{Store: st}
		for ep := 1; ep <= 3; ep++ {
			if err := c.Save(ctx, state(ep)); err != nil {
				t.Fatal(err)
			}
		}
		// epoch 3: one flipped byte; epoch 4: a data object whose manifest was never
		// published; epoch 5: a manifest whose data object is gone.
		b, err := st.Get(ctx, name(3, ".bin"))
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 1
		m5, _ := st.Get(ctx, name(3, ".json"))
		m5 = []byte(strings.Replace(string(m5), name(3, ".bin"), name(5, ".bin"), 1))
		for n, data := range map[string][]byte{name(3, ".bin"): b, name(4, ".bin"): b[:10], name(5, ".json"): m5} {
			if err := st.Put(ctx, n, data); err != nil {
				t.Fatal(err)
			}
		}
		s, skipped, err := c.Latest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Epoch != 2 || len(skipped) != 2 || !strings.Contains(skipped[1].Error(), "checksum mismatch") {
			t.Errorf("%s: latest epoch %d, skipped %v; want epoch 2 with epochs 5 (no data) and 3 (checksum) skipped", kind, s.Epoch, skipped)
		}
	}
}

// TestUnreachableStoreIsAnError checks that a store that cannot be reached fails Latest with an
// error naming it, rather than reporting "no checkpoint" (which would restart training).
func TestUnreachableStoreIsAnError(t *testing.T) {
	ctx := context.Background()
	srv := minio.Start(t)
	bucket := srv.Bucket(t, "ckpt")
	c := Checkpoints{Store: S3{Client: srv.Client(), Bucket: bucket, Prefix: "p", Backoff: objstore.Backoff{Attempts: 2}}}
	if err := c.Save(ctx, state(1)); err != nil {
		t.Fatal(err)
	}
	denied := s3.New(s3.Options{Region: minio.Region, BaseEndpoint: aws.String(srv.Endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "nobody", SecretAccessKey: "wrong-secret"}, nil
		})})
	_, _, err := Checkpoints{Store: S3{Client: denied, Bucket: bucket, Prefix: "p"}}.Latest(ctx)
	if !errors.Is(err, objstore.ErrAccessDenied) || errors.Is(err, ErrNone) || !strings.Contains(err.Error(), "s3://"+bucket+"/p/") {
		t.Errorf("wrong credentials: %v, want access denied naming s3://%s/p/", err, bucket)
	}
	srv.Stop()
	_, _, err = c.Latest(ctx)
	if err == nil || errors.Is(err, ErrNone) {
		t.Errorf("stopped server: %v, want a store error", err)
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	if st, err := Open(ctx, d, objstore.Config{}); err != nil || st.String() != d {
		t.Errorf("Open(%s) = %v, %v", d, st, err)
	}
	st, err := Open(ctx, "s3://bucket/a/b/", objstore.Config{Region: "us-east-1"})
	if s, ok := st.(S3); err != nil || !ok || s.Bucket != "bucket" || s.Prefix != "a/b" {
		t.Errorf("Open(s3://bucket/a/b/) = %#v, %v", st, err)
	}
	for _, bad := range []string{"", "s3://", "s3:///x"} {
		if _, err := Open(ctx, bad, objstore.Config{Region: "us-east-1"}); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
	if err := Dir(d).Put(ctx, "x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(d); len(ents) != 1 {
		t.Errorf("a temporary file is left behind: %v", ents)
	}
}
