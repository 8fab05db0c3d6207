package main

import (
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/testenv"
	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/npy"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// datasetsDir is the repository's datasets folder, where the Python check reads Cora from.
var datasetsDir = filepath.Join("..", "..", "datasets")

// readCard reads the model card in dir.
func readCard(t *testing.T, dir string) export.Card {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, export.CardFile))
	if err != nil {
		t.Fatal(err)
	}
	var c export.Card
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// exported returns the folder holding the files of the export in dir: the version its card
// (or, of predictions, its manifest) names.
func exported(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, export.CardFile))
	if errors.Is(err, os.ErrNotExist) {
		b, err = os.ReadFile(filepath.Join(dir, export.ManifestFile))
	}
	var p struct {
		Version string `json:"version"`
	}
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil || !strings.HasPrefix(p.Version, "v-") {
		t.Fatalf("the export in %s: %v, version %q", dir, err, p.Version)
	}
	return filepath.Join(dir, p.Version)
}

// s3Export returns the objects at the top of an export's S3 prefix and, space-separated, those
// in the version folder its card or manifest names.
func s3Export(t *testing.T, st checkpoint.S3) (top, files string) {
	t.Helper()
	ctx := context.Background()
	names, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	folders, err := st.Folders(ctx)
	if err != nil || len(folders) != 1 {
		t.Fatalf("%s: version folders %v (%v), want one", st, folders, err)
	}
	in, err := st.Sub(folders[0]).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(names, " "), strings.Join(in, " ")
}

// testAccuracy returns the accuracy of the exported predictions in dir on Cora's test split.
func testAccuracy(t *testing.T, dir string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(exported(t, dir), export.PredictionsFile))
	if err != nil {
		t.Fatal(err)
	}
	pred, err := npy.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := loadDataset(context.Background(), "cora")
	if err != nil {
		t.Fatal(err)
	}
	if len(pred.Int32s) != d.NumNodes() {
		t.Fatalf("%d predictions for %d vertices", len(pred.Int32s), d.NumNodes())
	}
	hit := 0
	for _, v := range d.Test {
		if pred.Int32s[v] == d.Labels[v] {
			hit++
		}
	}
	return float64(hit) / float64(len(d.Test))
}

// TestExportMatchesPyTorch trains a GCN, a GraphSAGE and a GAT (with --patience, so the exported weights are
// those of the kept epoch, not the last) on Cora with --output-dir, predicts with the saved
// model, and has test/python/check_export.py rerun the forward pass in PyTorch from the
// exported files: same predictions, probabilities within 1e-4, and the accuracy train reported.
func TestExportMatchesPyTorch(t *testing.T) {
	py := testenv.PythonWithTorch(t)
	for name, args := range map[string][]string{
		"gcn":  {"--epochs", "40", "--layers", "3"},
		"gat":  {"--model", "gat", "--epochs", "60", "--patience", "20"},
		"sage": {"--model", "sage", "--epochs", "40", "--layers", "3"},
	} {
		t.Run(name, func(t *testing.T) {
			dir, pred := filepath.Join(t.TempDir(), "model"), filepath.Join(t.TempDir(), "pred")
			res := trainJSON(t, append(args, "--output-dir", dir)...)
			c := readCard(t, dir)
			if c.Accuracy.Test != res.TestAcc || c.Accuracy.Val != res.ValAcc {
				t.Errorf("the card says test %v val %v, train reported %v %v", c.Accuracy.Test, c.Accuracy.Val, res.TestAcc, res.ValAcc)
			}
			if want := max(res.BestEpoch, res.EpochsRun*btoi(res.BestEpoch == 0)); c.Epoch != want || c.Epochs != res.EpochsRun {
				t.Errorf("the card has the weights of epoch %d of %d, want %d of %d", c.Epoch, c.Epochs, want, res.EpochsRun)
			}
			if name == "gat" && c.Epoch == c.Epochs {
				t.Errorf("the kept epoch is the last (%d): the test does not show that the kept weights are exported", c.Epoch)
			}
			if got := testAccuracy(t, dir); got != res.TestAcc {
				t.Errorf("the exported predictions score %v on the test split, train reported %v", got, res.TestAcc)
			}
			out, logs, err := run(t, "predict", "--model", dir, "--dataset", "cora", "--output-dir", pred)
			if err != nil {
				t.Fatalf("predict: %v\n%s", err, logs)
			}
			t.Log(strings.TrimSpace(out))
			cmd := exec.Command(py, filepath.Join("..", "..", "test", "python", "check_export.py"),
				"--dataset", filepath.Join(datasetsDir, "cora"), "--model", dir, "--predictions", pred)
			b, err := cmd.CombinedOutput()
			t.Logf("check_export.py:\n%s", b)
			if err != nil {
				t.Fatalf("check_export.py: %v", err)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestOneLayerWritesNoEmbeddings: a one-layer model's last layer reads the features, so there
// are predictions but no embeddings file; the history holds every epoch and the curves are a PNG.
func TestOneLayerWritesNoEmbeddings(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "model")
	trainJSON(t, "--epochs", "3", "--layers", "1", "--output-dir", dir)
	var names []string
	for _, f := range readCard(t, dir).Files {
		names = append(names, f.Name)
	}
	if want := "model.safetensors predictions.npy probabilities.npy history.json curves.png"; strings.Join(names, " ") != want {
		t.Errorf("files %v, want %s", names, want)
	}
	b, err := os.ReadFile(filepath.Join(exported(t, dir), export.HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	var h history
	if err := json.Unmarshal(b, &h); err != nil || len(h.Curve) != 3 || h.Curve[2].Epoch != 3 || h.Curve[2].ValAcc == nil || h.Report.Layers != 1 {
		t.Errorf("history.json: %v\n%s", err, b)
	}
	f, err := os.Open(filepath.Join(exported(t, dir), export.CurvesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("curves.png: %v", err)
	}
}

// TestPredictRefusesBadModels: a model for another dataset is refused naming the tensor and
// both shapes; a truncated or corrupted weights file and a truncated card fail with a length,
// checksum or parse error.
func TestPredictRefusesBadModels(t *testing.T) {
	t.Setenv("DORYLUS_DATA_DIR", datasetsDir)
	dir := filepath.Join(t.TempDir(), "model")
	trainJSON(t, "--epochs", "2", "--output-dir", dir)
	predict := func(model, dataset string) error {
		_, _, err := run(t, "predict", "--model", model, "--dataset", dataset, "--output-dir", filepath.Join(t.TempDir(), "pred"))
		return err
	}
	if err := predict(dir, "citeseer"); !errors.Is(err, export.ErrShape) ||
		!strings.Contains(err.Error(), "tensor layers.0.weight has shape [1433 16] (22928 values), dataset citeseer needs [3703 16]") {
		t.Errorf("cora model on citeseer: %v", err)
	}
	edited := func(file string, edit func([]byte) []byte) string {
		t.Helper()
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.CopyFS(bad, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(bad, file)
		if file != export.CardFile {
			path = filepath.Join(exported(t, bad), file)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, edit(b), 0o644); err != nil {
			t.Fatal(err)
		}
		return bad
	}
	truncated := edited(export.WeightsFile, func(b []byte) []byte { return b[:len(b)-100] })
	if err := predict(truncated, "cora"); !errors.Is(err, export.ErrCorrupt) || !strings.Contains(err.Error(), "(truncated?)") {
		t.Errorf("truncated weights: %v", err)
	}
	flipped := edited(export.WeightsFile, func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b })
	if err := predict(flipped, "cora"); !errors.Is(err, export.ErrCorrupt) || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("corrupted weights: %v", err)
	}
	card := edited(export.CardFile, func(b []byte) []byte { return b[:len(b)/3] })
	if err := predict(card, "cora"); err == nil || !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("truncated card: %v", err)
	}
	wider := edited(export.CardFile, func(b []byte) []byte {
		return []byte(strings.Replace(string(b), `"hidden": 16`, `"hidden": 32`, 1))
	})
	if err := predict(wider, "cora"); !errors.Is(err, export.ErrShape) ||
		!strings.Contains(err.Error(), "tensor layers.0.weight has shape [1433 16] (22928 values), dataset cora needs [1433 32]") {
		t.Errorf("a card that does not match its weights: %v", err)
	}
}

func TestTrainRefusesBadOutputDir(t *testing.T) {
	for _, args := range [][]string{{"--output-dir", "s3://"}, {"--output-dir", "s3://", "--graph-servers", "2"}} {
		_, _, err := run(t, append([]string{"train", "--epochs", "1"}, args...)...)
		if want := "s3://bucket/prefix"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("train %v: %v, want an error saying %q", args, err, want)
		}
	}
}

// TestExportToS3 trains with --output-dir on a real MinIO and predicts from there.
func TestExportToS3(t *testing.T) {
	m := minio.Start(t)
	m.Env(t)
	t.Setenv(objstore.EnvEndpoint, m.Endpoint)
	bucket := m.Bucket(t, "models")
	res := trainJSON(t, "--epochs", "5", "--output-dir", "s3://"+bucket+"/cora/gcn")
	local := filepath.Join(t.TempDir(), "pred")
	out, logs, err := run(t, "predict", "--model", "s3://"+bucket+"/cora/gcn", "--output-dir", local)
	if err != nil {
		t.Fatalf("predict: %v\n%s", err, logs)
	}
	if got := testAccuracy(t, local); got != res.TestAcc {
		t.Errorf("predictions from the model on S3 score %v, train reported %v (%s)", got, res.TestAcc, out)
	}
	top, files := s3Export(t, checkpoint.S3{Client: m.Client(), Bucket: bucket, Prefix: "cora/gcn"})
	if want := "curves.png embeddings.npy history.json model.safetensors predictions.npy probabilities.npy"; top != export.CardFile || files != want {
		t.Errorf("objects %s and, in the version, %s; want %s and %s", top, files, export.CardFile, want)
	}
}

// TestPredictDenseFeatures trains on an R-MAT graph (dense features, not normalised) and
// predicts on the same graph: the same predictions, byte for byte, as the export of the
// training run; and refuses to run that model on Cora, whose features are normalised.
func TestPredictDenseFeatures(t *testing.T) {
	const spec = "rmat:nodes=600,edges=4800,features=12,classes=4,seed=5"
	dir, pred := filepath.Join(t.TempDir(), "model"), filepath.Join(t.TempDir(), "pred")
	trainJSON(t, "--dataset", spec, "--epochs", "5", "--hidden", "8", "--output-dir", dir)
	if c := readCard(t, dir); c.Features != export.FeaturesNone || c.Dataset.Nodes != 600 {
		t.Errorf("card: features %q, %d nodes", c.Features, c.Dataset.Nodes)
	}
	if _, logs, err := run(t, "predict", "--model", dir, "--dataset", spec, "--output-dir", pred); err != nil {
		t.Fatalf("predict: %v\n%s", err, logs)
	}
	for _, f := range []string{export.PredictionsFile, export.ProbabilitiesFile, export.EmbeddingsFile} {
		a, errA := os.ReadFile(filepath.Join(exported(t, dir), f))
		b, errB := os.ReadFile(filepath.Join(exported(t, pred), f))
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s differs between train and predict (%v, %v)", f, errA, errB)
		}
	}
	var m manifest
	b, err := os.ReadFile(filepath.Join(pred, export.ManifestFile))
	if err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("predict.json: %v\n%s", err, b)
	}
	if c := readCard(t, dir); m.Accuracy != c.Accuracy || m.Dataset != c.Dataset || len(m.Files) != 3 {
		t.Errorf("predict.json %+v does not match the card's accuracy %+v and dataset %+v", m, c.Accuracy, c.Dataset)
	}
	_, _, err = run(t, "predict", "--model", dir, "--dataset", "cora", "--output-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "trained on features normalised as \"none\"") {
		t.Errorf("an R-MAT model on Cora: %v", err)
	}
}

// TestOutputDirReplacedOnlyWhenAsked trains into an --output-dir, then again into it: without
// --overwrite the second run (single-process, on graph servers, and predict) is refused before
// it trains, naming the model there, which stays as it was; with --overwrite it replaces it,
// the old version's files gone, and predict loads the new model.
func TestOutputDirReplacedOnlyWhenAsked(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "model")
	trainJSON(t, "--epochs", "3", "--output-dir", dir, "--seed", "1")
	first := readCard(t, dir)
	for _, args := range [][]string{
		{"train", "--epochs", "3", "--output-dir", dir, "--seed", "2"},
		{"train", "--epochs", "3", "--output-dir", dir, "--graph-servers", "2"},
		{"predict", "--model", dir, "--output-dir", dir},
	} {
		_, logs, err := run(t, args...)
		if !errors.Is(err, export.ErrExists) || !strings.Contains(err.Error(), "holds model.json (version "+first.Version+"): pass --overwrite") {
			t.Errorf("%v: %v, want a refusal naming the model there", args, err)
		}
		if strings.Contains(logs, "epoch 1/") {
			t.Errorf("%v trained before refusing:\n%s", args, logs)
		}
	}
	if c := readCard(t, dir); c.Version != first.Version || c.Seed != 1 {
		t.Fatalf("a refused run changed the model: version %s seed %d", c.Version, c.Seed)
	}
	trainJSON(t, "--epochs", "3", "--output-dir", dir, "--seed", "2", "--overwrite")
	second := readCard(t, dir)
	if second.Seed != 2 || second.Version == first.Version {
		t.Fatalf("after --overwrite: version %s seed %d, want a new version of seed 2", second.Version, second.Seed)
	}
	if folders, err := checkpoint.Dir(dir).Folders(ctx); err != nil || len(folders) != 1 || folders[0] != second.Version {
		t.Errorf("after --overwrite the folder holds versions %v (%v), want %s alone", folders, err, second.Version)
	}
	if m, err := export.Read(ctx, checkpoint.Dir(dir)); err != nil || m.Card.Seed != 2 {
		t.Fatalf("the replaced model: %v", err)
	}
	if _, logs, err := run(t, "predict", "--model", dir, "--output-dir", filepath.Join(t.TempDir(), "pred")); err != nil {
		t.Fatalf("predict with the replaced model: %v\n%s", err, logs)
	}
}
