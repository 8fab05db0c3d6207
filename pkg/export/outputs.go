package export

import (
	"context"
	"fmt"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/npy"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Files of an export written by graph servers, one set per partition.
const (
	VerticesFile = "vertices.npy"    // int32 [rows]: the dataset's id of each row of a partition's files
	IndexFile    = "partitions.json" // Index
)

// Index is partitions.json: where the per-vertex outputs of a distributed run lie. Row i of
// a partition's predictions, probabilities and embeddings is vertex Vertices[i] of the dataset.
type Index struct {
	Nodes      int         `json:"nodes"`
	Partitions []PartFiles `json:"partitions"`
}

// PartFiles names the files of one partition.
type PartFiles struct {
	Vertices      string `json:"vertices"`
	Predictions   string `json:"predictions"`
	Probabilities string `json:"probabilities"`
	Embeddings    string `json:"embeddings,omitempty"` // absent for a one-layer model
}

// PartName returns the name of file name (such as PredictionsFile) of partition q of parts.
func PartName(name string, q, parts int) string {
	base, ext, _ := strings.Cut(name, ".")
	return fmt.Sprintf("%s.part-%d-of-%d.%s", base, q, parts, ext)
}

// NewIndex returns the index of the files of parts partitions of a graph of nodes vertices.
func NewIndex(nodes, parts int, embeddings bool) Index {
	x := Index{Nodes: nodes}
	for q := range parts {
		p := PartFiles{Vertices: PartName(VerticesFile, q, parts), Predictions: PartName(PredictionsFile, q, parts),
			Probabilities: PartName(ProbabilitiesFile, q, parts)}
		if embeddings {
			p.Embeddings = PartName(EmbeddingsFile, q, parts)
		}
		x.Partitions = append(x.Partitions, p)
	}
	return x
}

// PutOutputs publishes the class, class probabilities and, unless emb is nil, embeddings of
// the rows of logits, each file named by name (the base names, or PartName's).
func (w *Writer) PutOutputs(ctx context.Context, logits, emb *tensor.Dense, name func(string) string) error {
	classes, probs := Predict(logits)
	b, err := npy.EncodeInt32([]int{logits.Rows}, classes)
	if err != nil {
		return err
	}
	if err := w.Put(ctx, name(PredictionsFile), b); err != nil {
		return err
	}
	if b, err = npy.EncodeFloat32([]int{logits.Rows, logits.Cols}, probs); err != nil {
		return err
	}
	if err := w.Put(ctx, name(ProbabilitiesFile), b); err != nil {
		return err
	}
	if emb == nil {
		return nil
	}
	if b, err = npy.EncodeFloat32([]int{emb.Rows, emb.Cols}, emb.Data); err != nil {
		return err
	}
	return w.Put(ctx, name(EmbeddingsFile), b)
}

// PutPartition publishes the outputs of partition d's rows: their dataset ids, then PutOutputs.
func (w *Writer) PutPartition(ctx context.Context, d *graph.PartitionData, logits, emb *tensor.Dense) error {
	name := func(f string) string { return PartName(f, d.Part, d.Parts) }
	b, err := npy.EncodeInt32([]int{d.Rows()}, d.OrigIDs)
	if err != nil {
		return err
	}
	if err := w.Put(ctx, name(VerticesFile), b); err != nil {
		return err
	}
	return w.PutOutputs(ctx, logits, emb, name)
}

// Add records a file another process published to the same store.
func (w *Writer) Add(f File) { w.files = append(w.files, f) }

// FeatureNormalisation names what loading does to features f (graph servers and
// single-process training alike: sparse features are row-normalised).
func FeatureNormalisation(f graph.Features) string {
	if f.Sparse != nil {
		return FeaturesRowSum
	}
	return FeaturesNone
}

// Manifest is predict.json: what was run on what, how well it did, and the files written.
type Manifest struct {
	Model        string   `json:"model"` // where the model was read from
	Architecture string   `json:"architecture"`
	TrainedOn    Dataset  `json:"trained_on"`
	Dataset      Dataset  `json:"dataset"`
	Accuracy     Accuracy `json:"accuracy"` // on the dataset's splits
	// Version is the folder of the location holding Files (a Target's); empty: the top.
	Version string `json:"version,omitempty"`
	Files   []File `json:"files"`
}

// PartitionDataset describes the whole graph a partition belongs to.
func PartitionDataset(d *graph.PartitionData) Dataset {
	return Dataset{Name: d.Meta.Name, Nodes: d.Meta.NumNodes, Edges: d.Meta.NumEdges, Features: d.Features.Cols(), Classes: d.NumClasses}
}
