package export

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

func rmat(t *testing.T, features, classes int) *graph.Dataset {
	t.Helper()
	d, err := graph.RMAT(graph.RMATParams{Nodes: 64, Edges: 256, Features: features, Classes: classes, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func gcn(t *testing.T, d *graph.Dataset, hidden int, seed uint64) *model.Trainer {
	t.Helper()
	tr, err := model.NewTrainer(d, model.TrainConfig{GCN: model.GCNConfig{InDim: d.NumFeatures(), Hidden: hidden, Classes: d.NumClasses, Layers: 2}, LR: 0.01, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func gat(t *testing.T, d *graph.Dataset) *model.GATTrainer {
	t.Helper()
	tr, err := model.NewGATTrainer(d, model.GATTrainConfig{GAT: model.GATConfig{InDim: d.NumFeatures(), Hidden: 4, Heads: 3, OutHeads: 1, Classes: d.NumClasses, Layers: 2}, LR: 0.01, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// described lists each slot as name:shape.
func described(slots []Slot) []string {
	var out []string
	for _, s := range slots {
		out = append(out, fmt.Sprintf("%s:%v", s.Name, s.Shape))
	}
	return out
}

func TestSlotNamesAndShapes(t *testing.T) {
	d := rmat(t, 8, 3)
	s, err := Slots(gcn(t, d, 5, 1))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"layers.0.weight:[8 5]", "layers.1.weight:[5 3]"}; !slices.Equal(described(s), want) {
		t.Errorf("gcn slots %v, want %v", described(s), want)
	}
	s, err = Slots(gat(t, d))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"layers.0.weight:[8 12]", "layers.0.bias:[12]", "layers.0.att_src:[3 4]", "layers.0.att_dst:[3 4]",
		"layers.1.weight:[12 3]", "layers.1.bias:[3]", "layers.1.att_src:[1 3]", "layers.1.att_dst:[1 3]"}
	if !slices.Equal(described(s), want) {
		t.Errorf("gat slots %v, want %v", described(s), want)
	}
	tr := gat(t, d)
	s, _ = Slots(tr)
	if &s[2].Data[0] != &tr.Params()[0].ASrc.Data[0] || &s[3].Data[0] != &tr.Params()[0].ADst.Data[0] {
		t.Error("att_src and att_dst are not the model's a_src and a_dst")
	}
}

func TestCaptureAndLoad(t *testing.T) {
	d := rmat(t, 8, 3)
	from, to := gcn(t, d, 5, 1), gcn(t, d, 5, 2)
	fromSlots, _ := Slots(from)
	toSlots, _ := Slots(to)
	saved := Capture(fromSlots)
	fromSlots[0].Data[0] += 1 // a capture is a copy
	if saved[0].Data[0] == fromSlots[0].Data[0] {
		t.Fatal("Capture aliases the model")
	}
	if err := Load(toSlots, saved, d.Name); err != nil {
		t.Fatal(err)
	}
	for i, w := range to.Weights() {
		if !slices.Equal(w.Data, saved[i].Data) {
			t.Errorf("layer %d not loaded", i)
		}
	}
}

func TestLoadRefusesWhatDoesNotFit(t *testing.T) {
	d := rmat(t, 8, 3)
	slots, _ := Slots(gcn(t, d, 5, 1))
	before := slices.Clone(slots[0].Data)
	good := Capture(slots)
	for i := range good {
		for j := range good[i].Data {
			good[i].Data[j] = 7
		}
	}
	wide := Capture(mustSlots(t, gcn(t, rmat(t, 10, 3), 5, 1)))
	cases := map[string]struct {
		tensors []safetensors.Tensor
		want    string
	}{
		"shape":   {[]safetensors.Tensor{wide[0], good[1]}, "tensor layers.0.weight has shape [10 5] (50 values), dataset " + d.Name + " needs [8 5]"},
		"missing": {good[:1], "no tensor layers.1.weight, which dataset " + d.Name + " needs with shape [5 3]"},
		"extra":   {append(slices.Clone(good), safetensors.Tensor{Name: "layers.2.weight", Shape: []int{3, 3}, Data: make([]float32, 9)}), "layers.2.weight (shape [3 3]) is not a parameter"},
		"gat":     {Capture(mustSlots(t, gat(t, d))), "tensor layers.0.weight has shape [8 12] (96 values), dataset " + d.Name + " needs [8 5]"},
	}
	for name, c := range cases {
		err := Load(slots, c.tensors, d.Name)
		if !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrShape saying %q", name, err, c.want)
		}
		if !slices.Equal(slots[0].Data, before) {
			t.Fatalf("%s: a refused load changed the model", name)
		}
	}
	nan := Capture(slots)
	nan[1].Data[4] = float32(math.NaN())
	if err := Load(slots, nan, d.Name); !errors.Is(err, ErrNotFinite) || !strings.Contains(err.Error(), "tensor layers.1.weight: element 4 is NaN") {
		t.Errorf("a NaN weight: %v", err)
	}
	if !slices.Equal(slots[0].Data, before) {
		t.Fatal("a refused load changed the model")
	}
}

func mustSlots(t *testing.T, l model.Learner) []Slot {
	t.Helper()
	s, err := Slots(l)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPredict(t *testing.T) {
	logits := &tensor.Dense{Rows: 3, Cols: 3, Data: []float32{1, 2, 3, 5, 5, -1, -1000, 0, 1000}}
	classes, probs := Predict(logits)
	if !slices.Equal(classes, []int32{2, 0, 2}) {
		t.Errorf("classes %v, want [2 0 2] (the first of equal logits)", classes)
	}
	e := math.Exp
	want := []float64{e(-2) / (1 + e(-1) + e(-2)), e(-1) / (1 + e(-1) + e(-2)), 1 / (1 + e(-1) + e(-2)),
		1 / (2 + e(-6)), 1 / (2 + e(-6)), e(-6) / (2 + e(-6)), 0, 0, 1}
	for i, w := range want {
		if math.Abs(float64(probs[i])-w) > 1e-7 {
			t.Errorf("probability %d = %v, want %v", i, probs[i], w)
		}
	}
}

func card() Card {
	return Card{Architecture: ArchitectureGCN, Layers: 2, InFeatures: 8, Hidden: 5, Classes: 3, Activation: ActivationGCN,
		Adjacency: AdjacencyGCN, Features: FeaturesNone, Accuracy: Accuracy{Test: 0.5}}
}

// TestWriteRead publishes a model to a folder and to an S3 prefix on a real MinIO server, reads
// it back, and reads it again truncated and corrupted.
func TestWriteRead(t *testing.T) {
	t.Run("dir", func(t *testing.T) { writeRead(t, checkpoint.Dir(filepath.Join(t.TempDir(), "model"))) })
	t.Run("s3", func(t *testing.T) {
		srv := minio.Start(t)
		writeRead(t, checkpoint.S3{Client: srv.Client(), Bucket: srv.Bucket(t, "model"), Prefix: "runs/a"})
	})
}

func writeRead(t *testing.T, st checkpoint.Store) {
	ctx := context.Background()
	kind := st.String()
	d := rmat(t, 8, 3)
	saved := Capture(mustSlots(t, gcn(t, d, 5, 1)))
	weights, err := safetensors.Encode(saved, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := &Writer{Store: st}
	if err := w.Put(ctx, WeightsFile, weights); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, PredictionsFile, []byte("p")); err != nil {
		t.Fatal(err)
	}
	if err := w.PutCard(ctx, card()); err != nil {
		t.Fatal(err)
	}
	m, err := Read(ctx, st)
	if err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	if m.Card.Format != CardFormat || m.Card.Accuracy.Test != 0.5 || len(m.Card.Files) != 2 || m.Card.Files[1].Name != PredictionsFile {
		t.Errorf("%s: card %+v", kind, m.Card)
	}
	if len(m.Tensors) != 2 || !slices.Equal(m.Tensors[1].Data, saved[1].Data) {
		t.Errorf("%s: tensors %v", kind, m.Tensors)
	}
	// A truncated and a corrupted weights file, and a truncated card.
	if err := st.Put(ctx, WeightsFile, weights[:len(weights)-3]); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(ctx, st); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "(truncated?)") {
		t.Errorf("%s: truncated weights: %v", kind, err)
	}
	bad := slices.Clone(weights)
	bad[len(bad)-1] ^= 1
	if err := st.Put(ctx, WeightsFile, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(ctx, st); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "SHA-256") {
		t.Errorf("%s: corrupted weights: %v", kind, err)
	}
	cb, err := st.Get(ctx, CardFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, CardFile, cb[:len(cb)/2]); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(ctx, st); err == nil || !strings.Contains(err.Error(), CardFile) {
		t.Errorf("%s: truncated card: %v", kind, err)
	}
}

func TestCardValidate(t *testing.T) {
	listed := func(c Card) Card {
		c.Format, c.Files = CardFormat, []File{{Name: WeightsFile}}
		return c
	}
	ok := listed(card())
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for want, edit := range map[string]func(*Card){
		"format":                  func(c *Card) { c.Format = "dorylus-model/9" },
		"architecture":            func(c *Card) { c.Architecture = "mlp" },
		"not a model":             func(c *Card) { c.Classes = 1 },
		"heads":                   func(c *Card) { c.Architecture = ArchitectureGAT },
		"feature normalisation":   func(c *Card) { c.Features = "z-score" },
		"lists no model.safetens": func(c *Card) { c.Files = nil },
	} {
		c := listed(card())
		edit(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want an error saying %q", err, want)
		}
	}
}
