//go:build e2e

package e2e

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
)

// TestPartitionStep runs the cpu sample with spec.dataset.partitionTo on a
// host volume: the operator's partition step (a Job running the project's
// image) writes Cora's 2 partition files and their manifest under parts-2/,
// reports the manifest's cut into status.partitions, the graph servers train
// on their own files to the single process's accuracy, and kubectl get -o wide
// shows the edge cut; a second job of the same dataset and count reuses the
// files.
func TestPartitionStep(t *testing.T) {
	t.Parallel()
	const first, second, claim = "cora-parts", "cora-parts-again", "cora-partitions"
	c := setup(t, first, second)
	dir := hostVolume(t, c, claim, "")
	edit := func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Dataset.PartitionTo = &dorylusv1alpha1.OutputLocation{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: claim, Path: "cora"}}
	}
	job := runSample(t, c, "cpu_cora.yaml", first, edit, 300*time.Second, func(*dorylusv1alpha1.GNNTrainingJob) float64 { return singleProcessAccuracy(t) },
		func(job *dorylusv1alpha1.GNNTrainingJob) {
			if job.Status.Partitions == nil {
				t.Fatalf("no status.partitions: %s", conditions(job))
			}
			wide := run(t, kubectl, "get", "-n", ns, "gnnjob", first, "-o", "wide")
			if !strings.Contains(wide, "EDGE-CUT") || !strings.Contains(wide, "GHOSTS") || !strings.Contains(wide, string(job.Status.Partitions.EdgeCut)) {
				t.Errorf("kubectl get gnnjob -o wide shows no edge cut %s:\n%s", job.Status.Partitions.EdgeCut, wide)
			}
		})
	parts := filepath.Join(dir, "cora", "parts-2")
	m, err := partition.ReadManifest(parts)
	if err != nil {
		t.Fatalf("the partition step's manifest: %v", err)
	}
	if err := m.CheckHeaders(parts); err != nil {
		t.Fatal(err)
	}
	want := dorylusv1alpha1.PartitionsStatus{Parts: 2, Method: string(partition.DefaultMethod), Ghosts: m.Quality.Ghosts,
		EdgeCut: dorylusv1alpha1.Decimal(strconv.FormatFloat(m.Quality.CutRatio, 'f', 4, 64)),
		Balance: dorylusv1alpha1.Decimal(strconv.FormatFloat(m.Quality.Balance, 'f', 4, 64))}
	if p := job.Status.Partitions; p == nil || *p != want || m.Dataset != "cora" || m.Parts != 2 {
		t.Fatalf("status.partitions %+v of manifest %s/%d %+v: want %+v", p, m.Dataset, m.Parts, m.Quality, want)
	}
	t.Logf("status.partitions %+v", *job.Status.Partitions)

	again := runSample(t, c, "cpu_cora.yaml", second, edit, 300*time.Second, func(*dorylusv1alpha1.GNNTrainingJob) float64 { return singleProcessAccuracy(t) })
	want.Reused = true
	if p := again.Status.Partitions; p == nil || *p != want {
		t.Fatalf("the second job's status.partitions %+v: want %+v (reused)", p, want)
	}
}
