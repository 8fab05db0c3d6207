package jobconfig

import (
	"fmt"
	"time"
)

// Range is the closed interval [Min, Max] a whole-number setting must lie in.
type Range struct{ Min, Max int }

// Contains reports whether n lies in r.
func (r Range) Contains(n int) bool { return n >= r.Min && n <= r.Max }

// Check returns nil when n lies in r, else an error naming the setting (a flag: "--hidden") and
// the range: "--hidden 2000000: want 1 to 65536".
func (r Range) Check(name string, n int) error {
	if r.Contains(n) {
		return nil
	}
	return fmt.Errorf("%s %d: want %d to %d", name, n, r.Min, r.Max)
}

// String writes r as "[Min, Max]".
func (r Range) String() string { return fmt.Sprintf("[%d, %d]", r.Min, r.Max) }

// Limits are the ranges of the whole-number settings of a run, the same wherever a run is
// configured: a GNNTrainingJob's field (its CRD's minimum and maximum, which a test compares
// with these), the dorylus flag that sets it, and the run config's field (Validate). A setting
// whose run-config field takes 0 for "the default" is 0 or in its range there.
var Limits = struct {
	// Layers: spec.model.layers, --layers, model.layers.
	Layers Range
	// Hidden: spec.model.hidden, --hidden, model.hidden.
	Hidden Range
	// Heads: spec.model.heads, --heads, model.heads (GAT).
	Heads Range
	// Epochs: spec.training.epochs, --epochs, training.epochs; --eval-every, --patience and
	// --keep are at most its maximum too.
	Epochs Range
	// Staleness: the bound S of spec.training.staleness, --staleness and training.staleness.
	Staleness Range
	// Intervals: spec.training.intervals, --intervals, training.intervals (0: the backend's
	// concurrency).
	Intervals Range
	// UpdateEvery: the number of intervals of spec.training.updateEvery, --update-every and
	// training.updateEvery (UpdateEvery; "epoch" and "interval" besides).
	UpdateEvery Range
	// GraphServers: spec.graphServers.replicas, --graph-servers (0: one process),
	// graphServers.replicas.
	GraphServers Range
	// ParameterServers: spec.parameterServers.replicas, --param-servers,
	// parameterServers.replicas.
	ParameterServers Range
	// Workers: spec.tensorBackend.cpu.workers, --workers, backend.cpu.workers (0: one per
	// interval and epoch in flight).
	Workers Range
	// LambdaMemoryMB: spec.tensorBackend.lambda.memoryMB, --lambda-memory-mb,
	// backend.lambda.memoryMB.
	LambdaMemoryMB Range
	// Concurrency: spec.tensorBackend.lambda.maxConcurrency and knative.maxConcurrency,
	// --max-concurrency (0: the intervals) and --endpoint-concurrency (0: any), and the run
	// config's fields of both.
	Concurrency Range
	// CheckpointInterval: spec.checkpoint.intervalEpochs, --checkpoint-every,
	// checkpoint.intervalEpochs.
	CheckpointInterval Range
	// Threads: --threads of dorylus train and predict (0: GOMAXPROCS).
	Threads Range
	// Runs: --runs of dorylus train.
	Runs Range
}{
	Layers:             Range{1, 16},
	Hidden:             Range{1, 65536},
	Heads:              Range{1, 64},
	Epochs:             Range{1, 1_000_000},
	Staleness:          Range{0, MaxStaleness},
	Intervals:          Range{1, 65536},
	UpdateEvery:        Range{1, 65536},
	GraphServers:       Range{1, 256},
	ParameterServers:   Range{1, 32},
	Workers:            Range{1, 1024},
	LambdaMemoryMB:     Range{128, 10240},
	Concurrency:        Range{1, 10000},
	CheckpointInterval: Range{1, 100_000},
	Threads:            Range{1, 1024},
	Runs:               Range{1, 1000},
}

// Limits of the durations: a run config's field of each is 0 (its default) or in (0, max];
// the flags that set them are too, --dead-after at least MinDeadAfter.
const (
	// MinDeadAfter is the least --dead-after: two health checks (rpc.CheckEvery) apart.
	MinDeadAfter = time.Second
	// MaxDeadAfter bounds graphServers.deadAfter and --dead-after.
	MaxDeadAfter = time.Hour
	// MaxInjectLatency bounds backend.cpu.injectLatency and --inject-latency.
	MaxInjectLatency = time.Minute
	// MaxCallTimeout bounds a remote backend's calls.timeout and calls.stragglerFloor, and
	// --call-timeout and --straggler-floor.
	MaxCallTimeout = time.Hour
)

// CheckDuration returns nil when d lies in [lo, hi], else an error naming the setting and the
// range: "--dead-after 0s: want 1s to 1h0m0s".
func CheckDuration(name string, d, lo, hi time.Duration) error {
	if d >= lo && d <= hi {
		return nil
	}
	return fmt.Errorf("%s %v: want %v to %v", name, d, lo, hi)
}

// inRange checks a field against r.
func (v *validator) inRange(field string, n int, r Range) {
	v.check(r.Contains(n), field, "must be in %v, got %d", r, n)
}

// zeroOrInRange checks a field whose 0 means its default against r.
func (v *validator) zeroOrInRange(field string, n int, r Range, zero string) {
	v.check(n == 0 || r.Contains(n), field, "must be 0 (%s) or in %v, got %d", zero, r, n)
}

// duration checks a duration field whose 0 means its default against (0, hi].
func (v *validator) duration(field string, d Duration, hi time.Duration) {
	v.check(d >= 0 && time.Duration(d) <= hi, field, "must be 0 (the default) or in (0, %v], got %v", hi, d)
}
