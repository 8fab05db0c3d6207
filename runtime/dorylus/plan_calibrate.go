package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/stats"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// calibrateOptions are the flags of `dorylus plan calibrate`.
type calibrateOptions struct {
	dataset         string
	epochs, rounds  int
	cores           int
	output          string
	lambdaEndpoints string
}

// calibrationRuns are the training runs whose epoch times the coefficients are fitted to.
// On the cpu backend: on --dataset (an empty dataset) few and many intervals (the cost per
// task), two and four graph servers (the scatter messages) and a wider hidden layer (the
// weights); a dataset of many sparse features (the element-wise work), a denser graph of
// narrow dense features (the kernels), and a tiny graph with many intervals (the costs per
// task and per epoch apart from the weights') and with one interval on one and two graph
// servers, whose epochs the round trips set. With --lambda-endpoints, on the
// lambda backend (calls marks them), one call in flight per interval, on --dataset and on the
// tiny graph (large and small payloads): one interval on one graph server, whose epochs its
// calls' latency sets, and two intervals on two graph servers, whose calls' overhead (per
// call and per byte) loads the cores.
var calibrationRuns = []struct {
	dataset                         string
	graphServers, intervals, hidden int
	calls                           bool
}{
	{"", 1, 2, 16, false}, {"", 1, 16, 16, false}, {"", 2, 4, 16, false}, {"", 4, 4, 16, false}, {"", 1, 4, 64, false},
	{"amazon_computers", 1, 4, 16, false}, {"amazon_computers", 2, 8, 16, false},
	{"rmat:nodes=20000,edges=400000,features=32,classes=8,seed=1", 1, 4, 16, false},
	{tinyGraph, 1, 1, 16, false}, {tinyGraph, 1, 16, 16, false}, {tinyGraph, 2, 1, 16, false},
	{"", 1, 1, 16, true}, {"", 2, 2, 16, true}, {tinyGraph, 1, 1, 16, true}, {tinyGraph, 2, 2, 16, true},
}

// tinyGraph is calibrationRuns' graph of little work per task.
const tinyGraph = "rmat:nodes=4000,edges=20000,features=8,classes=4,seed=2"

// calibrationStaleness is the staleness bound of the calibration runs.
var calibrationStaleness = jobconfig.Bounded(1)

// calibrationEndpoints returns the least number of emulators the lambda runs need: one per
// interval of the largest.
func calibrationEndpoints() int {
	n := 0
	for _, r := range calibrationRuns {
		if r.calls {
			n = max(n, r.graphServers*r.intervals)
		}
	}
	return n
}

func newCalibrateCommand() *cobra.Command {
	o := calibrateOptions{}
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Measure the planner's coefficients on this machine and write a calibration file",
		Long: `Calibrate measures, on this machine: the core-seconds of one multiply-add of the sparse gather and
of one flop of the GEMM (single-threaded micro-benchmarks of pkg/tensor's kernels), the rate of a
loopback TCP transfer, and the median epoch times of short dorylus train runs on the cpu backend
(GCN, staleness 1: ` + calibrationRunsText(false) + `), to which it fits the costs of the
element-wise work, of a task, a scatter message, a weight element and an epoch, and the latency of
a round trip between servers, fixed and per byte carried. With --lambda-endpoints (aws-lambda-rie emulators,
hack/lambda-emulators.sh) it also runs the lambda backend (` + calibrationRunsText(true) + `) and
fits the latency and the overhead of a call. It writes the calibration as JSON to --output. It warns
when other work keeps a quarter of the cores busy as it starts: a loaded machine calibrates too slow.`,
		Example: `  dorylus plan calibrate --output pkg/plan/calibration.json
  dorylus plan calibrate --lambda-endpoints "$(hack/lambda-emulators.sh up /tmp/rie 4)" --output cal.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCalibrate(cmd.Context(), o, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataset, "dataset", "citeseer", "dataset of the training runs (keep the datasets you validate on out of it)")
	f.IntVar(&o.epochs, "epochs", 20, "epochs of each training run")
	f.IntVar(&o.rounds, "rounds", 2, "times each training run is repeated; the median epoch time of all counts")
	f.IntVar(&o.cores, "cores", runtime.NumCPU(), "cores of this machine, shared by the runs' processes")
	f.StringVar(&o.output, "output", "", "file to write the calibration to (default: standard output)")
	f.StringVar(&o.lambdaEndpoints, "lambda-endpoints", "", "comma-separated aws-lambda-rie endpoints (at least "+strconv.Itoa(calibrationEndpoints())+") to fit the calls' latency and overhead on; with none they are 0")
	return cmd
}

// busyFraction returns the fraction of all cores' time the machine spent busy over the next
// interval (from /proc/stat; false where it cannot be read), while this process waits.
func busyFraction(interval time.Duration) (float64, bool) {
	b0, t0, ok0 := cpuTimes()
	time.Sleep(interval)
	b1, t1, ok1 := cpuTimes()
	if !ok0 || !ok1 || t1 <= t0 {
		return 0, false
	}
	return float64(b1-b0) / float64(t1-t0), true
}

// cpuTimes reads the busy and the total time of all cores from /proc/stat.
func cpuTimes() (busy, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseCPUTimes(b)
}

// parseCPUTimes parses the first ("cpu") line of /proc/stat: user, nice, system, idle, iowait,
// irq, softirq, steal…, in ticks; idle and iowait are not busy.
func parseCPUTimes(stat []byte) (busy, total uint64, ok bool) {
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, total, true
}

// calibrationRunsText lists the calibration runs of the cpu backend, or of the lambda backend.
func calibrationRunsText(calls bool) string {
	var s []string
	for _, r := range calibrationRuns {
		if r.calls == calls {
			s = append(s, fmt.Sprintf("%s %d graph servers × %d intervals, hidden %d", cmp.Or(r.dataset, "--dataset"), r.graphServers, r.intervals, r.hidden))
		}
	}
	return strings.Join(s, "; ")
}

func runCalibrate(ctx context.Context, o calibrateOptions, log io.Writer) error {
	switch {
	case o.epochs < 3 || o.rounds < 1 || o.cores < 1:
		return fmt.Errorf("--epochs %d, --rounds %d, --cores %d: want at least 3 epochs, 1 round and 1 core", o.epochs, o.rounds, o.cores)
	case o.lambdaEndpoints != "" && len(strings.Split(o.lambdaEndpoints, ",")) < calibrationEndpoints():
		return fmt.Errorf("--lambda-endpoints: want at least %d endpoints", calibrationEndpoints())
	}
	if busy, ok := busyFraction(time.Second); ok && busy >= 0.25 {
		fmt.Fprintf(log, "calibrate: warning: other work keeps the cores %.0f %% busy: the coefficients will be those of "+
			"a loaded machine, too slow for a quiet one; calibrate when it is quiet\n", 100*busy)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	d, err := graph.Load(o.dataset, graph.LoadOptions{})
	if err != nil {
		return fmt.Errorf("--dataset: %w", err)
	}
	cal := plan.Calibration{
		Measured: time.Now().UTC().Format(time.DateOnly),
		Machine:  fmt.Sprintf("%d cores, %s/%s, GEMM %s", o.cores, runtime.GOOS, runtime.GOARCH, tensor.MatMulImpl()),
		Command:  "dorylus " + strings.Join(os.Args[1:], " "),
	}
	cal.GatherSecondsPerMAC, cal.FeatureSecondsPerMAC, cal.FlopSeconds = kernelCosts(d)
	if cal.BytesPerSecond, err = loopbackRate(); err != nil {
		return err
	}
	fmt.Fprintf(log, "kernels: gather %.3g s/MAC, sparse features %.3g s/MAC, gemm %.3g s/flop per core; loopback %.3g B/s\n",
		cal.GatherSecondsPerMAC, cal.FeatureSecondsPerMAC, cal.FlopSeconds, cal.BytesPerSecond)
	shared := plan.Machine{SharedCores: o.cores}
	wo := workloadOptions{dataset: o.dataset, model: string(plan.GCN), layers: 2, heads: 1}
	var runs []plan.Run
	for _, r := range calibrationRuns {
		if r.calls && o.lambdaEndpoints == "" {
			continue
		}
		wo.dataset, wo.hidden = cmp.Or(r.dataset, o.dataset), r.hidden
		w, err := wo.workload([]int{r.graphServers})
		if err != nil {
			return err
		}
		c := plan.Config{Backend: plan.CPU, GraphServers: r.graphServers, Intervals: r.intervals, Staleness: calibrationStaleness}
		var lambda string // the emulators of a lambda run
		if r.calls {
			c.Backend, c.Concurrency, c.MemoryMB = plan.Lambda, r.intervals, defaultLambdaMemoryMB
			lambda = strings.Join(strings.Split(o.lambdaEndpoints, ",")[:r.graphServers*r.intervals], ",")
		}
		t, err := medianEpoch(ctx, exe, o, wo.dataset, r.hidden, c, lambda)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "%s %s hidden %d: median epoch %.1f ms\n", wo.dataset, c, r.hidden, 1e3*t)
		runs = append(runs, plan.Run{Workload: w, Config: c, Machine: shared, EpochSeconds: t})
	}
	if cal, err = plan.Fit(cal, runs); err != nil {
		return err
	}
	for _, r := range runs {
		p, err := plan.Predict(r.Workload, r.Config, r.Machine, cal)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "fit: %s: %.1f ms measured, %.1f ms fitted (%s)\n", r.Config, 1e3*r.EpochSeconds, 1e3*p.EpochSeconds, bound(p))
	}
	if o.output == "" {
		return cal.Write(os.Stdout)
	}
	f, err := os.Create(o.output)
	if err != nil {
		return err
	}
	if err := cal.Write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// medianEpoch trains a GCN of the given hidden width on dataset in configuration c o.rounds
// times, as dorylus train --graph-servers does with its defaults otherwise (the same run
// config, launched by runtime/launcher), and returns the median of the runs' median epoch
// times. With lambda (comma-separated aws-lambda-rie emulators, which serve one call at a
// time and check no credentials) the servers call them for every task.
func medianEpoch(ctx context.Context, exe string, o calibrateOptions, dataset string, hidden int, c plan.Config, lambda string) (float64, error) {
	var to trainOptions
	d := addTrainFlags(pflag.NewFlagSet("train", pflag.ContinueOnError), &to) // dorylus train's defaults
	to.hidden, to.epochs, to.evalEvery = hidden, o.epochs, 1_000_000
	d.graphServers, d.intervals, d.staleness, d.updateEvery = c.GraphServers, c.Intervals, c.Staleness, c.UpdateEvery
	if lambda != "" {
		b := &d.backend
		b.Kind, b.LambdaFunction, b.LambdaRegion, b.PerEndpoint, b.LambdaEndpoints = jobconfig.BackendLambda, "function", "us-east-1", 1, lambda
		b.Placement = jobconfig.PlacementRemote // every task a call: the runs measure the calls (c's placement)
	}
	ds, err := source.Parse(dataset)
	if err != nil {
		return 0, err
	}
	local, err := source.Fetch(ctx, ds, source.Options{})
	if err != nil {
		return 0, err
	}
	work, err := launcher.WorkDir("calibrate")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(work)
	dir, _, err := partition.ForServers(ctx, local, work, c.GraphServers)
	if err != nil {
		return 0, err
	}
	var times []float64
	for range o.rounds {
		epochs, err := epochSeconds(ctx, exe, work, to, *d, dir)
		if err != nil {
			return 0, fmt.Errorf("%s %s hidden %d: %w", dataset, c, hidden, err)
		}
		times = append(times, stats.Median(epochs))
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// epochSeconds trains o on d's servers on the partitions in dir and returns the seconds of
// every epoch.
func epochSeconds(ctx context.Context, exe, work string, o trainOptions, d distOptions, dir string) ([]float64, error) {
	cfg, err := o.runConfig(&d, dir, o.seed)
	if err != nil {
		return nil, err
	}
	run, err := launcher.Launch(ctx, cfg, launcher.Options{Exe: exe, Work: work, Log: io.Discard})
	if err != nil {
		return nil, err
	}
	defer run.Stop()
	var times []float64
	for ev, err := range run.Events(ctx) {
		switch {
		case err != nil:
			return nil, err
		case ev.Event == graphserver.EventEpoch:
			times = append(times, ev.Seconds)
		case ev.Event == graphserver.EventResult:
			return times, nil
		}
	}
	return nil, errors.New("the servers' events ended before the result") // Events ends with an error
}

// kernelCosts measures, on one thread, the seconds of one multiply-add of the gather (SpMM of
// d's adjacency, all values 1, by a 16-column block), of one of the sparse features' products
// with a 16-column weight (X W and Xᵀ dP; the gather's when d's features are dense) and of one
// flop of a tall GEMM (4096×512 by 512×16), each the best of 5 timings.
func kernelCosts(d *graph.Dataset) (gather, feature, flop float64) {
	defer tensor.SetThreads(tensor.Threads())
	tensor.SetThreads(1)
	const width = 16
	adj := d.Adj
	a := &tensor.CSR{Rows: adj.Rows, Cols: adj.Cols, RowPtr: adj.RowPtr, ColIdx: adj.ColIdx, Val: make([]float32, adj.NNZ())}
	for i := range a.Val {
		a.Val[i] = 1
	}
	b, dst := randomDense(adj.Cols, width), tensor.NewDense(adj.Rows, width)
	gather = bestOf(5, func() { tensor.SpMM(dst, a, b) }) / float64(adj.NNZ()*width)
	feature = gather
	if x := d.Features.Sparse; x != nil {
		w, dW := randomDense(x.Cols, width), tensor.NewDense(x.Cols, width)
		p := tensor.NewDense(x.Rows, width)
		feature = bestOf(5, func() {
			tensor.SpMM(p, x, w)
			tensor.SpMMTransAdd(dW, x, p)
		}) / float64(2*x.NNZ()*width)
	}
	x, w, out := randomDense(4096, 512), randomDense(512, width), tensor.NewDense(4096, width)
	flop = bestOf(5, func() { tensor.MatMul(out, x, false, w, false, 1, 0) }) / (2 * 4096 * 512 * width)
	return gather, feature, flop
}

func randomDense(rows, cols int) *tensor.Dense {
	d := tensor.NewDense(rows, cols)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range d.Data {
		d.Data[i] = rng.Float32()
	}
	return d
}

// bestOf returns the shortest of n timings of f in seconds, each repeating f for at least
// 50 ms.
func bestOf(n int, f func()) float64 {
	best := 0.0
	for range n {
		reps, start := 0, time.Now()
		for time.Since(start) < 50*time.Millisecond {
			f()
			reps++
		}
		t := time.Since(start).Seconds() / float64(reps)
		if best == 0 || t < best {
			best = t
		}
	}
	return best
}

// loopbackRate returns the bytes per second of a 64 MiB TCP transfer over loopback.
func loopbackRate() (float64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	const size = 64 << 20
	done := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c)
		done <- err
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	start := time.Now()
	_, err = io.Copy(c, io.LimitReader(zeroReader{}, size))
	c.Close()
	if err == nil {
		err = <-done
	}
	if err != nil {
		return 0, fmt.Errorf("loopback transfer: %w", err)
	}
	return size / time.Since(start).Seconds(), nil
}

// zeroReader reads zeros.
type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
