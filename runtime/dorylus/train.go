package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/internal/procmem"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/runpolicy"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/stats"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/pkg/trace"
	"github.com/dorylus-gnn/dorylus/runtime/trainer"
)

// trainOptions are the flags of `dorylus train`.
type trainOptions struct {
	dataset     string            // the --dataset spec, parsed once into source
	source      jobconfig.Dataset // where the dataset lives, typed
	model       string
	layers      int
	hidden      int
	heads       int
	dropout     float64
	lr          float64
	weightDecay float64
	epochs      int
	patience    int
	seed        uint64
	runs        int
	threads     int
	evalEvery   int
	output      string
	plot        string
	checkpoint  checkpointOptions
	cost        costOptions
	outputs     outputOptions
	trace       string // --trace: the timeline of the first run
	inference   string // predict --graph-servers: the model to run instead of training one
}

func newTrainCommand() *cobra.Command {
	o := trainOptions{}
	var dist *distOptions
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train a GNN with every role in this process",
		Long: `Train runs full-graph GNN training in one process: the graph-parallel tasks (GA, ∇GA) and the
tensor-parallel tasks (AV, ∇AV) on a goroutine pool, and the weight update (WU) in place.
With no flags it trains a 2-layer GCN on the Cora dataset embedded in the binary.`,
		Example: `  dorylus train
  dorylus train --dataset datasets/citeseer --runs 10 --output json
  dorylus train --dataset rmat:nodes=100000,edges=2000000,features=128,classes=16,seed=1 --hidden 128 --epochs 20`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.applyModelDefaults(cmd)
			if err := dist.validate(cmd.Flags()); err != nil {
				return err
			}
			var err error
			if o.source, err = source.Parse(o.dataset); err != nil {
				return fmt.Errorf("--dataset: %w", err)
			}
			if dist.enabled() {
				if err := o.validate(true); err != nil {
					return err
				}
				if err := o.outputs.validate(cmd.Context()); err != nil {
					return err
				}
				if err := o.checkpoint.prepare(cmd.Context()); err != nil {
					return err
				}
				return runDistributed(cmd.Context(), o, *dist, cmd.OutOrStdout(), cmd.ErrOrStderr())
			}
			if dist.backend.Remote() {
				return fmt.Errorf("--backend %s needs --graph-servers: the single-process trainer runs its tensor tasks in process", dist.backend.Kind)
			}
			return runTrain(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	dist = addTrainFlags(cmd.Flags(), &o)
	return cmd
}

// addTrainFlags registers the flags of `dorylus train` into o (which then holds their
// defaults) and returns those of a run on graph servers.
func addTrainFlags(f *pflag.FlagSet, o *trainOptions) *distOptions {
	dist := addDistributedFlags(f)
	f.StringVar(&o.dataset, "dataset", "cora", "builtin dataset name, dataset directory, prepared file, s3://bucket/prefix, https:// URL, or rmat:nodes=N,edges=E,features=F,classes=C,seed=S")
	f.StringVar(&o.model, "model", "gcn", "model to train: gcn, gat or sage (GraphSAGE, mean aggregator; gcn's defaults) (gat changes the defaults to the GAT paper's: --hidden 8 --dropout 0.6 --lr 0.005 --patience 100, with --epochs 1000 as the cap)")
	f.IntVar(&o.layers, "layers", 2, "number of graph-convolution (gcn, sage) or attention (gat) layers")
	f.IntVar(&o.hidden, "hidden", 16, "width of each hidden layer (gat: features per head)")
	f.IntVar(&o.heads, "heads", 8, "gat: attention heads of each hidden layer, concatenated (the output layer has one)")
	f.Float64Var(&o.dropout, "dropout", 0.5, "dropout rate on the input of every layer (gat: and on the attention coefficients), in [0, 1)")
	f.Float64Var(&o.lr, "lr", 0.01, "Adam learning rate")
	f.Float64Var(&o.weightDecay, "weight-decay", 5e-4, "L2 weight decay on the first layer's weight (gat: on every parameter)")
	f.IntVar(&o.epochs, "epochs", 200, "training epochs per run (with --patience: at most)")
	f.IntVar(&o.patience, "patience", 0, "select by validation as the GAT paper: evaluate every epoch, report the test accuracy of the last epoch that reached both the best validation accuracy and the lowest validation loss so far, and stop a run after this many epochs without either (0: report the last epoch)")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the first run (weights and dropout); run i uses seed+i-1")
	f.IntVar(&o.runs, "runs", 1, "number of runs, with seeds seed, seed+1, …; accuracies are averaged")
	f.IntVar(&o.threads, "threads", 0, "kernel threads (0: GOMAXPROCS)")
	f.IntVar(&o.evalEvery, "eval-every", 1, "evaluate on the validation split every N epochs (evaluation is not counted in epoch time)")
	f.StringVar(&o.output, "output", "text", "result format: text or json")
	f.StringVar(&o.plot, "plot", "", "write loss and accuracy curves of the first run to this PNG file")
	o.checkpoint.addFlags(f)
	o.cost.addFlags(f)
	o.outputs.addFlags(f)
	f.StringVar(&o.trace, "trace", "", "write a timeline of the first run's training tasks and waits on every server to this file (Chrome trace-event JSON, for Perfetto or chrome://tracing) and print a summary per epoch")
	return dist
}

// gatDefaults are the GAT paper's hyper-parameters and protocol (Veličković et al. 2018, Cora
// and CiteSeer: early stopping with patience 100, which ends its runs after 600–800 epochs),
// used for the flags a --model gat run leaves unset.
var gatDefaults = map[string]string{"hidden": "8", "dropout": "0.6", "lr": "0.005", "weight-decay": "5e-4", "patience": "100", "epochs": "1000"}

// applyModelDefaults gives the flags the user did not set the defaults of the chosen model.
func (o *trainOptions) applyModelDefaults(cmd *cobra.Command) {
	if o.model != "gat" {
		return
	}
	f := cmd.Flags()
	for name, v := range gatDefaults {
		if !f.Changed(name) {
			_ = f.Set(name, v) // constant, valid values
		}
	}
}

func (o trainOptions) validate(dist bool) error {
	lim := jobconfig.Limits
	switch {
	case o.model != "gcn" && o.model != "gat" && o.model != "sage":
		return fmt.Errorf("--model %q: want gcn, gat or sage", o.model)
	}
	if err := errors.Join(lim.Layers.Check("--layers", o.layers), lim.Hidden.Check("--hidden", o.hidden),
		lim.Heads.Check("--heads", o.heads), lim.Epochs.Check("--epochs", o.epochs), lim.Runs.Check("--runs", o.runs),
		lim.Epochs.Check("--eval-every", o.evalEvery), zeroOr(lim.Epochs, "--patience", o.patience, "off"),
		zeroOr(lim.Threads, "--threads", o.threads, "GOMAXPROCS")); err != nil {
		return err
	}
	switch {
	case !(o.dropout >= 0 && o.dropout < 1):
		return fmt.Errorf("--dropout %g: want a rate in [0, 1)", o.dropout)
	case !(o.lr > 0) || math.IsInf(o.lr, 0):
		return fmt.Errorf("--lr %g: want a positive learning rate", o.lr)
	case !(o.weightDecay >= 0) || math.IsInf(o.weightDecay, 0):
		return fmt.Errorf("--weight-decay %g: want a non-negative number", o.weightDecay)
	case o.output != "text" && o.output != "json":
		return fmt.Errorf("--output %q: want text or json", o.output)
	}
	if o.trace != "" {
		if o.model == "gat" && !dist {
			return errors.New("--trace with --model gat needs --graph-servers: the single-process trainer traces GCN only")
		}
		if st, err := os.Stat(filepath.Dir(o.trace)); err != nil || !st.IsDir() {
			return fmt.Errorf("--trace %s: its folder does not exist", o.trace)
		}
	}
	if err := o.cost.validate(); err != nil {
		return err
	}
	return o.checkpoint.validate(o)
}

// zeroOr checks a flag whose 0 means what zero says against r: "--threads -1: want 0
// (GOMAXPROCS) or 1 to 1024".
func zeroOr(r jobconfig.Range, flag string, n int, zero string) error {
	if n == 0 || r.Contains(n) {
		return nil
	}
	return fmt.Errorf("%s %d: want 0 (%s) or %d to %d", flag, n, zero, r.Min, r.Max)
}

// epochRecord is one point of a run's learning curve.
type epochRecord = trainer.Record

// runResult is the outcome of one seed.
type runResult struct {
	Seed      uint64        `json:"seed"`
	TestAcc   float64       `json:"test_accuracy"`
	ValAcc    float64       `json:"val_accuracy"`
	TrainAcc  float64       `json:"train_accuracy"`
	FinalLoss float64       `json:"final_loss"`
	EpochsRun int           `json:"epochs_run"`
	BestEpoch int           `json:"best_epoch,omitempty"` // with --patience: the epoch whose accuracies are reported
	Curve     []epochRecord `json:"-"`
	// with --checkpoint-dir: the epoch resumed from, the checkpoints written and the time spent writing them
	ResumedFrom       int     `json:"resumed_from_epoch,omitempty"`
	Checkpoints       int     `json:"checkpoints,omitempty"`
	CheckpointSeconds float64 `json:"checkpoint_seconds,omitempty"`
}

// trainReport is the JSON object `--output json` prints.
type trainReport struct {
	Dataset            string  `json:"dataset"`
	Model              string  `json:"model"`
	Nodes              int     `json:"nodes"`
	Edges              int64   `json:"edges"` // directed: both directions of every undirected edge
	Features           int     `json:"features"`
	Classes            int     `json:"classes"`
	Layers             int     `json:"layers"`
	Hidden             int     `json:"hidden"`
	Heads              int     `json:"heads,omitempty"`
	Epochs             int     `json:"epochs"`
	Patience           int     `json:"patience,omitempty"`
	Runs               int     `json:"runs"`
	Threads            int     `json:"threads"`
	TestAccuracy       float64 `json:"test_accuracy"`
	TestAccuracyStd    float64 `json:"test_accuracy_std"`
	ValAccuracy        float64 `json:"val_accuracy"`
	EpochSecondsMedian float64 `json:"epoch_seconds_median"`
	LoadSeconds        float64 `json:"load_seconds"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	// PeakRSSByProcess is each server's peak resident memory (with --graph-servers), by its
	// name: "graph-server 0", "param-server 1".
	PeakRSSByProcess map[string]int64 `json:"peak_rss_by_process,omitempty"`
	PerRun           []runResult      `json:"per_run"`
	// Trace sums the first run's timeline per epoch and server (with --trace).
	Trace []trace.EpochSummary `json:"trace,omitempty"`
	// CostUSD is the estimated cost of the run on AWS, which Cost itemises (pkg/cost).
	CostUSD float64         `json:"cost_usd,omitempty"`
	Cost    *cost.Breakdown `json:"cost,omitempty"`
	// TensorTasks counts every run's tensor tasks by where they ran (with --graph-servers).
	TensorTasks *backends.Placed `json:"tensor_tasks,omitempty"`
}

func runTrain(ctx context.Context, o trainOptions, stdout, stderr io.Writer) error {
	if err := o.validate(false); err != nil {
		return err
	}
	if err := o.outputs.validate(ctx); err != nil {
		return err
	}
	if err := o.checkpoint.prepare(ctx); err != nil {
		return err
	}
	tensor.SetThreads(o.threads)
	start := time.Now()
	d, err := fetchDataset(ctx, o.source)
	if err != nil {
		return err
	}
	if err := checkLocalMemory(d, o); err != nil {
		return err
	}
	loadSeconds := time.Since(start).Seconds()
	rep := trainReport{
		Dataset: d.Name, Model: o.model, Nodes: d.NumNodes(), Edges: d.Adj.NNZ(),
		Features: d.NumFeatures(), Classes: d.NumClasses, Layers: o.layers, Hidden: o.hidden,
		Epochs: o.epochs, Patience: o.patience, Runs: o.runs, Threads: tensor.Threads(), LoadSeconds: loadSeconds,
	}
	if o.model == "gat" {
		rep.Heads = o.heads
	}
	fmt.Fprintf(stderr, "dataset %s: %d nodes, %d directed edges, %d features, %d classes (loaded in %.2fs)\n",
		d.Name, rep.Nodes, rep.Edges, rep.Features, rep.Classes, loadSeconds)
	progress := newProgress(stderr, o.epochs*o.runs)
	var epochTimes []float64
	var rec *trace.Recorder
	if o.trace != "" {
		rec = trace.ForRun(0, o.epochs, 1, o.layers)
	}
	for r := 0; r < o.runs; r++ {
		runRec := rec // the first run's only
		if r > 0 {
			runRec = nil
		}
		res, times, err := trainOnce(ctx, d, o, o.seed+uint64(r), runRec, progress, stderr)
		if err != nil {
			return err
		}
		epochTimes = append(epochTimes, times...)
		rep.PerRun = append(rep.PerRun, res)
	}
	progress.finish()
	if o.trace != "" {
		if rep.Trace, err = finishTrace(o.trace, trace.FromRecorder(rec), stderr); err != nil {
			return err
		}
	}
	rep.summarize(epochTimes)
	rep.PeakRSSBytes = procmem.Self().Peak
	b, err := o.cost.single(time.Since(start))
	if err != nil {
		return err
	}
	reportCost(&rep, b, stderr)
	if err := writeOutputs(ctx, o, d, rep, stderr); err != nil {
		return err
	}
	return o.writeReport(rep, "", stdout)
}

// summarize fills the report's accuracies (mean and deviation over its runs) and the median of
// the epoch times.
func (rep *trainReport) summarize(epochTimes []float64) {
	rep.EpochSecondsMedian = stats.Median(epochTimes)
	var test, val []float64
	for _, r := range rep.PerRun {
		test, val = append(test, r.TestAcc), append(val, r.ValAcc)
	}
	rep.TestAccuracy, rep.TestAccuracyStd = stats.MeanStd(test)
	rep.ValAccuracy, _ = stats.MeanStd(val)
}

// writeReport plots the first run's curves (--plot) and prints the report as --output says;
// where, if not empty, says where the run ran (" on 2 graph servers (sync)").
func (o trainOptions) writeReport(rep trainReport, where string, stdout io.Writer) error {
	if o.plot != "" {
		if err := plotCurves(o.plot, rep.PerRun[0].Curve, rep.Dataset); err != nil {
			return err
		}
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "%s %s%s: test accuracy %.2f%% ± %.2f over %d run(s), val %.2f%%, median epoch %s, peak RSS %d MiB%s\n",
		rep.Model, rep.Dataset, where, 100*rep.TestAccuracy, 100*rep.TestAccuracyStd, rep.Runs, 100*rep.ValAccuracy,
		time.Duration(rep.EpochSecondsMedian*float64(time.Second)).Round(time.Microsecond), rep.PeakRSSBytes>>20, selectionNote(rep))
	return nil
}

// selectionNote says, for a run with --patience, that the accuracies are those of the kept epoch.
func selectionNote(rep trainReport) string {
	if rep.Patience == 0 {
		return ""
	}
	ran := 0.0
	for _, r := range rep.PerRun {
		ran += float64(r.EpochsRun)
	}
	return fmt.Sprintf(" (accuracies of the best-validation epoch; patience %d, %.0f epochs run on average)", rep.Patience, ran/float64(len(rep.PerRun)))
}

// newLearner builds the trainer of the chosen model for one seed.
func newLearner(d *graph.Dataset, o trainOptions, seed uint64) (model.Learner, error) {
	if o.model == "gat" {
		return model.NewGATTrainer(d, model.GATTrainConfig{
			GAT: model.GATConfig{InDim: d.NumFeatures(), Hidden: o.hidden, Heads: o.heads, OutHeads: 1,
				Classes: d.NumClasses, Layers: o.layers, Dropout: float32(o.dropout), AttentionDropout: float32(o.dropout)},
			LR: float32(o.lr), WeightDecay: float32(o.weightDecay), Seed: seed,
		})
	}
	return model.NewTrainer(d, model.TrainConfig{
		GCN: model.GCNConfig{InDim: d.NumFeatures(), Hidden: o.hidden, Classes: d.NumClasses,
			Layers: o.layers, Dropout: float32(o.dropout)}, SAGE: o.model == "sage",
		LR: float32(o.lr), WeightDecay: float32(o.weightDecay), Seed: seed,
	})
}

// trainOnce trains one seed and returns its result and the time of each epoch; rec, if not
// nil, records a GCN's epochs.
func trainOnce(ctx context.Context, d *graph.Dataset, o trainOptions, seed uint64, rec *trace.Recorder, p *progress, log io.Writer) (res runResult, _ []float64, err error) {
	tr, err := newLearner(d, o, seed)
	if err != nil {
		return runResult{}, nil, err
	}
	if gcn, ok := tr.(*model.Trainer); ok {
		gcn.SetTrace(rec)
	}
	res.Seed = seed
	cps, err := openCheckpoints(ctx, o, d, seed, log)
	if err != nil {
		return res, nil, err
	}
	c := trainer.Config{Seed: seed, Policy: runpolicy.Config{Epochs: o.epochs, EvalEvery: o.evalEvery, Patience: o.patience},
		Epoch: func(r trainer.Record, pol *runpolicy.Policy) error {
			if err := keepOutputs(o, tr, pol, seed, r.Epoch); err != nil {
				return err
			}
			p.epoch(seed, r.Epoch, o.epochs, r.Loss, r.ValAcc, r.Seconds)
			return nil
		}}
	if cps != nil {
		if o.checkpoint.resume {
			if c.Start, err = cps.resume(ctx, tr); err != nil {
				return res, nil, err
			}
			res.ResumedFrom = c.Start
		}
		c.Checkpoints = seedCheckpoints{cps, seed}
		defer func() { res.Checkpoints, res.CheckpointSeconds = cps.saved, cps.seconds }()
	}
	out, err := trainer.Train(ctx, tr, c)
	if err != nil {
		return res, nil, err
	}
	res.Curve, res.BestEpoch = out.Curve, out.BestEpoch
	res.TestAcc, res.ValAcc, res.TrainAcc = out.Metrics.TestAcc, out.Metrics.ValAcc, out.Metrics.TrainAcc
	times := make([]float64, 0, len(out.Curve))
	for _, r := range out.Curve {
		times = append(times, r.Seconds)
	}
	if n := len(out.Curve); n > 0 {
		res.FinalLoss, res.EpochsRun = out.Curve[n-1].Loss, out.Curve[n-1].Epoch
	}
	return res, times, nil
}

// seedCheckpoints are one seed's checkpoints, as the epoch loop saves them.
type seedCheckpoints struct {
	*runCheckpoints
	seed uint64
}

func (c seedCheckpoints) Due(epoch, epochs int) bool { return c.due(epoch, epochs) }

func (c seedCheckpoints) Save(ctx context.Context, tr model.Learner, epoch int) error {
	return c.save(ctx, tr, c.seed, epoch)
}

func (c seedCheckpoints) String() string { return fmt.Sprint(c.cp.Store) }

// progress shows training progress: a bar on a terminal, a log line every few epochs otherwise.
type progress struct {
	bar *progressbar.ProgressBar
	out io.Writer
}

func newProgress(w io.Writer, total int) *progress {
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			return &progress{bar: progressbar.NewOptions(total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription("training"),
				progressbar.OptionShowCount(),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish())}
		}
	}
	return &progress{out: w}
}

func (p *progress) epoch(seed uint64, e, epochs int, loss, valAcc, sec float64) {
	val := "n/a" // not evaluated yet (--eval-every)
	if !math.IsNaN(valAcc) {
		val = fmt.Sprintf("%.2f%%", 100*valAcc)
	}
	if p.bar != nil {
		p.bar.Describe(fmt.Sprintf("seed %d epoch %d/%d loss %.4f val %s %.1fms", seed, e, epochs, loss, val, 1e3*sec))
		_ = p.bar.Add(1)
		return
	}
	if e == 1 || e == epochs || e%max(1, epochs/10) == 0 {
		fmt.Fprintf(p.out, "seed %d epoch %d/%d loss %.4f val_accuracy %s epoch_time %.4fs\n", seed, e, epochs, loss, val, sec)
	}
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
