package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/pkg/stats"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
	"github.com/dorylus-gnn/dorylus/runtime/launcher"
)

// distOptions are the flags of `dorylus train` that run it on separate server processes.
type distOptions struct {
	graphServers, paramServers int
	staleness                  jobconfig.Staleness
	intervals                  int
	updateEvery                jobconfig.UpdateEvery
	deadAfter                  time.Duration
	target                     float64
	backend                    backends.Options
	insecure                   bool   // plaintext gRPC, no function token (debugging)
	tlsDir                     string // the run's credentials (pkg/pki); empty: the launcher issues them, unless insecure
}

// addDistributedFlags registers the distributed flags of `dorylus train`.
func addDistributedFlags(f *pflag.FlagSet) *distOptions {
	d := &distOptions{staleness: jobconfig.MustParseStaleness(jobconfig.DefaultStaleness)}
	f.IntVar(&d.graphServers, "graph-servers", 0, "run on this many graph-server processes (0: everything in this process)")
	f.IntVar(&d.paramServers, "param-servers", 1, graphServersOnly+": parameter-server processes (weights sharded by layer)")
	f.Var(&d.staleness, "staleness", graphServersOnly+": sync, or the staleness bound S ≥ 0 of the asynchronous pipeline")
	f.IntVar(&d.intervals, "intervals", 4, graphServersOnly+": intervals per graph server")
	f.Var(&d.updateEvery, "update-every", graphServersOnly+", asynchronous: how many of a graph server's intervals sum their weight gradients into one update: epoch (all), interval (each its own, as the original Dorylus) or a number")
	f.IntVar(&d.backend.Workers, "workers", 0, graphServersOnly+": concurrent tensor tasks per graph server (0: one per interval and epoch in flight)")
	f.DurationVar(&d.backend.Latency, "inject-latency", 0, graphServersOnly+": latency added to every tensor task")
	f.DurationVar(&d.deadAfter, "dead-after", rpc.DefaultDeadAfter, graphServersOnly+": how long a server may fail its health checks before the run fails naming it")
	f.Float64Var(&d.target, "target-accuracy", 0, graphServersOnly+": stop once the validation accuracy reaches this fraction")
	f.BoolVar(&d.insecure, "insecure", false, graphServersOnly+", debugging only: plaintext gRPC between the servers instead of mutual TLS with a CA made for the run")
	f.StringVar(&d.tlsDir, "credentials-dir", "", graphServersOnly+": the run's credentials from this folder (`dorylus credentials DIR`) instead of a CA made for the run, so that an HTTPS function started before it (`dorylus function --credentials-dir DIR`) serves the run's certificate")
	d.backend.AddFlags(f)
	return d
}

func (d *distOptions) enabled() bool { return d.graphServers > 0 }

// graphServersOnly begins the usage of every flag of a run on graph servers.
const graphServersOnly = "with --graph-servers"

// validate checks the distributed flags of f, once, before anything runs: each in its range
// (jobconfig.Limits) and, without --graph-servers, none of them set, since the run in one
// process would ignore them (but --staleness sync, how it trains).
func (d *distOptions) validate(f *pflag.FlagSet) error {
	lim := jobconfig.Limits
	if err := zeroOr(lim.GraphServers, "--graph-servers", d.graphServers, "one process"); err != nil {
		return err
	}
	if !d.enabled() {
		var set []string
		f.Visit(func(fl *pflag.Flag) {
			if strings.HasPrefix(fl.Usage, graphServersOnly) && (fl.Name != "staleness" || d.staleness != jobconfig.Sync) {
				set = append(set, "--"+fl.Name+" "+fl.Value.String())
			}
		})
		if len(set) > 0 {
			verb := "needs"
			if len(set) > 1 {
				verb = "need"
			}
			return fmt.Errorf("%s %s --graph-servers: the run in one process is synchronous and has no servers, intervals or backend to set", strings.Join(set, ", "), verb)
		}
		return nil
	}
	if f.Changed("update-every") && d.staleness.Sync() {
		return fmt.Errorf("--update-every %v needs an asynchronous --staleness: synchronous training makes one update per epoch of every interval's gradients", d.updateEvery)
	}
	if d.tlsDir != "" {
		if d.insecure {
			return errors.New("--credentials-dir with --insecure: an insecure run uses no credentials")
		}
		if _, err := pki.Load(d.tlsDir); err != nil {
			return fmt.Errorf("--credentials-dir: %w", err)
		}
	}
	return errors.Join(lim.ParameterServers.Check("--param-servers", d.paramServers),
		lim.Intervals.Check("--intervals", d.intervals),
		lim.Staleness.Check("--staleness", d.staleness.Bound()),
		zeroOr(lim.Workers, "--workers", d.backend.Workers, "one per interval and epoch in flight"),
		jobconfig.CheckDuration("--inject-latency", d.backend.Latency, 0, jobconfig.MaxInjectLatency),
		jobconfig.CheckDuration("--dead-after", d.deadAfter, jobconfig.MinDeadAfter, jobconfig.MaxDeadAfter),
		checkFraction("--target-accuracy", d.target))
}

// checkFraction checks a flag that is a fraction in [0, 1].
func checkFraction(flag string, x float64) error {
	if x >= 0 && x <= 1 {
		return nil
	}
	return fmt.Errorf("%s %g: want a fraction in [0, 1]", flag, x)
}

// serverStats are what the launcher learns of its servers.
type serverStats struct {
	rss   map[string]int64 // peak RSS per server
	bytes []float64        // bytes between graph servers, per epoch
}

// runDistributed runs `dorylus train` on real graph-server and parameter-server processes on
// loopback and prints the same report as the single-process path.
func runDistributed(ctx context.Context, o trainOptions, d distOptions, stdout, stderr io.Writer) error {
	if err := d.backend.Validate(); err != nil {
		return err
	}
	if _, err := d.backend.ForGraphServer(0, d.graphServers); err != nil {
		return err
	}
	if d.backend.Kind == jobconfig.BackendKnative && d.backend.KnativeTokenFile == "" && !d.insecure {
		return fmt.Errorf("--backend knative: --knative-token-file is required (the token the function's --token-file holds), or --insecure for a function serving without one")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the dorylus binary: %w", err)
	}
	start := time.Now()
	local, err := source.Fetch(ctx, o.source, source.Options{}) // S3 settings from the SDK's environment
	if err != nil {
		return err
	}
	work, err := launcher.WorkDir("train")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	dir, m, err := partition.ForServers(ctx, local, work, d.graphServers)
	if err != nil {
		return err
	}
	if err := checkServersMemory(m, o, d); err != nil {
		return err
	}
	rep := trainReport{
		Dataset: m.Dataset, Model: o.model, Nodes: m.Nodes, Edges: m.Edges, Features: m.Features,
		Classes: m.Classes, Layers: o.layers, Hidden: o.hidden, Epochs: o.epochs, Patience: o.patience, Runs: o.runs,
		Threads: tensor.Threads(), LoadSeconds: time.Since(start).Seconds(),
	}
	if o.model == "gat" {
		rep.Heads = o.heads
	}
	fmt.Fprintf(stderr, "dataset %s: %d nodes, %d directed edges, %d features, %d classes; partitions in %s (%s): %v\n",
		m.Dataset, rep.Nodes, rep.Edges, rep.Features, rep.Classes, dir, m.Method, m.Quality)
	progress := newProgress(stderr, o.epochs*o.runs)
	var times []float64
	served := serverStats{rss: map[string]int64{}}
	var wall time.Duration
	var usage []backends.Usage
	var usageErr error // a graph server's usage file is missing: no cost estimate
	for r := range o.runs {
		seed := o.seed + uint64(r)
		t0 := time.Now()
		res, err := launchOnce(ctx, exe, dir, work, o, d, seed, progress, stderr, &served)
		if err != nil {
			progress.finish()
			return err
		}
		wall += time.Since(t0)
		if o.trace != "" && r == 0 {
			f, err := launcher.MergeTraces(work, d.graphServers)
			if err != nil {
				return err
			}
			if rep.Trace, err = finishTrace(o.trace, f, stderr); err != nil {
				return err
			}
		}
		u, err := launcher.ReadUsage(work, seed, d.graphServers)
		if err != nil && usageErr == nil {
			usageErr = err
		}
		usage = append(usage, u...)
		for _, c := range res.Curve {
			times = append(times, c.Seconds)
		}
		rep.PerRun = append(rep.PerRun, res)
	}
	progress.finish()
	rep.summarize(times)
	var names []string
	rep.PeakRSSByProcess = served.rss
	for name, rss := range served.rss {
		rep.PeakRSSBytes = max(rep.PeakRSSBytes, rss)
		names = append(names, fmt.Sprintf("%s %d MiB", name, rss>>20))
	}
	slices.Sort(names)
	fmt.Fprintf(stderr, "peak RSS: %s; bytes between graph servers per epoch: median %.0f\n", strings.Join(names, ", "), stats.Median(served.bytes))
	if usageErr == nil {
		rep.TensorTasks = backends.PlacedOf(usage)
		fmt.Fprintf(stderr, "tensor tasks: %s\n", rep.TensorTasks)
	}
	if usageErr != nil {
		fmt.Fprintf(stderr, "dorylus train: no cost estimate: %v\n", usageErr)
	} else if b, err := o.cost.distributed(wall, d, usage); err != nil {
		return err
	} else {
		reportCost(&rep, b, stderr)
	}
	return o.writeReport(rep, fmt.Sprintf(" on %d graph servers (%v)", d.graphServers, d.staleness), stdout)
}

// launchOnce trains one seed on the partitions in data: it launches the servers (pkg
// runtime/launcher) with work as the run's folder, follows graph server 0's progress, and
// stops every server, whatever happens.
func launchOnce(ctx context.Context, exe, data, work string, o trainOptions, d distOptions, seed uint64, p *progress, stderr io.Writer, stats *serverStats) (res runResult, err error) {
	cfg, err := o.runConfig(&d, data, seed)
	if err != nil {
		return res, err
	}
	run, err := launcher.Launch(ctx, cfg, launcher.Options{Exe: exe, Work: work, Trace: o.trace != "" && seed == o.seed, Log: stderr})
	if err != nil {
		return res, err
	}
	defer func() {
		for name, peak := range run.Stop() {
			stats.rss[name] = max(stats.rss[name], peak)
		}
	}()
	res.Seed = seed
	for ev, err := range run.Events(ctx) {
		if err != nil && ctx.Err() != nil && o.checkpoint.location != "" {
			return res, preempt(run, seed, o.checkpoint.location, stderr)
		}
		if err != nil {
			return res, err
		}
		switch ev.Event {
		case graphserver.EventEpoch:
			if len(res.Curve) == 0 {
				res.ResumedFrom = ev.Epoch - 1 // resumed from a checkpoint when > 0
			}
			val := math.NaN()
			if ev.ValAcc != nil {
				val = *ev.ValAcc
			}
			res.Curve = append(res.Curve, epochRecord{Epoch: ev.Epoch, Loss: ev.Loss, ValAcc: val, Seconds: ev.Seconds})
			res.FinalLoss = ev.Loss
			stats.bytes = append(stats.bytes, float64(ev.Bytes))
			p.epoch(seed, ev.Epoch, o.epochs, ev.Loss, val, ev.Seconds)
		case graphserver.EventResult:
			res.BestEpoch, res.EpochsRun = ev.Selected, ev.Epoch
			res.accuracies(ev)
			if o.outputs.location == "" || seed != o.seed {
				return res, nil
			}
		case graphserver.EventExported:
			res.accuracies(ev) // of the weights exported: the result's, or an inference's
			fmt.Fprintf(stderr, "wrote %d files to %s\n", ev.Files, o.outputs.location)
			return res, nil
		}
	}
	return res, errors.New("the servers' events ended before the result") // Events ends with an error
}

// preemptTimeout bounds how long a preempted launcher waits for its servers: their drain,
// their exit and the parameter servers' checkpoint.
const preemptTimeout = jobconfig.DefaultDrainTimeout + jobconfig.DrainExit + 30*time.Second

// preempt preempts run, whose checkpoints go to location, on the launcher's SIGTERM or
// SIGINT (graphserver.ErrPreempted) and returns the error that says how to resume.
func preempt(run *launcher.Run, seed uint64, location string, stderr io.Writer) error {
	fmt.Fprintf(stderr, "dorylus train: preempted (seed %d): the servers drain to an epoch boundary for a checkpoint (at most %v)\n", seed, preemptTimeout)
	start := time.Now()
	ev, ok := run.Preempt(preemptTimeout)
	if !ok {
		return fmt.Errorf("training preempted (seed %d): the servers did not drain within %v: run the same command with --resume to continue from the newest checkpoint in %s",
			seed, time.Since(start).Round(time.Millisecond), location)
	}
	return fmt.Errorf("training preempted (seed %d) after epoch %d, drained in %v: run the same command with --resume to continue from its checkpoint in %s",
		seed, ev.Epoch, time.Since(start).Round(time.Millisecond), location)
}

// accuracies sets the accuracies an event reports.
func (res *runResult) accuracies(ev graphserver.Event) {
	res.TestAcc, res.TrainAcc = ev.TestAcc, ev.TrainAcc
	if ev.ValAcc != nil {
		res.ValAcc = *ev.ValAcc
	}
}
