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

// stores returns a folder and an S3 prefix on a real MinIO server.
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

// TestRunsKeepToTheirOwn saves the checkpoints of two runs in their own folders of one store
// (the demonstrated loss: an older run's epochs 280, 290 and 300 beside a new run's 10, 20,
// 30): each run's prune keeps its own newest Keep and never touches the other's, the store lists
// both folders, and a run refuses to load a checkpoint the other wrote.
func TestRunsKeepToTheirOwn(t *testing.T) {
	ctx := context.Background()
	for kind, root := range stores(t) {
		old := Checkpoints{Store: root.Sub("run-old"), Keep: 3, RunID: "old"}
		for _, ep := range []int{280, 290, 300} {
			if err := old.Save(ctx, state(ep)); err != nil {
				t.Fatal(err)
			}
		}
		fresh := Checkpoints{Store: root.Sub("run-new"), Keep: 2, RunID: "new"}
		for _, ep := range []int{10, 20, 30} {
			if err := fresh.Save(ctx, state(ep)); err != nil {
				t.Fatal(err)
			}
			if eps, err := fresh.Epochs(ctx); err != nil || eps[0] != ep {
				t.Fatalf("%s: after saving epoch %d the new run has %v (%v)", kind, ep, eps, err)
			}
		}
		if eps, _ := fresh.Epochs(ctx); !slices.Equal(eps, []int{30, 20}) {
			t.Errorf("%s: the new run kept %v, want [30 20]", kind, eps)
		}
		if eps, _ := old.Epochs(ctx); !slices.Equal(eps, []int{300, 290, 280}) {
			t.Errorf("%s: the old run kept %v, want [300 290 280]", kind, eps)
		}
		folders, err := root.Folders(ctx)
		slices.Sort(folders)
		if err != nil || !slices.Equal(folders, []string{"run-new", "run-old"}) {
			t.Errorf("%s: folders %v (%v), want [run-new run-old]", kind, folders, err)
		}
		if names, _ := root.List(ctx); len(names) != 0 {
			t.Errorf("%s: objects outside the runs' folders: %v", kind, names)
		}
		mixed := Checkpoints{Store: old.Store, RunID: "new"}
		if _, err := mixed.Load(ctx, 300); err == nil || IsCorrupt(err) || !strings.Contains(err.Error(), `is of run "old", not of this run ("new")`) {
			t.Errorf("%s: loading another run's checkpoint: %v", kind, err)
		}
		if _, _, err := mixed.Latest(ctx); err == nil || errors.Is(err, ErrNone) {
			t.Errorf("%s: latest of another run's folder: %v, want a refusal", kind, err)
		}
	}
}
