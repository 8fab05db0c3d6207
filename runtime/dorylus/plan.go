package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// workloadOptions are the flags that say what is trained: a dataset or its size, and the model.
type workloadOptions struct {
	dataset           string
	vertices, edges   int64
	features, classes int
	model             string
	layers, hidden    int
	heads             int
	calibrationFile   string
	cores             int // --local: the cores of this machine
}

func (o *workloadOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.dataset, "dataset", "", "builtin dataset name, dataset directory, prepared file or rmat:… spec (its edge cut is measured); or give --vertices, --edges, --features and --classes")
	f.Int64Var(&o.vertices, "vertices", 0, "without --dataset: vertices of the graph")
	f.Int64Var(&o.edges, "edges", 0, "without --dataset: undirected edges of the graph (each is two directed edges, as printed and as rmat:edges= and a dataset's num_edges count them)")
	f.IntVar(&o.features, "features", 0, "without --dataset: input features per vertex (dense)")
	f.IntVar(&o.classes, "classes", 0, "without --dataset: label classes")
	f.StringVar(&o.model, "model", "gcn", "model: gcn, gat or sage (GraphSAGE, mean aggregator)")
	f.IntVar(&o.layers, "layers", 2, "layers of the model")
	f.IntVar(&o.hidden, "hidden", 16, "width of each hidden layer (gat: per head)")
	f.IntVar(&o.heads, "heads", 8, "gat: attention heads of each hidden layer")
	f.StringVar(&o.calibrationFile, "calibration", "", "calibration file that dorylus plan calibrate wrote (default: the one shipped, pkg/plan/calibration.json)")
}

// calibration returns the calibration: --calibration's, or the shipped one.
func (o *workloadOptions) calibration() (plan.Calibration, error) {
	if o.calibrationFile == "" {
		return plan.Default(), nil
	}
	f, err := os.Open(o.calibrationFile)
	if err != nil {
		return plan.Calibration{}, fmt.Errorf("--calibration: %w", err)
	}
	defer f.Close()
	c, err := plan.ReadCalibration(f)
	if err != nil {
		return plan.Calibration{}, fmt.Errorf("--calibration %s: %w", o.calibrationFile, err)
	}
	return c, nil
}

// workload returns the workload of the flags, with the edge cut into each of parts measured
// when a dataset is given.
func (o *workloadOptions) workload(parts []int) (plan.Workload, error) {
	m := plan.Model{Architecture: plan.Architecture(o.model), Layers: o.layers, Hidden: o.hidden, Heads: o.heads}
	sized := o.vertices != 0 || o.edges != 0 || o.features != 0 || o.classes != 0
	switch {
	case o.dataset != "" && sized:
		return plan.Workload{}, fmt.Errorf("--dataset with --vertices, --edges, --features or --classes: give the dataset or its size")
	case o.dataset == "":
		w := plan.Workload{Vertices: o.vertices, Entries: 2 * o.edges, Features: o.features, Classes: o.classes, Model: m}
		return w, w.Validate()
	}
	d, err := graph.Load(o.dataset, graph.LoadOptions{})
	if err != nil {
		return plan.Workload{}, fmt.Errorf("--dataset: %w", err)
	}
	w := plan.Workload{Vertices: int64(d.NumNodes()), Entries: d.Adj.NNZ(), Features: d.NumFeatures(),
		Classes: d.NumClasses, Model: m, Cuts: map[int]plan.Part{}}
	if d.Features.Sparse != nil {
		w.FeatureEntries = d.Features.Sparse.NNZ()
	}
	if err := w.Validate(); err != nil {
		return plan.Workload{}, err
	}
	for _, p := range parts {
		if p > d.NumNodes() {
			continue
		}
		cut, err := partition.Default(d.Adj, p)
		if err != nil {
			return plan.Workload{}, err
		}
		w.Cuts[p] = heaviestPart(partition.Measure(d.Adj, cut), w.Vertices)
	}
	return w, nil
}

// heaviestPart estimates the heaviest part of a cut from its quality: the balances scale the
// mean part's vertices, Â entries (self loops included) and ghosts.
func heaviestPart(q partition.Quality, vertices int64) plan.Part {
	p := float64(q.Parts)
	return plan.Part{
		Vertices: int64(math.Ceil(float64(vertices) / p * q.VertexBalance)),
		Entries:  int64(math.Ceil(float64(q.Entries+vertices) / p * q.Balance)),
		Ghosts:   int64(math.Ceil(float64(q.Ghosts) / p * q.Balance)),
	}
}

// planOptions are the flags of `dorylus plan`.
type planOptions struct {
	workloadOptions
	epochs                 int
	deadline               time.Duration
	budget                 float64
	objective              string
	backends               []string
	graphServers           []int
	intervals              []int
	concurrencyPerInterval []int
	memoriesMB             []int
	staleness              jobconfig.Staleness
	updateEvery            jobconfig.UpdateEvery
	placement              string
	local                  bool
	callLatency            time.Duration
	instance, psInstance   string
	paramServers           int
	pricesFile             string
	json                   bool
	top                    int
	job                    string
}

func newPlanCommand() *cobra.Command {
	o := planOptions{staleness: plan.DefaultSpace.Staleness}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Predict epoch time and cost of each backend and server configuration and pick the best value",
		Long: `Plan predicts the epoch time of a training run in each configuration — the cpu backend, Lambda or
Knative functions; graph servers, intervals, function concurrency and memory — from a model of
one epoch (pkg/plan) calibrated on measured task costs, prices each with the price table of
pkg/cost, and prints them best first: among those that meet --deadline and --budget, the most
epochs per dollar (--objective value) or the shortest run (--objective time). The model is of
the asynchronous pipeline with staleness --staleness (1): run the choice with it.

By default every graph server is its own instance of --instance-type and a function call waits
--call-latency more than the calibrated one (the network to Lambda). With --local every process
shares this machine's cores, as dorylus train --graph-servers runs them, with functions in
emulators: that predicts runs on this machine.

With --job a GNNTrainingJob manifest asks for the choice: its builtin dataset (or --dataset, or
the size flags), model, epochs, parameter servers, staleness bound, runPolicy.budgetUSD and
activeDeadlineSeconds are the plan's unless a flag says otherwise, its tensor backend is the only
one weighed, and the manifest is printed with the choice written in (graph servers, intervals,
staleness, the functions' concurrency and memory); the table goes to standard error.`,
		Example: `  dorylus plan --dataset coauthor_cs --epochs 200 --deadline 10m
  dorylus plan --vertices 1000000 --edges 10000000 --features 128 --classes 16 --hidden 128 --budget 5
  dorylus plan --dataset cora --local --backends cpu --graph-servers 2 --intervals 4 --json
  dorylus plan --job config/samples/cpu_cora.yaml --deadline 5m | kubectl apply -f -
  dorylus plan calibrate --output calibration.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.job == "" {
				return runPlan(o, cmd.OutOrStdout())
			}
			return runPlanJob(o, cmd.Flags(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	o.addFlags(f)
	f.IntVar(&o.epochs, "epochs", 200, "epochs of the run")
	f.DurationVar(&o.deadline, "deadline", 0, "longest the run may take (0: no deadline)")
	f.Float64Var(&o.budget, "budget", 0, "most the run may cost, in USD (0: no budget)")
	f.StringVar(&o.objective, "objective", string(plan.Value), "what to maximise among the configurations that meet the goal: value (epochs per dollar) or time (the shortest run)")
	f.StringSliceVar(&o.backends, "backends", []string{string(plan.CPU), string(plan.Lambda), string(plan.Knative)}, "tensor backends to consider")
	f.IntSliceVar(&o.graphServers, "graph-servers", plan.DefaultSpace.GraphServers, "graph-server counts to consider")
	f.IntSliceVar(&o.intervals, "intervals", plan.DefaultSpace.Intervals, "intervals per graph server to consider")
	f.IntSliceVar(&o.concurrencyPerInterval, "concurrency-per-interval", plan.DefaultSpace.ConcurrencyPerInterval, "lambda, knative: calls in flight per graph server to consider, as multiples of the intervals")
	f.IntSliceVar(&o.memoriesMB, "memory-mb", plan.DefaultSpace.MemoriesMB, "lambda: function memories to consider")
	f.Var(&o.staleness, "staleness", "staleness bound S the run will use (the synchronous mode is not modelled)")
	f.Var(&o.updateEvery, "update-every", "update granularity the run will use (dorylus train --update-every): epoch, interval or a number of intervals")
	f.StringVar(&o.placement, "placement", jobconfig.PlacementAuto, "placement the run will use (dorylus train --placement): auto (by cost: the tasks whose call costs more run in the graph servers) or remote (every task a call)")
	f.BoolVar(&o.local, "local", false, "predict runs on this machine: every graph server and function shares its cores (--cores)")
	f.IntVar(&o.cores, "cores", runtime.NumCPU(), "with --local: the cores of this machine")
	f.DurationVar(&o.callLatency, "call-latency", 0, "latency added to every tensor call: the network to the functions, or dorylus train --inject-latency")
	f.StringVar(&o.instance, "instance-type", cost.DefaultGraphServerInstance, "EC2 instance type of each graph server (its vCPUs are the server's cores; a Knative call is priced as one of them)")
	f.StringVar(&o.psInstance, "param-server-instance-type", cost.DefaultParameterServerInstance, "EC2 instance type of each parameter server")
	f.IntVar(&o.paramServers, "param-servers", 1, "parameter servers")
	f.StringVar(&o.pricesFile, "prices", "", "JSON price list over the built-in one (pkg/cost)")
	f.BoolVar(&o.json, "json", false, "print the goal and every configuration as JSON")
	f.IntVar(&o.top, "top", 10, "configurations to print in the table (0: all)")
	f.StringVar(&o.job, "job", "", "GNNTrainingJob manifest whose settings are the plan's, printed back with the choice written in")
	cmd.AddCommand(newCalibrateCommand())
	return cmd
}

// planReport is what dorylus plan --json prints.
type planReport struct {
	Workload    plan.Workload    `json:"workload"`
	Goal        plan.Goal        `json:"goal"`
	Calibration plan.Calibration `json:"calibration"`
	Prices      string           `json:"prices"`
	// Best is whether Options[0] meets the goal.
	Best    bool          `json:"best"`
	Options []plan.Option `json:"options"`
}

// planInputs are the planner's inputs, parsed and validated from the flags.
type planInputs struct {
	workload plan.Workload
	space    plan.Space
	machine  plan.Machine
	pricing  plan.Pricing
	goal     plan.Goal
	cal      plan.Calibration
}

// inputs parses and validates the flags into the planner's inputs.
func (o *planOptions) inputs() (in planInputs, err error) {
	in.space = plan.Space{GraphServers: o.graphServers, Intervals: o.intervals, ConcurrencyPerInterval: o.concurrencyPerInterval,
		MemoriesMB: o.memoriesMB, Staleness: o.staleness, UpdateEvery: o.updateEvery, Placement: o.placement}
	for _, b := range o.backends {
		in.space.Backends = append(in.space.Backends, plan.Backend(b))
	}
	in.machine = plan.Machine{ExtraLatency: o.callLatency}
	in.pricing = plan.Pricing{GraphServerInstance: o.instance, ParameterServerInstance: o.psInstance, ParameterServers: o.paramServers}
	in.goal = plan.Goal{Epochs: o.epochs, Deadline: o.deadline, BudgetUSD: o.budget, Objective: plan.Objective(o.objective)}
	switch {
	case o.local && o.cores < 1:
		return in, fmt.Errorf("--cores %d: want at least 1", o.cores)
	case o.paramServers < 1:
		return in, fmt.Errorf("--param-servers %d: want at least 1", o.paramServers)
	case o.callLatency < 0:
		return in, fmt.Errorf("--call-latency %v: want 0 or more", o.callLatency)
	}
	if o.local {
		in.machine.SharedCores = o.cores
		if mem, err := memlimit.FromSystem(); err == nil {
			in.machine.SharedMemoryBytes = float64(mem)
		}
	}
	if err := in.space.Validate(); err != nil {
		return in, err
	}
	if err := in.goal.Validate(); err != nil {
		return in, err
	}
	costs := costOptions{pricesFile: o.pricesFile}
	if in.pricing.Prices, err = costs.list(); err != nil {
		return in, err
	}
	if in.cal, err = o.calibration(); err != nil {
		return in, err
	}
	in.workload, err = o.workload(o.graphServers)
	return in, err
}

// choose parses the flags and weighs every configuration: best first, and whether it meets the goal.
func (o *planOptions) choose() (in planInputs, opts []plan.Option, best bool, err error) {
	if in, err = o.inputs(); err != nil {
		return in, nil, false, err
	}
	opts, best, err = plan.Choose(in.workload, in.space, in.machine, in.cal, in.pricing, in.goal)
	return in, opts, best, err
}

func runPlan(o planOptions, stdout io.Writer) error {
	in, opts, best, err := o.choose()
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(planReport{Workload: in.workload, Goal: in.goal, Calibration: in.cal,
			Prices: in.pricing.Prices.Source + ", as of " + in.pricing.Prices.AsOf, Best: best, Options: opts})
	}
	writePlanTable(stdout, in.workload, in.goal, in.cal, best, opts, o.top)
	return nil
}

// writePlanTable prints the goal, the best configuration and the top configurations.
func writePlanTable(out io.Writer, w plan.Workload, g plan.Goal, cal plan.Calibration, best bool, opts []plan.Option, top int) {
	goal := []string{fmt.Sprintf("%d epochs", g.Epochs)}
	if g.Deadline > 0 {
		goal = append(goal, "within "+g.Deadline.String())
	}
	if g.BudgetUSD > 0 {
		goal = append(goal, fmt.Sprintf("at most $%.2f", g.BudgetUSD))
	}
	fmt.Fprintf(out, "%s, %d vertices, %d directed edges, %d features, %d classes; %s; best %s\n",
		strings.Join(goal, " "), w.Vertices, w.Entries, w.Features, w.Classes, describeModel(w.Model), g.Objective)
	fmt.Fprintf(out, "calibration of %s on %s\n", cal.Measured, cal.Machine)
	if !best {
		fmt.Fprintln(out, "no configuration meets the goal; the best value regardless:")
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tconfiguration\tepoch\ttotal\tcost\tepochs/$\tbound\tcalls/local\tgraph server memory\t")
	if top > 0 {
		opts = opts[:min(top, len(opts))]
	}
	for i, op := range opts {
		mark := ""
		if i == 0 && best {
			mark = "*"
		} else if !op.Meets {
			mark = "-"
		}
		fits := ""
		if !op.Fits {
			fits = " (does not fit)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t$%.4f\t%.0f\t%s\t%.0f/%.0f\t%s%s\t\n", mark, op.Config, roundedSeconds(op.Prediction.EpochSeconds),
			roundedSeconds(op.TotalSeconds), op.CostUSD, op.EpochsPerUSD, bound(op.Prediction), op.Prediction.Calls, op.Prediction.LocalTasks,
			memorySize(op.GraphServerBytes), fits)
	}
	tw.Flush()
	fmt.Fprintln(out, "* the choice; - misses the goal. bound: what sets the epoch (the graph servers' work, the parameter servers', the calls, one interval's chain of latencies and the work); calls/local: an epoch's tensor calls and the tasks placement runs in the graph servers instead (--placement); graph server memory: the heaviest one's, predicted (README \"Memory of a graph server\"), which must fit the instance type's memory (with --local, all of them this machine's)")
}

func describeModel(m plan.Model) string {
	if m.Architecture == plan.GAT {
		return fmt.Sprintf("gat %d layers, %d hidden × %d heads", m.Layers, m.Hidden, m.Heads)
	}
	return fmt.Sprintf("%s %d layers, %d hidden", m.Architecture, m.Layers, m.Hidden)
}

// roundedSeconds formats a time in seconds to three significant digits.
func roundedSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	unit := time.Duration(1)
	for unit*1000 <= d {
		unit *= 10
	}
	return d.Round(unit).String()
}

// memorySize formats bytes in MiB below a GiB, else in GiB.
func memorySize(b float64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.0f MiB", b/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", b/(1<<30))
}

// bound names the largest of a prediction's bounds.
func bound(p plan.Prediction) string {
	names := []string{"work", "params", "calls", "chain"}
	vals := []float64{p.WorkSeconds, p.ParamSeconds, p.CallsSeconds, p.ChainSeconds}
	return names[slices.Index(vals, slices.Max(vals))]
}
