package pipeline

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

func mustNew(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run starts and finishes t, failing the test if either is refused.
func run(t *testing.T, s *Scheduler, task Task) Started {
	t.Helper()
	got, err := s.Start(task)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Done(task); err != nil {
		t.Fatal(err)
	}
	return got
}

// runUntil runs interval id's tasks in order up to (not including) the task named stop at epoch
// e, or to the end of epoch e when stop is nil.
func runUntil(t *testing.T, s *Scheduler, id IntervalID, e int, stop *Step) {
	t.Helper()
	for {
		next, ok := s.Next(id)
		if !ok || next.Epoch > e || (stop != nil && next.Epoch == e && next.Kind == stop.Kind && next.Layer == stop.Layer) {
			return
		}
		run(t, s, next)
	}
}

func task(p, i, e int, k Kind, l int) Task {
	return Task{Partition: p, Interval: i, Epoch: e, Layer: l, Kind: k}
}

// selfOnly makes every interval read only its own rows, so intervals progress independently
// except for the epoch gate.
func selfOnly(p, n int) map[IntervalID][]IntervalID {
	m := map[IntervalID][]IntervalID{}
	for q := 0; q < p; q++ {
		for i := 0; i < n; i++ {
			m[IntervalID{q, i}] = []IntervalID{{q, i}}
		}
	}
	return m
}

func TestSequence(t *testing.T) {
	var names []string
	for _, st := range Sequence(2) {
		names = append(names, st.String())
	}
	want := "AV_0 SC_0 GA_0 AV_1 SC_1 GA_1 AV_2 ∇GA_1 ∇SC_1 ∇AV_1 ∇GA_0 ∇SC_0 ∇AV_0 WU"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("Sequence(2) = %s\nwant          %s", got, want)
	}
	if Sequence(0) != nil {
		t.Error("Sequence(0) not nil")
	}
	for L := 1; L <= 5; L++ {
		seq := Sequence(L)
		if len(seq) != 6*L+2 {
			t.Errorf("len(Sequence(%d)) = %d", L, len(seq))
		}
		for i, st := range seq {
			if got := stepIndex(st.Kind, st.Layer, L); got != i {
				t.Errorf("L=%d: stepIndex(%v) = %d, want %d", L, st, got, i)
			}
		}
	}
	if got := task(1, 2, 3, KindBackAV, 0).String(); got != "p1/i2 e3 ∇AV_0" {
		t.Errorf("Task.String() = %q", got)
	}
	if got := task(1, 2, 3, KindWU, 0).String(); got != "p1/i2 e3 WU" {
		t.Errorf("Task.String() = %q", got)
	}
	if !KindAV.IsTensor() || !KindBackAV.IsTensor() || KindGA.IsTensor() || KindWU.IsTensor() {
		t.Error("IsTensor wrong")
	}
}

func TestConfigErrors(t *testing.T) {
	ok := Config{Partitions: 2, Intervals: 2, Layers: 2, Epochs: 3, Staleness: jobconfig.Bounded(1)}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"partitions", func(c *Config) { c.Partitions = 0 }, "partitions 0"},
		{"intervals", func(c *Config) { c.Intervals = 0 }, "intervals 0 per partition"},
		{"intervals of length", func(c *Config) { c.IntervalsOf = []int{1} }, "IntervalsOf has 1 entries for 2 partitions"},
		{"intervals of value", func(c *Config) { c.IntervalsOf = []int{1, 0} }, "partition 1 has 0 intervals"},
		{"layers", func(c *Config) { c.Layers = 0 }, "layers 0"},
		{"epochs", func(c *Config) { c.Epochs = 0 }, "epochs 0"},
		{"drain", func(c *Config) { c.DrainEvery = -1 }, "drain every -1 epochs"},
		{"flow", func(c *Config) { c.Gradients = 7 }, "unknown gradient flow"},
		{"reads key", func(c *Config) { c.Reads = map[IntervalID][]IntervalID{{2, 0}: nil} }, "Reads has interval p2/i0"},
		{"reads value", func(c *Config) { c.Reads = map[IntervalID][]IntervalID{{1, 1}: {{0, 5}}} }, "Reads[p1/i1] has interval p0/i5"},
		{"local range", func(c *Config) { c.Local = []int{2} }, "local partition 2"},
		{"local twice", func(c *Config) { c.Local = []int{1, 1} }, "local partition 1 listed twice"},
	} {
		c := ok
		tc.edit(&c)
		_, err := New(c)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New() error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := New(ok); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
	c := ok
	c.IntervalsOf = []int{3, 1}
	c.Intervals = 0
	c.Local = []int{}
	if _, err := New(c); err != nil {
		t.Errorf("valid config refused: %v", err)
	}
}

// With S = 1 an interval may run one epoch ahead of the slowest, and no further.
func TestStalenessOneRunsOneEpochAhead(t *testing.T) {
	s := mustNew(t, Config{Partitions: 1, Intervals: 2, Layers: 1, Epochs: 4, Staleness: jobconfig.Bounded(1), Reads: selfOnly(1, 2)})
	i0, i1 := IntervalID{0, 0}, IntervalID{0, 1}
	runUntil(t, s, i0, 0, nil)
	runUntil(t, s, i0, 1, nil) // epoch 1 while i1 has not started epoch 0
	if got := s.Progress(); !slices.Equal(got[0], []int{2, 0}) {
		t.Fatalf("Progress() = %v", got)
	}
	if got := s.Ready(); !slices.Equal(got, []Task{task(0, 1, 0, KindAV, 0)}) {
		t.Fatalf("Ready() = %v, want only i1's AV_0", got)
	}
	_, err := s.Start(task(0, 0, 2, KindAV, 0))
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "epoch gate") {
		t.Fatalf("start of epoch 2 two epochs ahead: %v", err)
	}
	runUntil(t, s, i1, 0, nil)
	if got := s.LowestUnfinished(); got != 1 {
		t.Fatalf("LowestUnfinished() = %d", got)
	}
	if got := s.Ready(); !slices.Equal(got, []Task{task(0, 1, 1, KindAV, 0), task(0, 0, 2, KindAV, 0)}) {
		t.Fatalf("Ready() = %v, want i1 e1 then i0 e2 (by epoch)", got)
	}
}

// With S = 0 no interval starts epoch e + 1 before every interval finished epoch e.
func TestStalenessZeroIsAnEpochBarrier(t *testing.T) {
	s := mustNew(t, Config{Partitions: 2, Intervals: 1, Layers: 2, Epochs: 3, Reads: selfOnly(2, 1)})
	a, b := IntervalID{0, 0}, IntervalID{1, 0}
	runUntil(t, s, a, 0, nil)
	if _, err := s.Start(task(0, 0, 1, KindAV, 0)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("epoch 1 started before p1 finished epoch 0: %v", err)
	}
	runUntil(t, s, b, 0, &Step{KindWU, 0})
	if got := s.Ready(); !slices.Equal(got, []Task{task(1, 0, 0, KindWU, 0)}) {
		t.Fatalf("Ready() = %v", got)
	}
	run(t, s, task(1, 0, 0, KindWU, 0))
	if got := s.Ready(); !slices.Equal(got, []Task{task(0, 0, 1, KindAV, 0), task(1, 0, 1, KindAV, 0)}) {
		t.Fatalf("Ready() = %v", got)
	}
}

// With S = 1 and a drain every 2 epochs, an interval runs ahead into epoch 1 but not into
// epoch 2 until every interval has finished epoch 1; past the drain it runs ahead again.
func TestDrainEmptiesThePipeline(t *testing.T) {
	s := mustNew(t, Config{Partitions: 1, Intervals: 2, Layers: 1, Epochs: 4, Staleness: jobconfig.Bounded(1), DrainEvery: 2,
		Reads: selfOnly(1, 2), TailOverlap: true})
	i0, i1 := IntervalID{0, 0}, IntervalID{0, 1}
	runUntil(t, s, i0, 1, nil) // epoch 1 while i1 has not started epoch 0: no drain before it
	runUntil(t, s, i1, 0, nil)
	if got := s.LowestUnfinished(); got != 1 {
		t.Fatalf("LowestUnfinished() = %d, want 1", got)
	}
	_, err := s.Start(task(0, 0, 2, KindAV, 0))
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "drain") {
		t.Fatalf("start of epoch 2 before i1 finished epoch 1: %v, want a drain wait", err)
	}
	if got := s.Blocked(0, 0); got != WaitGate {
		t.Errorf("Blocked(i0) = %v, want WaitGate", got)
	}
	runUntil(t, s, i1, 1, &Step{KindWU, 0})
	if got := s.Ready(); !slices.Equal(got, []Task{task(0, 1, 1, KindWU, 0)}) {
		t.Fatalf("Ready() = %v, want only i1's WU of epoch 1 (the drain holds epoch 2)", got)
	}
	run(t, s, task(0, 1, 1, KindWU, 0))
	runUntil(t, s, i0, 3, nil) // epochs 2 and 3 while i1 has not started epoch 2
	if got := s.Progress(); !slices.Equal(got[0], []int{4, 2}) {
		t.Fatalf("Progress() = %v, want i0 done, i1 at epoch 2", got)
	}
}

// GA reads the freshest rows present, which may be S + 1 epochs old but no older; the
// backward pass reads gradient contributions the same way.
func TestAsyncReadsFreshestRows(t *testing.T) {
	s := mustNew(t, Config{Partitions: 1, Intervals: 2, Layers: 1, Epochs: 4, Staleness: jobconfig.Bounded(1)})
	i0, i1 := IntervalID{0, 0}, IntervalID{0, 1}
	// Epoch 0 in lockstep: GA_0 of each needs the other's SC_0.
	runUntil(t, s, i0, 0, &Step{KindGA, 0})
	runUntil(t, s, i1, 0, &Step{KindGA, 0})
	ga := run(t, s, task(0, 0, 0, KindGA, 0))
	if want := []Read{{i0, 0}, {i1, 0}}; !slices.Equal(ga.Reads, want) {
		t.Fatalf("GA e0 reads %v, want %v", ga.Reads, want)
	}
	runUntil(t, s, i0, 0, &Step{KindBackAV, 0}) // ∇AV_0 waits for i1's ∇SC_0
	if _, err := s.Start(task(0, 0, 0, KindBackAV, 0)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("∇AV_0 before any contribution of i1: %v", err)
	}
	runUntil(t, s, i1, 0, nil)
	runUntil(t, s, i0, 0, nil)
	// i0 races through epochs 1 and 2 while i1 stays at the start of epoch 1.
	ga = run(t, s, func() Task { runUntil(t, s, i0, 1, &Step{KindGA, 0}); return task(0, 0, 1, KindGA, 0) }())
	if want := []Read{{i0, 1}, {i1, 0}}; !slices.Equal(ga.Reads, want) {
		t.Fatalf("GA e1 reads %v, want %v", ga.Reads, want)
	}
	runUntil(t, s, i0, 1, &Step{KindBackAV, 0})
	bav := run(t, s, task(0, 0, 1, KindBackAV, 0))
	if want := []Read{{i0, 1}, {i1, 0}}; !slices.Equal(bav.Reads, want) {
		t.Fatalf("∇AV e1 reads %v, want %v", bav.Reads, want)
	}
	runUntil(t, s, i0, 1, nil)
	runUntil(t, s, i0, 2, &Step{KindGA, 0})
	ga = run(t, s, task(0, 0, 2, KindGA, 0))
	if want := []Read{{i0, 2}, {i1, 0}}; !slices.Equal(ga.Reads, want) {
		t.Fatalf("GA e2 reads %v, want %v (age 2 = S+1)", ga.Reads, want)
	}
	runUntil(t, s, i0, 2, nil)
	if _, err := s.Start(task(0, 0, 3, KindAV, 0)); !errors.Is(err, ErrNotReady) {
		t.Fatalf("epoch 3 with i1 at epoch 1: %v", err)
	}
}

// An interval's backward pass uses the version its AV_0 pinned, while other intervals' updates
// move the newest version on; PinnedVersions lists exactly the versions in use.
func TestWeightStashing(t *testing.T) {
	s := mustNew(t, Config{Partitions: 1, Intervals: 2, Layers: 2, Epochs: 3, Staleness: jobconfig.Bounded(1), Reads: selfOnly(1, 2)})
	i0, i1 := IntervalID{0, 0}, IntervalID{0, 1}
	if got := run(t, s, task(0, 0, 0, KindAV, 0)); got.Weights != 0 {
		t.Fatalf("AV_0 pinned %d", got.Weights)
	}
	runUntil(t, s, i1, 0, nil)
	if s.WeightVersion() != 1 {
		t.Fatalf("WeightVersion() = %d after one WU", s.WeightVersion())
	}
	if got := s.PinnedVersions(); !slices.Equal(got, []int{0}) {
		t.Fatalf("PinnedVersions() = %v, want [0]", got)
	}
	if got := run(t, s, task(0, 1, 1, KindAV, 0)); got.Weights != 1 {
		t.Fatalf("i1's epoch-1 AV_0 pinned %d, want 1", got.Weights)
	}
	if got := s.PinnedVersions(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("PinnedVersions() = %v, want [0 1]", got)
	}
	for {
		next, _ := s.Next(i0)
		if next.Epoch > 0 {
			break
		}
		got := run(t, s, next)
		switch {
		case usesWeights(next, 2) && got.Weights != 0:
			t.Fatalf("%v uses version %d, want the pinned 0", next, got.Weights)
		case !usesWeights(next, 2) && got.Weights != NoWeights:
			t.Fatalf("%v uses version %d, want none", next, got.Weights)
		}
	}
	if s.WeightVersion() != 2 {
		t.Fatalf("WeightVersion() = %d after two WUs", s.WeightVersion())
	}
	if got := s.PinnedVersions(); !slices.Equal(got, []int{1}) {
		t.Fatalf("PinnedVersions() = %v, want [1]", got)
	}
}

// Synchronous mode's schedule is full-graph training: every reading task sees rows of its own
// epoch produced by every interval, epochs do not overlap, and epoch e uses version e.
func TestSyncIsFullGraphTraining(t *testing.T) {
	for _, flow := range []GradientFlow{PushGradients, PullGradients} {
		for seed := uint64(0); seed < 50; seed++ {
			cfg := Config{Partitions: 2, Intervals: 3, Layers: 2, Epochs: 3, Staleness: jobconfig.Sync, Gradients: flow}
			if err := checkFullGraph(cfg, seed); err != nil {
				t.Fatalf("%v seed %d: %v", flow, seed, err)
			}
		}
	}
}

func checkFullGraph(cfg Config, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 3))
	s, err := New(cfg)
	if err != nil {
		return err
	}
	n := cfg.Partitions * cfg.Intervals
	type key struct {
		kind  Kind
		layer int
		epoch int
	}
	done := map[key]int{} // how many intervals finished this step
	var running []Task
	for !s.Finished() {
		ready := s.Ready()
		if len(ready) > 0 && (len(running) == 0 || rng.IntN(2) == 0) {
			t := ready[rng.IntN(len(ready))]
			got, err := s.Start(t)
			if err != nil {
				return err
			}
			// Everything of the previous epoch is done everywhere.
			if t.Epoch > 0 && done[key{KindWU, 0, t.Epoch - 1}] != n {
				return fmt.Errorf("%v starts before epoch %d finished everywhere", t, t.Epoch-1)
			}
			var producer key
			switch {
			case t.Kind == KindGA:
				producer = key{KindSC, t.Layer, t.Epoch}
			case t.Kind == KindBackAV && flow(cfg) == PushGradients:
				producer = key{KindBackSC, t.Layer, t.Epoch}
			case t.Kind == KindBackGA && flow(cfg) == PullGradients && t.Layer == cfg.Layers-1:
				producer = key{KindAV, cfg.Layers, t.Epoch}
			case t.Kind == KindBackGA && flow(cfg) == PullGradients:
				producer = key{KindBackAV, t.Layer + 1, t.Epoch}
			default:
				producer.epoch = -1
			}
			if producer.epoch >= 0 {
				if done[producer] != n {
					return fmt.Errorf("%v starts with %d of %d intervals past %v_%d", t, done[producer], n, producer.kind, producer.layer)
				}
				if len(got.Reads) != n {
					return fmt.Errorf("%v reads %d intervals", t, len(got.Reads))
				}
				for _, r := range got.Reads {
					if r.Epoch != t.Epoch {
						return fmt.Errorf("%v reads epoch %d of %v", t, r.Epoch, r.From)
					}
				}
			}
			if got.Weights != NoWeights && got.Weights != t.Epoch {
				return fmt.Errorf("%v uses weight version %d", t, got.Weights)
			}
			running = append(running, t)
			continue
		}
		if len(running) == 0 {
			return fmt.Errorf("deadlock: %v", s.Progress())
		}
		i := rng.IntN(len(running))
		t := running[i]
		running = slices.Delete(running, i, i+1)
		if err := s.Done(t); err != nil {
			return err
		}
		done[key{t.Kind, t.Layer, t.Epoch}]++
	}
	if s.WeightVersion() != cfg.Epochs {
		return fmt.Errorf("WeightVersion() = %d after %d epochs", s.WeightVersion(), cfg.Epochs)
	}
	return nil
}

func flow(c Config) GradientFlow { return c.Gradients }

func TestErrors(t *testing.T) {
	s := mustNew(t, Config{Partitions: 2, Intervals: 1, Layers: 1, Epochs: 2, Local: []int{0}})
	av := task(0, 0, 0, KindAV, 0)
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"done before start", s.Done(av), ErrNotStarted},
		{"start ahead", func() error { _, err := s.Start(task(0, 0, 0, KindSC, 0)); return err }(), ErrNotReady},
		{"start remote", func() error { _, err := s.Start(task(1, 0, 0, KindAV, 0)); return err }(), ErrNotLocal},
		{"done remote", s.Done(task(1, 0, 0, KindAV, 0)), ErrNotLocal},
		{"observe local", s.Observe(av), ErrLocal},
		{"bad layer", s.Done(task(0, 0, 0, KindSC, 1)), ErrInvalidTask},
		{"bad epoch", s.Done(task(0, 0, 2, KindAV, 0)), ErrInvalidTask},
		{"counted versions", s.SetWeightVersion(3), ErrVersion},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if _, err := s.Start(av); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(av); !errors.Is(err, ErrAlreadyStarted) {
		t.Errorf("second start: %v", err)
	}
	if got := s.Running(); !slices.Equal(got, []Task{av}) {
		t.Errorf("Running() = %v", got)
	}
	if err := s.Done(av); err != nil {
		t.Fatal(err)
	}
	if err := s.Done(av); !errors.Is(err, ErrAlreadyDone) {
		t.Errorf("second done: %v", err)
	}
	if _, err := s.Start(av); !errors.Is(err, ErrAlreadyDone) {
		t.Errorf("start after done: %v", err)
	}
	// GA_0 waits for the remote interval's SC_0.
	run(t, s, task(0, 0, 0, KindSC, 0))
	_, err := s.Start(task(0, 0, 0, KindGA, 0))
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "no rows yet") {
		t.Errorf("GA before the remote rows: %v", err)
	}
	if err := s.Observe(task(1, 0, 0, KindSC, 0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Observe(task(1, 0, 0, KindAV, 0)); err != nil {
		t.Errorf("late, older observation: %v", err)
	}
	got := run(t, s, task(0, 0, 0, KindGA, 0))
	if want := []Read{{IntervalID{0, 0}, 0}, {IntervalID{1, 0}, 0}}; !slices.Equal(got.Reads, want) {
		t.Errorf("GA reads %v, want %v", got.Reads, want)
	}
	if err := s.StopAfter(-1); err == nil {
		t.Error("StopAfter(-1) accepted")
	}
	e := mustNew(t, Config{Partitions: 1, Intervals: 1, Layers: 1, Epochs: 1, ExternalVersions: true})
	if err := e.SetWeightVersion(-1); !errors.Is(err, ErrVersion) {
		t.Errorf("negative version: %v", err)
	}
	if err := e.SetWeightVersion(5); err != nil || e.WeightVersion() != 5 {
		t.Errorf("SetWeightVersion(5): %v, version %d", err, e.WeightVersion())
	}
	if err := e.SetWeightVersion(4); err != nil || e.WeightVersion() != 5 {
		t.Errorf("an older version report moved the version: %v, %d", err, e.WeightVersion())
	}
}

// StopAfter ends the run after an epoch even when some intervals have gone past it.
func TestStopAfter(t *testing.T) {
	s := mustNew(t, Config{Partitions: 1, Intervals: 2, Layers: 1, Epochs: 5, Staleness: jobconfig.Bounded(2), Reads: selfOnly(1, 2)})
	i0, i1 := IntervalID{0, 0}, IntervalID{0, 1}
	runUntil(t, s, i0, 1, nil)
	ga := task(0, 0, 2, KindGA, 0)
	runUntil(t, s, i0, 2, &Step{KindGA, 0})
	if _, err := s.Start(ga); err != nil {
		t.Fatal(err)
	}
	if err := s.StopAfter(1); err != nil {
		t.Fatal(err)
	}
	if s.LastEpoch() != 1 {
		t.Fatalf("LastEpoch() = %d", s.LastEpoch())
	}
	if got := s.PinnedVersions(); !slices.Equal(got, []int{2}) {
		t.Fatalf("PinnedVersions() = %v while epoch 2 still runs", got)
	}
	if err := s.Done(ga); err != nil {
		t.Fatalf("a task running past the stop: %v", err)
	}
	if got := s.PinnedVersions(); len(got) != 0 {
		t.Fatalf("PinnedVersions() = %v after the stop", got)
	}
	if s.Finished() || s.LocalFinished() {
		t.Fatal("finished with i1 at epoch 0")
	}
	if _, ok := s.Next(i0); ok {
		t.Fatal("i0 has a next task after the stop")
	}
	runUntil(t, s, i1, 1, nil)
	if len(s.Ready()) != 0 || !s.Finished() || !s.LocalFinished() {
		t.Fatalf("not finished: Ready %v, progress %v", s.Ready(), s.Progress())
	}
	if err := s.StopAfter(3); err != nil || s.LastEpoch() != 1 {
		t.Fatalf("StopAfter moved the end later: %v %d", err, s.LastEpoch())
	}
}

// A coordinator runs no partition and follows the epoch gate from progress reports.
func TestCoordinator(t *testing.T) {
	s := mustNew(t, Config{Partitions: 2, Intervals: 2, Layers: 2, Epochs: 2, Staleness: jobconfig.Bounded(1), Local: []int{}})
	if len(s.Ready()) != 0 || s.Finished() {
		t.Fatal("coordinator has work or is finished")
	}
	for p := 0; p < 2; p++ {
		for i := 0; i < 2; i++ {
			if err := s.Observe(task(p, i, 0, KindWU, 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.LowestUnfinished() != 1 || s.WeightVersion() != 4 {
		t.Fatalf("LowestUnfinished() = %d, WeightVersion() = %d", s.LowestUnfinished(), s.WeightVersion())
	}
	for p := 0; p < 2; p++ {
		for i := 0; i < 2; i++ {
			if err := s.Observe(task(p, i, 1, KindWU, 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !s.Finished() || !s.LocalFinished() {
		t.Fatalf("not finished: %v", s.Progress())
	}
}

// With external versions, synchronous mode waits for the caller to report the update.
func TestSyncExternalVersions(t *testing.T) {
	s := mustNew(t, Config{Partitions: 1, Intervals: 2, Layers: 1, Epochs: 2, Staleness: jobconfig.Sync, ExternalVersions: true})
	for _, st := range Sequence(1) {
		for i := 0; i < 2; i++ {
			run(t, s, task(0, i, 0, st.Kind, st.Layer))
		}
	}
	_, err := s.Start(task(0, 0, 1, KindAV, 0))
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "not updated") {
		t.Fatalf("epoch 1 before the update: %v", err)
	}
	if err := s.SetWeightVersion(7); err != nil {
		t.Fatal(err)
	}
	if got := run(t, s, task(0, 0, 1, KindAV, 0)); got.Weights != 7 {
		t.Fatalf("pinned %d, want 7", got.Weights)
	}
}

// TestTailOverlap follows one interval with TailOverlap: once the loss of epoch 0 is done, the
// backward pass and WU of epoch 0 run beside epoch 1's forward pass with epoch 0's weights, the
// forward pass of epoch 2 waits until epoch 0 is finished, and the option changes nothing with
// S = 0.
func TestTailOverlap(t *testing.T) {
	i0 := IntervalID{0, 0}
	seq := Sequence(1) // AV_0 SC_0 GA_0 AV_1 | ∇GA_0 ∇SC_0 ∇AV_0 WU
	for _, stale := range []int{0, 1} {
		s := mustNew(t, Config{Partitions: 1, Intervals: 1, Layers: 1, Epochs: 4, Staleness: jobconfig.Bounded(stale), TailOverlap: true})
		runUntil(t, s, i0, 0, &Step{KindBackGA, 0})
		want := []Task{task(0, 0, 0, KindBackGA, 0)}
		if stale == 1 {
			want = append(want, task(0, 0, 1, KindAV, 0))
		}
		if got := s.Ready(); !slices.Equal(got, want) {
			t.Fatalf("S=%d: Ready() = %v, want %v", stale, got, want)
		}
		if stale == 0 {
			continue
		}
		tail, err := s.Start(task(0, 0, 0, KindBackGA, 0))
		if err != nil {
			t.Fatal(err)
		}
		// Epoch 1's forward pass runs while the tail of epoch 0 is running; version 0 stays the
		// newest, so both epochs pin it.
		for _, st := range seq[:4] {
			run(t, s, task(0, 0, 1, st.Kind, st.Layer))
		}
		if got := s.Ready(); len(got) != 0 {
			t.Fatalf("head waiting for the tail: Ready() = %v, want nothing", got)
		}
		if got := s.Running(); !slices.Equal(got, []Task{tail.Task}) {
			t.Fatalf("Running() = %v", got)
		}
		if s.LowestUnfinished() != 0 || !slices.Equal(s.PinnedVersions(), []int{0}) {
			t.Fatalf("lowest unfinished %d, pinned %v", s.LowestUnfinished(), s.PinnedVersions())
		}
		if err := s.Done(tail.Task); err != nil {
			t.Fatal(err)
		}
		for _, st := range seq[5:] {
			if got := run(t, s, task(0, 0, 0, st.Kind, st.Layer)); st.Kind != KindSC && st.Kind != KindBackSC && got.Weights != 0 && got.Weights != NoWeights {
				t.Fatalf("%v of epoch 0 uses version %d, want 0", st, got.Weights)
			}
		}
		// Epoch 0 is finished (version 1); epoch 1's tail is ready and epoch 2 may start.
		want = []Task{task(0, 0, 1, KindBackGA, 0), task(0, 0, 2, KindAV, 0)}
		if got := s.Ready(); !slices.Equal(got, want) || s.LowestUnfinished() != 1 {
			t.Fatalf("Ready() = %v, want %v; lowest unfinished %d", got, want, s.LowestUnfinished())
		}
		if got := run(t, s, task(0, 0, 2, KindAV, 0)); got.Weights != 1 {
			t.Fatalf("AV_0 of epoch 2 pins version %d, want 1", got.Weights)
		}
		run(t, s, task(0, 0, 1, KindBackGA, 0))
		run(t, s, task(0, 0, 1, KindBackSC, 0))
		if got := run(t, s, task(0, 0, 1, KindBackAV, 0)); got.Weights != 0 {
			t.Fatalf("∇AV_0 of epoch 1 uses version %d, want its AV_0's 0", got.Weights)
		}
		if got := s.PinnedVersions(); !slices.Equal(got, []int{0, 1}) {
			t.Fatalf("PinnedVersions() = %v, want [0 1]", got)
		}
	}
}

// Blocked names what an interval with nothing running or ready waits for.
func TestBlocked(t *testing.T) {
	s := mustNew(t, Config{Partitions: 2, Intervals: 1, Layers: 1, Epochs: 3, Local: []int{0}})
	if got := s.Blocked(0, 0); got != WaitNone {
		t.Fatalf("Blocked at the start = %v, want WaitNone (AV_0 is ready)", got)
	}
	run(t, s, task(0, 0, 0, KindAV, 0))
	run(t, s, task(0, 0, 0, KindSC, 0))
	if got := s.Blocked(0, 0); got != WaitRows {
		t.Fatalf("Blocked before p1's rows = %v, want WaitRows", got)
	}
	if got := s.Blocked(1, 0); got != WaitNone {
		t.Fatalf("Blocked of a remote interval = %v, want WaitNone", got)
	}
	if err := s.Observe(task(1, 0, 0, KindSC, 0)); err != nil {
		t.Fatal(err)
	}
	st, err := s.Start(task(0, 0, 0, KindGA, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Blocked(0, 0); got != WaitNone {
		t.Fatalf("Blocked while GA runs = %v, want WaitNone", got)
	}
	if err := s.Done(st.Task); err != nil {
		t.Fatal(err)
	}
	for _, k := range []Task{task(0, 0, 0, KindAV, 1), task(0, 0, 0, KindBackGA, 0), task(0, 0, 0, KindBackSC, 0)} {
		run(t, s, k)
	}
	if got := s.Blocked(0, 0); got != WaitRows {
		t.Fatalf("Blocked before p1's gradients = %v, want WaitRows", got)
	}
	for _, k := range []Task{task(1, 0, 0, KindAV, 1), task(1, 0, 0, KindBackGA, 0), task(1, 0, 0, KindBackSC, 0)} {
		if err := s.Observe(k); err != nil {
			t.Fatal(err)
		}
	}
	run(t, s, task(0, 0, 0, KindBackAV, 0))
	run(t, s, task(0, 0, 0, KindWU, 0))
	if got := s.Blocked(0, 0); got != WaitGate {
		t.Fatalf("Blocked after epoch 0 with p1 behind (S = 0) = %v, want WaitGate", got)
	}
}

// staleness returns synchronous training, or the asynchronous bound s.
func staleness(sync bool, s int) jobconfig.Staleness {
	if sync {
		return jobconfig.Sync
	}
	return jobconfig.Bounded(s)
}
