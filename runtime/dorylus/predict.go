package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// predictOptions are the flags of `dorylus predict`.
type predictOptions struct {
	model        string
	dataset      string
	output       string
	overwrite    bool
	threads      int
	graphServers int
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
listing them with their checksums and the accuracies on the dataset's splits.

With --graph-servers N it cuts the dataset into N partitions and runs the forward pass on N
graph-server processes, each of which reads the model and writes its own vertices' outputs
(predictions.part-Q-of-N.npy, … and vertices.part-Q-of-N.npy, their dataset ids), listed in
partitions.json and predict.json. A dataset directory that ` + "`dorylus prepare --partitions N`" + ` wrote
is used as it is, so that no process holds the whole graph; any other dataset is cut first.`,
		Example: `  dorylus train --output-dir /tmp/model
  dorylus predict --model /tmp/model --dataset cora --output-dir /tmp/predictions
  dorylus prepare --partitions 4 cora /tmp/cora-4
  dorylus predict --model /tmp/model --dataset /tmp/cora-4 --output-dir /tmp/predictions --graph-servers 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPredict(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", "folder or s3://bucket/prefix holding the model (required)")
	f.StringVar(&o.dataset, "dataset", "cora", "builtin dataset name, dataset directory, prepared file, s3://bucket/prefix, https:// URL, or rmat:… spec")
	f.StringVar(&o.output, "output-dir", "", "folder or s3://bucket/prefix to write the predictions to (required): a new version beside what it holds, switched to by predict.json, written last")
	f.BoolVar(&o.overwrite, "overwrite", false, "replace predictions or a model already in --output-dir")
	f.IntVar(&o.threads, "threads", 0, "kernel threads (0: GOMAXPROCS)")
	f.IntVar(&o.graphServers, "graph-servers", 0, "run on this many graph-server processes (0: in this process)")
	return cmd
}

// manifest is predict.json.
type manifest = export.Manifest

func runPredict(ctx context.Context, o predictOptions, stdout, stderr io.Writer) error {
	if o.model == "" || o.output == "" {
		return fmt.Errorf("predict needs --model and --output-dir")
	}
	if err := errors.Join(zeroOr(jobconfig.Limits.Threads, "--threads", o.threads, "GOMAXPROCS"),
		zeroOr(jobconfig.Limits.GraphServers, "--graph-servers", o.graphServers, "in this process")); err != nil {
		return err
	}
	tensor.SetThreads(o.threads)
	start := time.Now()
	src, err := checkpoint.Open(ctx, o.model, objstore.Config{}) // S3 settings from the SDK's environment
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	dst, err := openOutput(ctx, o.output, o.overwrite)
	if err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	m, err := export.Read(ctx, src)
	if err != nil {
		return err
	}
	if o.graphServers > 0 {
		return predictDistributed(ctx, o, m.Card, dst, start, stdout, stderr)
	}
	d, err := loadDataset(ctx, o.dataset)
	if err != nil {
		return err
	}
	c := m.Card
	if got := export.FeatureNormalisation(d.Features); got != c.Features {
		return fmt.Errorf("the model in %s was trained on features normalised as %q; the features of dataset %s would be %q", src, c.Features, d.Name, got)
	}
	run := cardOptions(c)
	run.inference = o.model
	if err := checkLocalMemory(d, run); err != nil {
		return err
	}
	p, err := loadPredictor(d, cardOptions(c), c.Seed, m.Tensors)
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
	if err := w.PutManifest(ctx, manifest{Model: src.String(), Architecture: c.Architecture,
		TrainedOn: c.Dataset, Dataset: datasetOf(d), Accuracy: acc}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s %s: predicted %d vertices, test accuracy %.2f%% (the model scored %.2f%% on %s); wrote %s in %s\n",
		c.Architecture, d.Name, d.NumNodes(), 100*acc.Test, 100*c.Accuracy.Test, c.Dataset.Name, dst, time.Since(start).Round(time.Millisecond))
	return nil
}

// cardOptions returns the model a card describes as train's options.
func cardOptions(c export.Card) trainOptions {
	return trainOptions{model: c.Architecture, layers: c.Layers, hidden: c.Hidden, heads: c.Heads,
		dropout: c.Training.Dropout, lr: c.Training.LR, weightDecay: c.Training.WeightDecay, cost: defaultCostOptions()}
}

// predictDistributed runs the model card c describes on o.graphServers graph-server processes,
// which read the model themselves and write to dst, and prints what their manifest says. A
// dataset folder already cut into that many partitions (dorylus prepare --partitions) is used
// as it is, so that no process holds the whole graph; any other is cut here first.
func predictDistributed(ctx context.Context, o predictOptions, c export.Card, dst checkpoint.Store, start time.Time, stdout, stderr io.Writer) error {
	ds, err := source.Parse(o.dataset)
	if err != nil {
		return fmt.Errorf("--dataset: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the dorylus binary: %w", err)
	}
	dir, err := source.Fetch(ctx, ds, source.Options{}) // S3 settings from the SDK's environment
	if err != nil {
		return err
	}
	work, err := launcher.WorkDir("predict")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir, pm, err := partition.ForServers(ctx, dir, work, o.graphServers)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dataset %s: %d nodes; partitions in %s (%s): %v\n", pm.Dataset, pm.Nodes, dir, pm.Method, pm.Quality)
	to := cardOptions(c)
	to.epochs, to.evalEvery, to.seed, to.inference, to.outputs.location, to.outputs.overwrite = 1, 1, c.Seed, o.model, o.output, o.overwrite
	dist := distOptions{graphServers: o.graphServers, staleness: jobconfig.Sync, intervals: 4, deadAfter: rpc.DefaultDeadAfter,
		backend: backends.Options{Kind: jobconfig.BackendCPU}}
	if err := checkServersMemory(pm, to, dist); err != nil {
		return err
	}
	if _, err := launchOnce(ctx, exe, dir, work, to, dist, c.Seed, newProgress(io.Discard, 1), stderr, &serverStats{rss: map[string]int64{}}); err != nil {
		return err
	}
	b, err := dst.Get(ctx, export.ManifestFile)
	if err != nil {
		return err
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s/%s: %w", dst, export.ManifestFile, err)
	}
	fmt.Fprintf(stdout, "%s %s on %d graph servers: predicted %d vertices, test accuracy %.2f%% (the model scored %.2f%% on %s); wrote %s in %s\n",
		c.Architecture, m.Dataset.Name, o.graphServers, m.Dataset.Nodes, 100*m.Accuracy.Test, 100*c.Accuracy.Test, c.Dataset.Name, dst,
		time.Since(start).Round(time.Millisecond))
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
