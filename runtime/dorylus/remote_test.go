package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// upload puts the file src into bucket under key.
func upload(t *testing.T, m *minio.Server, bucket, key, src string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := m.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: f}); err != nil {
		t.Fatalf("upload %s: %v", key, err)
	}
}

func TestTrainFromS3(t *testing.T) {
	m := minio.Start(t)
	m.Env(t)
	t.Setenv(objstore.EnvEndpoint, m.Endpoint)
	t.Setenv("TMPDIR", t.TempDir())
	prepared := filepath.Join(t.TempDir(), "cora.dorylus")
	if _, logs, err := run(t, "prepare", "cora", prepared); err != nil {
		t.Fatalf("prepare: %v\n%s", err, logs)
	}
	bucket := m.Bucket(t, "train")
	upload(t, m, bucket, "sets/cora.dorylus", prepared)

	local, _, err := run(t, "train", "--epochs", "10", "--output", "json", "--dataset", prepared)
	if err != nil {
		t.Fatal(err)
	}
	remote, logs, err := run(t, "train", "--epochs", "10", "--output", "json", "--dataset", "s3://"+bucket+"/sets/cora.dorylus")
	if err != nil {
		t.Fatalf("train from s3: %v\n%s", err, logs)
	}
	var a, b struct {
		TestAccuracy float64 `json:"test_accuracy"`
	}
	if err := json.Unmarshal([]byte(local), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(remote), &b); err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("the dataset from S3 trains differently: local %+v, s3 %+v", a, b)
	}
	if _, _, err := run(t, "train", "--epochs", "1", "--dataset", "s3://"+bucket+"/sets/missing.dorylus"); err == nil {
		t.Error("training on a missing object succeeded")
	}
}

// TestLoadPartitionFromS3 checks that a graph server configured with an s3 dataset source reads
// its own partition of a partitioned dataset, and downloads nothing else.
func TestLoadPartitionFromS3(t *testing.T) {
	m := minio.Start(t)
	d, err := graph.RMAT(graph.RMATParams{Nodes: 2000, Edges: 20000, Features: 8, Classes: 3, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prepared, parts := filepath.Join(dir, "rmat.dorylus"), filepath.Join(dir, "parts")
	if err := graph.WritePreparedFile(prepared, d); err != nil {
		t.Fatal(err)
	}
	if _, _, err := partition.WritePrepared(prepared, 3, parts); err != nil {
		t.Fatal(err)
	}
	bucket := m.Bucket(t, "parts")
	files, err := os.ReadDir(parts)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range files {
		upload(t, m, bucket, "rmat/"+e.Name(), filepath.Join(parts, e.Name()))
	}
	creds, err := m.CredentialsDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ds := jobconfig.Dataset{Source: jobconfig.SourceS3, S3: &jobconfig.S3{
		Bucket: bucket, Prefix: "rmat", Region: minio.Region, Endpoint: m.Endpoint, CredentialsDir: creds}}
	fetch := source.Options{Dir: t.TempDir()}
	got, err := graphserver.LoadPartition(context.Background(), ds, fetch, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	want, err := graph.ReadPartitionFile(parts, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Part != want.Part || !slices.Equal(got.Adj.RowPtr, want.Adj.RowPtr) || !slices.Equal(got.Adj.ColIdx, want.Adj.ColIdx) || !slices.Equal(got.GhostIDs, want.GhostIDs) {
		t.Errorf("partition 1 from S3 differs from the local file")
	}
	var fetched []string
	_ = filepath.WalkDir(fetch.Dir, func(p string, e os.DirEntry, err error) error { // unreadable entries are skipped
		if err == nil && !e.IsDir() && !strings.HasPrefix(e.Name(), ".") { // .NAME.etag: the cache's sidecar
			fetched = append(fetched, e.Name())
		}
		return nil
	})
	if len(fetched) != 1 || fetched[0] != graph.PartitionFileName(1, 3) {
		t.Errorf("downloaded %v, want only %s", fetched, graph.PartitionFileName(1, 3))
	}
}
