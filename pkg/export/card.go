package export

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// CardFormat identifies the version of the model card.
const CardFormat = "dorylus-model/1"

// File names of an export.
const (
	CardFile          = "model.json"
	WeightsFile       = "model.safetensors"
	PredictionsFile   = "predictions.npy"   // int32 [N]: the class of every vertex
	ProbabilitiesFile = "probabilities.npy" // float32 [N, classes]: softmax of the logits
	EmbeddingsFile    = "embeddings.npy"    // float32 [N, width]: the input of the last layer
	HistoryFile       = "history.json"
	CurvesFile        = "curves.png"
	ManifestFile      = "predict.json" // what `dorylus predict` writes last
)

// Normalisations the card names.
const (
	AdjacencyGCN    = "symmetric: D^-1/2 (A + I) D^-1/2, D the row sums of A + I"
	AdjacencyGAT    = "A + I: attention softmax over each vertex's in-edges and its self loop"
	AdjacencySAGE   = "mean: D^-1 A, the mean over each vertex's in-neighbours (no self loop; none: 0), added to the vertex's own row times weight_self"
	FeaturesRowSum  = "row-sum: each row of the sparse features scaled to sum 1 (all-zero rows kept)"
	FeaturesNone    = "none"
	ActivationGCN   = "relu"
	ActivationGAT   = "elu"
	ArchitectureGCN = "gcn"
	ArchitectureGAT = "gat"
	// ArchitectureSAGE is GraphSAGE with the mean aggregator: H' = σ(H W_self + D⁻¹A H W_neigh).
	ArchitectureSAGE = "sage"
)

// Card is model.json: what a trained model is and how it was made.
type Card struct {
	Format       string   `json:"format"`       // CardFormat
	Architecture string   `json:"architecture"` // gcn, gat or sage
	Layers       int      `json:"layers"`
	InFeatures   int      `json:"in_features"`
	Hidden       int      `json:"hidden"`              // width of a hidden layer (gat: per head)
	Heads        int      `json:"heads,omitempty"`     // gat: heads of a hidden layer, concatenated
	OutHeads     int      `json:"out_heads,omitempty"` // gat: heads of the output layer, averaged
	Classes      int      `json:"classes"`
	Activation   string   `json:"activation"` // between layers
	Adjacency    string   `json:"adjacency"`  // how the propagation matrix is made from A
	Features     string   `json:"features"`   // how the input features are normalised
	Dataset      Dataset  `json:"dataset"`
	Seed         uint64   `json:"seed"`
	Epochs       int      `json:"epochs"` // epochs trained
	Epoch        int      `json:"epoch"`  // the epoch whose weights these are
	Training     Training `json:"training"`
	Accuracy     Accuracy `json:"accuracy"` // of these weights, evaluated without dropout
	// Version is the folder of the location holding Files (a Target's); empty: the top.
	Version string `json:"version,omitempty"`
	Files   []File `json:"files"`
}

// NewCard returns the card of a model of architecture (gcn, gat or sage) of layers layers of
// width hidden (gat: heads of them concatenated, one output head) trained as t on d, whose
// features are normalised as features: the activation and adjacency are the architecture's.
func NewCard(architecture string, layers, hidden, heads int, t Training, d Dataset, features string) Card {
	c := Card{
		Architecture: architecture, Layers: layers, InFeatures: d.Features, Hidden: hidden, Classes: d.Classes,
		Activation: ActivationGCN, Adjacency: AdjacencyGCN, Features: features, Dataset: d, Training: t,
	}
	switch architecture {
	case ArchitectureGAT:
		c.Heads, c.OutHeads, c.Activation, c.Adjacency = heads, 1, ActivationGAT, AdjacencyGAT
	case ArchitectureSAGE:
		c.Adjacency = AdjacencySAGE
	}
	return c
}

// Dataset identifies the graph a model was trained or run on.
type Dataset struct {
	Name     string `json:"name"`
	Nodes    int    `json:"nodes"`
	Edges    int64  `json:"edges"`
	Features int    `json:"features"`
	Classes  int    `json:"classes"`
}

// Training holds the hyper-parameters of the run.
type Training struct {
	LR          float64 `json:"lr"`
	WeightDecay float64 `json:"weight_decay"`
	Dropout     float64 `json:"dropout"`
	Patience    int     `json:"patience,omitempty"`
}

// Accuracy holds the accuracies on the dataset's splits.
type Accuracy struct {
	Train float64 `json:"train"`
	Val   float64 `json:"val"`
	Test  float64 `json:"test"`
}

// File is one published file with its size and SHA-256 (hex).
type File struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Validate reports a card that does not describe a model this version can build.
func (c *Card) Validate() error {
	switch {
	case c.Format != CardFormat:
		return fmt.Errorf("model card: format %q, want %q", c.Format, CardFormat)
	case c.Architecture != ArchitectureGCN && c.Architecture != ArchitectureGAT && c.Architecture != ArchitectureSAGE:
		return fmt.Errorf("model card: architecture %q, want %s, %s or %s", c.Architecture, ArchitectureGCN, ArchitectureGAT, ArchitectureSAGE)
	case c.Layers < 1 || c.InFeatures < 1 || c.Classes < 2 || (c.Layers > 1 && c.Hidden < 1):
		return fmt.Errorf("model card: %d layers, %d features, hidden %d, %d classes: not a model", c.Layers, c.InFeatures, c.Hidden, c.Classes)
	case c.Architecture == ArchitectureGAT && (c.Heads < 1 || c.OutHeads < 1):
		return fmt.Errorf("model card: gat with %d heads and %d output heads", c.Heads, c.OutHeads)
	case c.Features != FeaturesRowSum && c.Features != FeaturesNone:
		return fmt.Errorf("model card: feature normalisation %q is not one this version applies", c.Features)
	}
	_, err := c.File(WeightsFile)
	return err
}

// File returns the entry of the named file.
func (c *Card) File(name string) (File, error) {
	return findFile(c.Files, name, CardFile)
}

func findFile(files []File, name, in string) (File, error) {
	for _, f := range files {
		if f.Name == name {
			return f, nil
		}
	}
	return File{}, fmt.Errorf("%s lists no %s", in, name)
}

// decodeJSON parses b into v strictly: unknown fields and trailing data are errors.
func decodeJSON(b []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if dec.More() {
		return fmt.Errorf("%s: trailing data after the JSON object", what)
	}
	return nil
}
