package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/serve"
)

// partitionConfig is the part of a job's run config the partition step reads: Cora, parts
// graph servers, the files at loc.
func partitionConfig(parts int, loc jobconfig.Location) *jobconfig.RunConfig {
	return &jobconfig.RunConfig{Dataset: jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: "cora"},
		GraphServers: jobconfig.GraphServers{Replicas: parts}, Partitions: &loc}
}

// TestPartitionStepFolder: the step cuts Cora into one checked file per graph server with the
// manifest beside them and reports the manifest's cut; run again it reuses them; a corrupted
// file is refused naming it, and so are files of another count or another dataset, and a
// dataset that is already partition files.
func TestPartitionStepFolder(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "cora-parts")
	c := partitionConfig(3, jobconfig.Location{Path: dir})
	got, err := partitionStep(ctx, c, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m, err := partition.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Require(dir, 3); err != nil {
		t.Fatal(err)
	}
	if err := m.CheckHeaders(dir); err != nil {
		t.Fatal(err)
	}
	want := jobstatus.Partitions{Parts: 3, Method: string(partition.DefaultMethod), EdgeCut: m.Quality.CutRatio, Ghosts: m.Quality.Ghosts, Balance: m.Quality.Balance}
	if got != want || m.Dataset != "cora" || got.EdgeCut <= 0 || got.EdgeCut >= 0.5 || got.Ghosts <= 0 {
		t.Fatalf("reported %+v for manifest of %s %+v; want %+v, a cut in (0, 0.5)", got, m.Dataset, m.Quality, want)
	}
	for p := range 3 {
		data, err := graph.ReadPartitionFile(filepath.Join(dir, graph.PartitionFileName(p, 3)), p, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.CheckPart(filepath.Join(dir, graph.PartitionFileName(p, 3)), data); err != nil {
			t.Fatal(err)
		}
	}

	again, err := partitionStep(ctx, c, t.TempDir(), io.Discard)
	want.Reused = true
	if err != nil || again != want {
		t.Fatalf("second run: %+v, %v; want %+v (reused)", again, err, want)
	}

	victim := filepath.Join(dir, graph.PartitionFileName(1, 3))
	if err := os.Truncate(victim, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := partitionStep(ctx, c, t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), graph.PartitionFileName(1, 3)) {
		t.Fatalf("a corrupted file: %v, want an error naming %s", err, graph.PartitionFileName(1, 3))
	}

	if err := os.Truncate(victim, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := partitionStep(ctx, partitionConfig(2, jobconfig.Location{Path: dir}), t.TempDir(), io.Discard); err == nil ||
		!strings.Contains(err.Error(), "holds 3 partitions of cora, want 2") {
		t.Fatalf("2 parts where 3 are: %v, want them refused", err)
	}
	other := partitionConfig(3, jobconfig.Location{Path: dir})
	other.Dataset.Name = "rmat:nodes=500,edges=2000,features=8,classes=3,seed=1"
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := partitionStep(ctx, c, t.TempDir(), io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := partitionStep(ctx, other, t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "holds the partitions of dataset cora") {
		t.Fatalf("an R-MAT graph where cora's partitions are: %v, want them refused", err)
	}

	from := partitionConfig(2, jobconfig.Location{Path: filepath.Join(t.TempDir(), "again")})
	from.Dataset = jobconfig.Dataset{Source: jobconfig.SourcePVC, Path: dir}
	if _, err := partitionStep(ctx, from, t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), "already cut into partition files") {
		t.Fatalf("a dataset of partition files: %v, want it refused", err)
	}
}

// TestPartitionStepS3 writes the files to a MinIO prefix, then the manifest, then the digest
// of the inputs, and a second run reuses them from the manifest and the digest alone.
func TestPartitionStepS3(t *testing.T) {
	ctx := context.Background()
	m := minio.Start(t)
	m.Env(t)
	t.Setenv(objstore.EnvEndpoint, m.Endpoint)
	bucket := m.Bucket(t, "parts")
	loc := jobconfig.Location{S3: &jobconfig.S3{Bucket: bucket, Prefix: "cora/2", Endpoint: m.Endpoint}}
	c := partitionConfig(2, loc)
	got, err := partitionStep(ctx, c, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	st, err := serve.OpenLocation(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	names, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	want := []string{graph.PartitionFileName(0, 2), graph.PartitionFileName(1, 2), partition.ManifestFileName, inputsFile}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("objects under %s: %v, want %v", st, names, want)
	}
	local := checkpoint.Dir(t.TempDir())
	for _, n := range names {
		b, err := st.Get(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := local.Put(ctx, n, b); err != nil {
			t.Fatal(err)
		}
	}
	man, err := partition.ReadManifest(string(local))
	if err != nil {
		t.Fatal(err)
	}
	if err := man.CheckHeaders(string(local)); err != nil {
		t.Fatal(err)
	}
	if got.Parts != 2 || got.EdgeCut != man.Quality.CutRatio || got.Reused {
		t.Fatalf("reported %+v, manifest %+v", got, man.Quality)
	}
	again, err := partitionStep(ctx, c, t.TempDir(), io.Discard)
	if err != nil || !again.Reused || again.EdgeCut != got.EdgeCut {
		t.Fatalf("second run: %+v, %v; want the first's cut, reused", again, err)
	}
}

// coraText writes Cora in the text layout into a temporary folder and returns it and the
// dataset it holds.
func coraText(t *testing.T) (*graph.Dataset, string) {
	t.Helper()
	d, err := graph.Load("cora", graph.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cora")
	if err := graph.WriteText(dir, d); err != nil {
		t.Fatal(err)
	}
	return d, dir
}

// TestPartitionStepDatasetChangedInPlace cuts a dataset folder (Cora as text), changes it in
// place keeping its name and counts (vertex 0's label swapped with another's), and runs the step again: it must
// cut it again (not reuse), and the new files hold vertex 0's new label; run once more it
// reuses them. Partitions without a recorded digest (cut before digests were) are cut again
// too.
func TestPartitionStepDatasetChangedInPlace(t *testing.T) {
	ctx := context.Background()
	d, data := coraText(t)
	parts := filepath.Join(t.TempDir(), "parts")
	c := partitionConfig(2, jobconfig.Location{Path: parts})
	c.Dataset = jobconfig.Dataset{Source: jobconfig.SourcePVC, Path: data}
	step := func() jobstatus.Partitions {
		t.Helper()
		p, err := partitionStep(ctx, c, t.TempDir(), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	label0 := func() int32 {
		t.Helper()
		for q := range 2 {
			pd, err := graph.ReadPartitionFile(filepath.Join(parts, graph.PartitionFileName(q, 2)), q, 2)
			if err != nil {
				t.Fatal(err)
			}
			if i := slices.Index(pd.OrigIDs, 0); i >= 0 {
				return pd.Labels[i]
			}
		}
		t.Fatal("no partition holds vertex 0")
		return 0
	}
	if p := step(); p.Reused || label0() != d.Labels[0] {
		t.Fatalf("first cut: reused %v, vertex 0 labelled %d; want a new cut, %d", p.Reused, label0(), d.Labels[0])
	}
	j := slices.IndexFunc(d.Labels, func(l int32) bool { return l >= 0 && l != d.Labels[0] })
	d.Labels[0], d.Labels[j] = d.Labels[j], d.Labels[0] // the same counts of every class
	if err := graph.WriteText(data, d); err != nil {
		t.Fatal(err)
	}
	if p := step(); p.Reused || label0() != d.Labels[0] {
		t.Fatalf("after the change in place: reused %v, vertex 0 labelled %d; want a new cut, %d", p.Reused, label0(), d.Labels[0])
	}
	if p := step(); !p.Reused {
		t.Fatalf("unchanged: %+v, want the files reused", p)
	}
	if err := os.Remove(filepath.Join(parts, inputsFile)); err != nil {
		t.Fatal(err)
	}
	if p := step(); p.Reused {
		t.Fatalf("no digest recorded: %+v, want a new cut", p)
	}
}

// TestDatasetFormatIsHonoured: a dataset in another layout than its configuration's format
// names is refused, naming both, by the partition step and by a graph server loading it
// whole or as partition files; the named layout, or none, is read.
func TestDatasetFormatIsHonoured(t *testing.T) {
	ctx := context.Background()
	_, text := coraText(t)
	parts := filepath.Join(t.TempDir(), "parts")
	if err := partition.Cut(ctx, text, parts, 2, partition.DefaultMethod, io.Discard); err != nil {
		t.Fatal(err)
	}
	pvc := func(path, format string) jobconfig.Dataset {
		return jobconfig.Dataset{Source: jobconfig.SourcePVC, Path: path, Format: format}
	}
	step := func(ds jobconfig.Dataset) error {
		c := partitionConfig(2, jobconfig.Location{Path: filepath.Join(t.TempDir(), "out")})
		c.Dataset = ds
		_, err := partitionStep(ctx, c, t.TempDir(), io.Discard)
		return err
	}
	load := func(ds jobconfig.Dataset) error {
		_, err := graphserver.LoadPartition(ctx, ds, source.Options{Dir: t.TempDir()}, 1, 2)
		return err
	}
	for _, c := range []struct {
		name string
		run  func(jobconfig.Dataset) error
		ds   jobconfig.Dataset
		want string // "" for none
	}{
		{"step, text named ogb", step, pvc(text, jobconfig.FormatOGB), "is in the text layout, not the ogb layout"},
		{"step, text named text", step, pvc(text, jobconfig.FormatText), ""},
		{"step, text detected", step, pvc(text, ""), ""},
		{"server, text named prepared", load, pvc(text, jobconfig.FormatPrepared), "is in the text layout, not the prepared layout"},
		{"server, text named text", load, pvc(text, jobconfig.FormatText), ""},
		{"server, partitions named numpy", load, pvc(parts, jobconfig.FormatNumPy), "holds partition files (the prepared layout), not the numpy layout"},
		{"server, partitions named prepared", load, pvc(parts, jobconfig.FormatPrepared), ""},
	} {
		err := c.run(c.ds)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}
