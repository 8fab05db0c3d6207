package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// predictOptions are the flags of `dorylus predict`.
type predictOptions struct {
	model   string
	dataset string
	output  string
	threads int
}

func newPredictCommand() *cobra.Command {
	o := predictOptions{}
	cmd := &cobra.Command{
		Use:   "predict",
		Short: "Run a trained model on a graph and write its predictions and embeddings",
		Long: `Predict loads a model that ` + "`dorylus train --output-dir`" + ` wrote (model.json and model.safetensors,
checked against the sizes and SHA-256 sums the card lists), runs the full-graph forward pass on the
dataset in this process, and writes predictions.npy (int32 class per vertex), probabilities.npy
(float32 [vertices, classes]) and embeddings.npy (the input of the last layer), then predict.json
listing them with their checksums and the accuracies on the dataset's splits.`,
		Example: `  dorylus train --output-dir /tmp/model
  dorylus predict --model /tmp/model --dataset cora --output-dir /tmp/predictions`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPredict(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", "folder or s3://bucket/prefix holding the model (required)")
	f.StringVar(&o.dataset, "dataset", "cora", "builtin dataset name, dataset directory, prepared file, s3://bucket/prefix, https:// URL, or rmat:… spec")
	f.StringVar(&o.output, "output-dir", "", "folder or s3://bucket/prefix to write the predictions to (required)")
	f.IntVar(&o.threads, "threads", 0, "kernel threads (0: GOMAXPROCS)")
	return cmd
}

// manifest is predict.json: what was run on what, how well it did, and the files written.
type manifest struct {
	Model        string          `json:"model"` // where the model was read from
	Architecture string          `json:"architecture"`
	TrainedOn    export.Dataset  `json:"trained_on"`
	Dataset      export.Dataset  `json:"dataset"`
	Accuracy     export.Accuracy `json:"accuracy"` // on the dataset's splits
	Files        []export.File   `json:"files"`
}

func runPredict(ctx context.Context, o predictOptions, stdout, stderr io.Writer) error {
	if o.model == "" || o.output == "" {
		return fmt.Errorf("predict needs --model and --output-dir")
	}
	tensor.SetThreads(o.threads)
	start := time.Now()
	src, err := checkpoint.Open(ctx, o.model, objstore.Config{}) // S3 settings from the SDK's environment
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	dst, err := checkpoint.Open(ctx, o.output, objstore.Config{})
	if err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	m, err := export.Read(ctx, src)
	if err != nil {
		return err
	}
	d, err := loadDataset(ctx, o.dataset)
	if err != nil {
		return err
	}
	c := m.Card
	if got := featureNormalisation(d); got != c.Features {
		return fmt.Errorf("the model in %s was trained on features normalised as %q; the features of dataset %s would be %q", src, c.Features, d.Name, got)
	}
	to := trainOptions{model: c.Architecture, layers: c.Layers, hidden: c.Hidden, heads: c.Heads,
		dropout: c.Training.Dropout, lr: c.Training.LR, weightDecay: c.Training.WeightDecay}
	p, err := loadPredictor(d, to, c.Seed, m.Tensors)
	if err != nil {
		return fmt.Errorf("the model in %s: %w", src, err)
	}
	met, err := p.Evaluate()
	if err != nil {
		return err
	}
	w := &export.Writer{Store: dst}
	if err := writePredictions(ctx, w, p); err != nil {
		return err
	}
	acc := export.Accuracy{Train: met.TrainAcc, Val: met.ValAcc, Test: met.TestAcc}
	if err := w.PutJSON(ctx, export.ManifestFile, manifest{Model: src.String(), Architecture: c.Architecture,
		TrainedOn: c.Dataset, Dataset: datasetOf(d), Accuracy: acc, Files: w.Files()}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s: predicted %d vertices, test accuracy %.2f%% (the model scored %.2f%% on %s); wrote %s in %s\n",
		c.Architecture, d.Name, d.NumNodes(), 100*acc.Test, 100*c.Accuracy.Test, c.Dataset.Name, dst, time.Since(start).Round(time.Millisecond))
	return nil
}

// loadDataset parses a dataset spec (a builtin name, a path, s3://, http(s)://, rmat:…), then
// fetches and loads it as training does.
func loadDataset(ctx context.Context, spec string) (*graph.Dataset, error) {
	ds, err := source.Parse(spec)
	if err != nil {
		return nil, err
	}
	return fetchDataset(ctx, ds)
}

// fetchDataset fetches and loads a dataset (S3 settings from the SDK's environment), its
// sparse features row-normalised.
func fetchDataset(ctx context.Context, ds jobconfig.Dataset) (*graph.Dataset, error) {
	spec, err := source.Fetch(ctx, ds, source.Options{})
	if err != nil {
		return nil, err
	}
	d, err := graph.Load(spec, graph.LoadOptions{})
	if err != nil {
		return nil, err
	}
	if d.Features.Sparse != nil {
		graph.RowNormalize(d.Features.Sparse)
	}
	return d, nil
}
