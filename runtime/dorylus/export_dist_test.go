package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/testenv"
	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/npy"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// readNpy decodes one .npy file of dir.
func readNpy(t *testing.T, dir, name string) *npy.Array {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	a, err := npy.Decode(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return a
}

// mergedOutputs reads the per-partition outputs a distributed run wrote to dir and returns
// predictions, probabilities and embeddings in vertex-id order, and whether the partitions
// renumbered the vertices (some partition's ids are not a contiguous range).
func mergedOutputs(t *testing.T, dir string) (pred []int32, probs, emb []float32, renumbered bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, export.IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	var idx export.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	n := idx.Nodes
	seen := make([]bool, n)
	for _, p := range idx.Partitions {
		ids := readNpy(t, dir, p.Vertices).Int32s
		pp, pr := readNpy(t, dir, p.Predictions), readNpy(t, dir, p.Probabilities)
		classes := pr.Shape[1]
		var pe *npy.Array
		if p.Embeddings != "" {
			pe = readNpy(t, dir, p.Embeddings)
		}
		if pred == nil {
			pred, probs = make([]int32, n), make([]float32, n*classes)
			if pe != nil {
				emb = make([]float32, n*pe.Shape[1])
			}
		}
		for i, v := range ids {
			if seen[v] {
				t.Fatalf("%s: vertex %d listed twice", p.Vertices, v)
			}
			seen[v] = true
			renumbered = renumbered || (i > 0 && v != ids[i-1]+1)
			pred[v] = pp.Int32s[i]
			copy(probs[int(v)*classes:], pr.Float32s[i*classes:(i+1)*classes])
			if pe != nil {
				w := pe.Shape[1]
				copy(emb[int(v)*w:], pe.Float32s[i*w:(i+1)*w])
			}
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Fatalf("vertex %d is in no partition's files", i)
	}
	return pred, probs, emb, renumbered
}

// maxDiff returns the largest absolute difference of two equally long slices.
func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// compareWeights compares the weights exported to dist with those in single.
func compareWeights(t *testing.T, single, dist string, tol float64) {
	t.Helper()
	ma, err := export.Read(context.Background(), checkpoint.Dir(single))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := export.Read(context.Background(), checkpoint.Dir(dist))
	if err != nil {
		t.Fatal(err)
	}
	worstW := 0.0
	for i, ta := range ma.Tensors {
		tb := mb.Tensors[i]
		if tb.Name != ta.Name || !slices.Equal(tb.Shape, ta.Shape) {
			t.Fatalf("tensor %d: %s %v, single process %s %v", i, tb.Name, tb.Shape, ta.Name, ta.Shape)
		}
		worstW = math.Max(worstW, maxDiff(ta.Data, tb.Data))
	}
	t.Logf("weights differ by up to %.2g", worstW)
	if worstW > tol {
		t.Errorf("the distributed run's weights differ from the single process's by more than %g", tol)
	}
}

// compareOutputs compares the per-vertex outputs a distributed run wrote to dist, merged into
// vertex-id order, with those one process wrote to single, within tol; it returns whether the
// partitions renumbered the vertices.
func compareOutputs(t *testing.T, single, dist string, tol float64) (renumbered bool) {
	single, dist = exported(t, single), exported(t, dist)
	t.Helper()
	pred, probs, emb, renumbered := mergedOutputs(t, dist)
	wantPred := readNpy(t, single, export.PredictionsFile).Int32s
	agree := 0
	for i, c := range pred {
		if c == wantPred[i] {
			agree++
		}
	}
	dp := maxDiff(probs, readNpy(t, single, export.ProbabilitiesFile).Float32s)
	de := maxDiff(emb, readNpy(t, single, export.EmbeddingsFile).Float32s)
	t.Logf("probabilities differ by up to %.2g, embeddings %.2g; classes agree on %d of %d vertices", dp, de, agree, len(pred))
	if dp > tol || de > tol || float64(agree) < 0.999*float64(len(pred)) {
		t.Errorf("the distributed export differs from the single-process one by more than %g", tol)
	}
	return renumbered
}

// TestDistributedExportMatchesSingleProcess trains Cora with --output-dir in one process and
// on 2 graph-server and 2 parameter-server processes in synchronous mode, cut contiguously so
// that the vertex ids, and so the dropout masks, are the single process's: a GCN and a
// GraphSAGE network of 3 layers, and a GAT selected by validation (the weights of the kept epoch). The exports agree,
// predict --graph-servers with the single-process model gives its outputs, and PyTorch agrees
// with the distributed export and prediction.
func TestDistributedExportMatchesSingleProcess(t *testing.T) {
	gat := coraOptions(20)
	gat.model, gat.hidden, gat.heads, gat.dropout, gat.lr, gat.patience = "gat", 8, 4, 0.6, 0.005, 5
	gcn := coraOptions(30)
	gcn.layers, gcn.heads = 3, 1
	sage := gcn
	sage.model = "sage"
	for name, o := range map[string]trainOptions{"gcn": gcn, "gat": gat, "sage": sage} {
		t.Run(name, func(t *testing.T) {
			single, dist := filepath.Join(t.TempDir(), "single"), filepath.Join(t.TempDir(), "dist")
			args := []string{"train", "--output", "json", "--model", o.model, "--epochs", fmt.Sprint(o.epochs), "--layers", fmt.Sprint(o.layers),
				"--hidden", fmt.Sprint(o.hidden), "--heads", fmt.Sprint(o.heads), "--dropout", fmt.Sprint(o.dropout), "--lr", fmt.Sprint(o.lr),
				"--patience", fmt.Sprint(o.patience), "--output-dir", single}
			a := runCLI(t, args...)
			o.outputs.location = dist
			res, err := launchOnce(context.Background(), dorylusBin, coraPartitions(t), t.TempDir(), o,
				distOptions{graphServers: 2, paramServers: 2, staleness: jobconfig.Sync, intervals: 3, tlsDir: jobCredentials(t)},
				1, newProgress(io.Discard, o.epochs), os.Stderr, &serverStats{rss: map[string]int64{}})
			if err != nil {
				t.Fatal(err)
			}
			ca, cb := readCard(t, single), readCard(t, dist)
			if ca.Epoch != cb.Epoch || ca.Epochs != cb.Epochs || cb.Accuracy.Test != res.TestAcc || math.Abs(cb.Accuracy.Test-a.TestAccuracy) > 0.002 {
				t.Errorf("cards: single epoch %d of %d, distributed %d of %d with test accuracy %v (reported %v, single %v)",
					ca.Epoch, ca.Epochs, cb.Epoch, cb.Epochs, cb.Accuracy.Test, res.TestAcc, a.TestAccuracy)
			}
			compareWeights(t, single, dist, 1e-4)
			compareOutputs(t, single, dist, 1e-4)
			// The single-process model, run on graph servers (a renumbering cut): the outputs of
			// its export.
			distPred := filepath.Join(t.TempDir(), "dist-pred")
			if out, err := exec.Command(dorylusBin, "predict", "--model", single, "--output-dir", distPred, "--graph-servers", "2").CombinedOutput(); err != nil {
				t.Fatalf("predict --graph-servers 2: %v\n%s", err, out)
			}
			compareOutputs(t, single, distPred, 1e-5)
			t.Run("pytorch", func(t *testing.T) { checkWithPyTorch(t, dist, "") })
		})
	}
}

// TestDistributedExportRenumbered trains Cora on 3 graph servers cut by the default multilevel
// partitioner, which renumbers the vertices, with --output-dir; predicts with the exported
// model in one process, on 2 graph servers, and on 3 graph servers reading a dataset prepare
// cut; compares the merged per-vertex outputs of the training run and of the distributed
// predictions with the single-process prediction's; and has
// test/python/check_export.py check the training run's and the distributed prediction's
// outputs against PyTorch.
func TestDistributedExportRenumbered(t *testing.T) {
	dist, pred, distPred := filepath.Join(t.TempDir(), "dist"), filepath.Join(t.TempDir(), "pred"), filepath.Join(t.TempDir(), "dist-pred")
	rep := runCLI(t, "train", "--output", "json", "--epochs", "30", "--graph-servers", "3", "--param-servers", "2", "--output-dir", dist)
	if c := readCard(t, dist); c.Accuracy.Test != rep.TestAccuracy {
		t.Errorf("the card says test accuracy %v, train reported %v", c.Accuracy.Test, rep.TestAccuracy)
	}
	if out, logs, err := run(t, "predict", "--model", dist, "--dataset", "cora", "--output-dir", pred); err != nil {
		t.Fatalf("predict: %v\n%s", err, logs)
	} else {
		t.Log(out)
	}
	if !compareOutputs(t, pred, dist, 1e-5) {
		t.Error("the partitions kept the vertex ids: the test does not show that outputs are put back in vertex-id order")
	}
	out, err := exec.Command(dorylusBin, "predict", "--model", dist, "--output-dir", distPred, "--graph-servers", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("predict --graph-servers 2: %v\n%s", err, out)
	}
	compareOutputs(t, pred, distPred, 1e-5)
	// On a dataset prepare cut into partitions: used as it is, not cut again.
	cut, partPred := filepath.Join(t.TempDir(), "cora-3"), filepath.Join(t.TempDir(), "part-pred")
	if out, err := exec.Command(dorylusBin, "prepare", "--partitions", "3", "cora", cut).CombinedOutput(); err != nil {
		t.Fatalf("prepare: %v\n%s", err, out)
	}
	out, err = exec.Command(dorylusBin, "predict", "--model", dist, "--dataset", cut, "--output-dir", partPred, "--graph-servers", "3").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "partitions in "+cut+" ") {
		t.Fatalf("predict on a prepared cut: %v (it must use %s, not cut again)\n%s", err, cut, out)
	}
	compareOutputs(t, pred, partPred, 1e-5)
	var m manifest
	if b, err := os.ReadFile(filepath.Join(distPred, export.ManifestFile)); err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("predict.json: %v\n%s", err, b)
	}
	if m.Accuracy.Test != rep.TestAccuracy || len(m.Files) != 2*4+1 {
		t.Errorf("predict.json: test accuracy %v (train reported %v), %d files", m.Accuracy.Test, rep.TestAccuracy, len(m.Files))
	}
	checkWithPyTorch(t, dist, distPred)
}

// checkWithPyTorch has test/python/check_export.py rerun the forward pass of the model in dir
// on Cora in PyTorch and check the outputs there and, unless pred is empty, in the folder
// where predict wrote that model's predictions.
func checkWithPyTorch(t *testing.T, dir, pred string) {
	t.Helper()
	py := testenv.PythonWithTorch(t)
	args := []string{filepath.Join("..", "..", "test", "python", "check_export.py"), "--dataset", filepath.Join(datasetsDir, "cora"), "--model", dir}
	if pred != "" {
		args = append(args, "--predictions", pred)
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	t.Logf("check_export.py:\n%s", out)
	if err != nil {
		t.Fatalf("check_export.py: %v", err)
	}
}

// TestPredictOnGraphServersRefusesBadModels: on graph servers too, a model for another dataset
// is refused naming the tensor and both shapes, and a truncated weights file with a length error.
func TestPredictOnGraphServersRefusesBadModels(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	runCLI(t, "train", "--output", "json", "--epochs", "2", "--output-dir", dir)
	predict := func(model, dataset string) string {
		cmd := exec.Command(dorylusBin, "predict", "--model", model, "--dataset", dataset, "--graph-servers", "2", "--output-dir", t.TempDir())
		cmd.Env = append(os.Environ(), "DORYLUS_DATA_DIR="+datasetsDir)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("predict --model %s --dataset %s succeeded", model, dataset)
		}
		return string(out)
	}
	if out, want := predict(dir, "citeseer"), "tensor layers.0.weight has shape [1433 16] (22928 values), dataset citeseer needs [3703 16]"; !strings.Contains(out, want) {
		t.Errorf("a Cora model on CiteSeer: %s\nwant it to say %q", out, want)
	}
	weights := filepath.Join(exported(t, dir), export.WeightsFile)
	b, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(weights, b[:len(b)-100], 0o644); err != nil {
		t.Fatal(err)
	}
	if out := predict(dir, "cora"); !strings.Contains(out, "(truncated?)") {
		t.Errorf("truncated weights: %s", out)
	}
}

// TestDistributedExportToS3 trains on 2 graph servers with --output-dir on a real MinIO, then
// predicts on 2 graph servers from there into another prefix: every file lands where the card
// and the manifest say, and the prediction scores what training reported.
func TestDistributedExportToS3(t *testing.T) {
	m := minio.Start(t)
	m.Env(t)
	t.Setenv(objstore.EnvEndpoint, m.Endpoint)
	bucket := m.Bucket(t, "models")
	rep := runCLI(t, "train", "--output", "json", "--epochs", "5", "--graph-servers", "2", "--output-dir", "s3://"+bucket+"/cora/gcn")
	out, err := exec.Command(dorylusBin, "predict", "--model", "s3://"+bucket+"/cora/gcn", "--output-dir", "s3://"+bucket+"/cora/pred", "--graph-servers", "2").CombinedOutput()
	if err != nil {
		t.Fatalf("predict: %v\n%s", err, out)
	}
	ctx := context.Background()
	for prefix, want := range map[string][2]string{
		"cora/gcn": {export.CardFile, "curves.png embeddings.part-0-of-2.npy embeddings.part-1-of-2.npy history.json model.safetensors partitions.json " +
			"predictions.part-0-of-2.npy predictions.part-1-of-2.npy probabilities.part-0-of-2.npy probabilities.part-1-of-2.npy vertices.part-0-of-2.npy vertices.part-1-of-2.npy"},
		"cora/pred": {export.ManifestFile, "embeddings.part-0-of-2.npy embeddings.part-1-of-2.npy partitions.json predictions.part-0-of-2.npy predictions.part-1-of-2.npy " +
			"probabilities.part-0-of-2.npy probabilities.part-1-of-2.npy vertices.part-0-of-2.npy vertices.part-1-of-2.npy"},
	} {
		if top, files := s3Export(t, checkpoint.S3{Client: m.Client(), Bucket: bucket, Prefix: prefix}); top != want[0] || files != want[1] {
			t.Errorf("%s: objects %s and, in the version, %s; want %s and %s", prefix, top, files, want[0], want[1])
		}
	}
	b, err := checkpoint.S3{Client: m.Client(), Bucket: bucket, Prefix: "cora/pred"}.Get(ctx, export.ManifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var man manifest
	if err := json.Unmarshal(b, &man); err != nil || man.Accuracy.Test != rep.TestAccuracy {
		t.Errorf("predict.json: %v; test accuracy %v, train reported %v", err, man.Accuracy.Test, rep.TestAccuracy)
	}
}
