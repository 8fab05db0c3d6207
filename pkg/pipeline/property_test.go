package pipeline

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
)

var long = flag.Bool("long", false, "run many more random schedules")

// stats counts what the random schedules exercised, so a test can tell they are not vacuous.
type stats struct {
	schedules, steps, tasks, badCalls atomic.Int64
	maxAge, gateEdge, overlaps        atomic.Int64
}

func (st *stats) add(o *oracle) {
	st.gateEdge.Add(int64(o.gateEdge))
	st.overlaps.Add(int64(o.overlaps))
	for {
		cur := st.maxAge.Load()
		if int64(o.maxAge) <= cur || st.maxAge.CompareAndSwap(cur, int64(o.maxAge)) {
			break
		}
	}
}

// randomReads returns a Reads map in which every listed interval reads itself and a random
// subset of the others; some intervals are left out (they read everything).
func randomReads(rng *rand.Rand, counts []int) map[IntervalID][]IntervalID {
	var ids []IntervalID
	for p, c := range counts {
		for i := 0; i < c; i++ {
			ids = append(ids, IntervalID{p, i})
		}
	}
	reads := map[IntervalID][]IntervalID{}
	for _, id := range ids {
		if rng.IntN(5) == 0 {
			continue // default: all
		}
		srcs := []IntervalID{id}
		for _, src := range ids {
			if rng.IntN(3) == 0 {
				srcs = append(srcs, src) // duplicates of id allowed on purpose
			}
		}
		reads[id] = srcs
	}
	return reads
}

// drive runs one random schedule of cfg to the end, checking the scheduler against the oracle
// after every step.
func drive(cfg Config, seed uint64, st *stats) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s, err := New(cfg)
	if err != nil {
		return err
	}
	o := newOracle(cfg)
	if err := o.check(s); err != nil {
		return fmt.Errorf("initial state: %w", err)
	}
	n := o.n()
	// Per-interval speeds skew the schedule so some intervals run ahead of others.
	speed := make([]float64, n)
	for g := range speed {
		speed[g] = 0.05 + rng.Float64()
		if rng.IntN(4) == 0 {
			speed[g] *= 10
		}
	}
	capacity := []int{1, 2, 4, 8, n}[rng.IntN(5)]
	pDone := 0.2 + 0.6*rng.Float64()
	stopStep := -1
	if rng.IntN(4) == 0 {
		stopStep = rng.IntN(n * cfg.Epochs * len(o.seq) * 2)
	}
	pick := func(ts []Task) Task {
		total := 0.0
		for _, t := range ts {
			total += speed[o.index[t.ID()]]
		}
		x := rng.Float64() * total
		for _, t := range ts {
			x -= speed[o.index[t.ID()]]
			if x <= 0 {
				return t
			}
		}
		return ts[len(ts)-1]
	}
	var running []Task
	for step := 0; ; step++ {
		st.steps.Add(1)
		if step == stopStep {
			e := rng.IntN(cfg.Epochs)
			if err := s.StopAfter(e); err != nil {
				return err
			}
			o.last = min(o.last, e)
			o.stopAt = step
		}
		if cfg.ExternalVersions && rng.IntN(3) == 0 && o.version > o.extVersion {
			// The parameter server reports the versions it has applied, late.
			o.extVersion = o.extVersion + 1 + rng.IntN(o.version-o.extVersion)
			if err := s.SetWeightVersion(o.extVersion); err != nil {
				return err
			}
		}
		if rng.IntN(20) == 0 {
			if err := badCall(s, o, rng); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			st.badCalls.Add(1)
		}
		ready := s.Ready()
		if len(ready) == 0 && len(running) == 0 {
			if cfg.ExternalVersions && o.version > o.extVersion {
				o.extVersion = o.version
				if err := s.SetWeightVersion(o.extVersion); err != nil {
					return err
				}
				continue
			}
			if !s.Finished() || !o.finished() {
				return fmt.Errorf("step %d: deadlock: nothing ready or running, Finished()=%v, progress %v", step, s.Finished(), s.Progress())
			}
			break
		}
		if len(running) > 0 && (len(ready) == 0 || len(running) >= capacity || rng.Float64() < pDone) {
			t := pick(running)
			running = slices.DeleteFunc(running, func(u Task) bool { return u == t })
			if err := s.Done(t); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			if err := o.finish(t); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		} else {
			t := pick(ready)
			got, err := s.Start(t)
			if err != nil {
				return fmt.Errorf("step %d: Start of a ready task: %w", step, err)
			}
			v := o.version
			if cfg.ExternalVersions {
				v = o.extVersion
			}
			if err := o.start(t, got, v); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			running = append(running, t)
			st.tasks.Add(1)
		}
		if err := o.check(s); err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
	}
	if err := o.checkComplete(); err != nil {
		return err
	}
	st.schedules.Add(1)
	st.add(o)
	return nil
}

// badCall makes a call the scheduler must refuse, and checks that it does and changes nothing.
func badCall(s *Scheduler, o *oracle, rng *rand.Rand) error {
	g := rng.IntN(o.n())
	next := o.next(g)
	if o.epochOf(g) >= o.cfg.Epochs {
		return nil
	}
	switch rng.IntN(5) {
	case 0: // start the next task when it is not ready or already running
		if ok, _ := o.depsMet(next); ok {
			return nil
		}
		_, err := s.Start(next)
		switch {
		case o.laneRunning(next) && o.laneNext(next) == next:
			return mustErr(err, ErrAlreadyStarted, "start of a running task")
		default:
			return mustErr(err, ErrNotReady, "start of an unready task")
		}
	case 1: // start or finish a task already done
		if len(o.history[g]) == 0 {
			return nil
		}
		t := o.history[g][rng.IntN(len(o.history[g]))]
		if _, err := s.Start(t); mustErr(err, ErrAlreadyDone, "start of a done task") != nil {
			return mustErr(err, ErrAlreadyDone, "start of a done task")
		}
		return mustErr(s.Done(t), ErrAlreadyDone, "done of a done task")
	case 2: // finish a task that was not started
		if o.laneRunning(next) {
			return nil
		}
		return mustErr(s.Done(next), ErrNotStarted, "done of a task not started")
	case 3: // start a task two steps ahead of the head
		h := o.headNext(g)
		p := h.Epoch*len(o.seq) + stepIndex(h.Kind, h.Layer, o.cfg.Layers) + 2
		if p/len(o.seq) >= o.cfg.Epochs {
			return nil
		}
		t := o.taskAt(g, p/len(o.seq), p%len(o.seq))
		_, err := s.Start(t)
		return mustErr(err, ErrNotReady, "start of a task ahead of its interval")
	default: // tasks that do not exist
		bad := []Task{
			{Partition: -1},
			{Partition: o.cfg.Partitions},
			{Partition: next.Partition, Interval: 99},
			{Partition: next.Partition, Interval: next.Interval, Epoch: o.cfg.Epochs},
			{Partition: next.Partition, Interval: next.Interval, Kind: KindGA, Layer: o.cfg.Layers},
			{Partition: next.Partition, Interval: next.Interval, Kind: KindWU, Layer: 1},
			{Partition: next.Partition, Interval: next.Interval, Kind: numKinds},
		}
		t := bad[rng.IntN(len(bad))]
		if _, err := s.Start(t); mustErr(err, ErrInvalidTask, "start "+t.String()) != nil {
			return mustErr(err, ErrInvalidTask, "start "+t.String())
		}
		return mustErr(s.Done(t), ErrInvalidTask, "done "+t.String())
	}
}

type mode struct {
	name  string
	sync  bool
	stale int
}

var modes = []mode{{"sync", true, 0}, {"S0", false, 0}, {"S1", false, 1}, {"S2", false, 2}}

// TestRandomSchedules drives random schedules over every combination of P ∈ {1,2,3},
// intervals ∈ {1,2,4}, L ∈ {1,2,3}, sync and S ∈ {0,1,2}, both gradient flows, all-to-all and
// random neighbour sets, counted and external versions.
func TestRandomSchedules(t *testing.T) {
	seeds := 8
	if *long {
		seeds = 60
	} else if testing.Short() {
		seeds = 1
	}
	var st stats
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			var ms stats
			for _, P := range []int{1, 2, 3} {
				for _, I := range []int{1, 2, 4} {
					for _, L := range []int{1, 2, 3} {
						for _, flow := range []GradientFlow{PushGradients, PullGradients} {
							for seed := 0; seed < seeds; seed++ {
								seed := uint64(seed)*1_000_003 + uint64(P*100+I*10+L) + uint64(flow)<<40
								rng := rand.New(rand.NewPCG(seed, 1))
								cfg := Config{Partitions: P, Intervals: I, Layers: L, Epochs: m.stale + 3 + rng.IntN(2),
									Staleness: staleness(m.sync, m.stale), Gradients: flow}
								if rng.IntN(3) == 0 {
									cfg.IntervalsOf = make([]int, P)
									for p := range cfg.IntervalsOf {
										cfg.IntervalsOf[p] = 1 + rng.IntN(I)
									}
								}
								if rng.IntN(3) == 0 {
									cfg.Reads = randomReads(rng, cfg.intervalCounts())
								}
								cfg.ExternalVersions = rng.IntN(4) == 0
								cfg.TailOverlap = rng.IntN(2) == 0
								cfg.DrainEvery = rng.IntN(3) // 0: never
								if err := drive(cfg, seed, &ms); err != nil {
									t.Fatalf("P=%d I=%d L=%d %s %v seed %d: %v\nconfig %+v", P, I, L, m.name, flow, seed, err, cfg)
								}
							}
						}
					}
				}
			}
			if !m.sync && m.stale > 0 && ms.maxAge.Load() != int64(m.stale+1) {
				t.Errorf("oldest value read was %d epochs old; the schedules never reached the bound S+1 = %d", ms.maxAge.Load(), m.stale+1)
			}
			if m.sync && ms.maxAge.Load() != 0 {
				t.Errorf("sync read a value %d epochs old", ms.maxAge.Load())
			}
			if !m.sync && m.stale > 0 && ms.gateEdge.Load() == 0 {
				t.Errorf("no interval ever started an epoch at the edge of the gate")
			}
			if overlap := !m.sync && m.stale > 0; overlap != (ms.overlaps.Load() > 0) {
				t.Errorf("%d head tasks ran beside an older epoch's tail; want some exactly when TailOverlap can act (S ≥ 1)", ms.overlaps.Load())
			}
			t.Logf("%s: %d schedules, %d tasks, %d steps checked, %d refused calls, oldest read %d epochs, %d epoch starts at the gate's edge, %d head tasks beside an older tail",
				m.name, ms.schedules.Load(), ms.tasks.Load(), ms.steps.Load(), ms.badCalls.Load(), ms.maxAge.Load(), ms.gateEdge.Load(), ms.overlaps.Load())
			st.schedules.Add(ms.schedules.Load())
		})
	}
}
