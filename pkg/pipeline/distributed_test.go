package pipeline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// message is a completion report in flight from one graph server to another: ghost rows (SC,
// ∇SC, dZ producers) or progress (WU and, at random, other tasks).
type message struct {
	to      int
	task    Task
	version int // a weight-version report from the parameter server when task is unused
	isVer   bool
}

// driveDistributed runs one random schedule of cfg on P schedulers, one per partition, each
// with Local = {p}, that learn of each other only through Observe calls delivered in random
// order and with random delay. It checks each scheduler against an oracle of what it knows
// (its own tasks and what it observed) and every start against the true global history.
func driveDistributed(cfg Config, seed uint64, st *stats) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x2545f4914f6cdd1d))
	P := cfg.Partitions
	truth := newOracle(cfg)
	scheds := make([]*Scheduler, P)
	views := make([]*oracle, P)
	for p := range scheds {
		c := cfg
		c.Local = []int{p}
		s, err := New(c)
		if err != nil {
			return err
		}
		scheds[p], views[p] = s, newOracle(c)
	}
	psVersion := 0 // the parameter server's version, with ExternalVersions
	var pending []message
	running := make([][]Task, P)
	pDeliver := 0.2 + 0.6*rng.Float64()
	slow := rng.IntN(P) // one server is slower than the others
	for step := 0; ; step++ {
		st.steps.Add(1)
		var ready [][]Task
		anyReady, anyRunning := false, false
		for p, s := range scheds {
			ready = append(ready, s.Ready())
			anyReady = anyReady || len(ready[p]) > 0
			anyRunning = anyRunning || len(running[p]) > 0
		}
		if !anyReady && !anyRunning && len(pending) == 0 {
			for p, s := range scheds {
				if !s.Finished() || !s.LocalFinished() {
					return fmt.Errorf("step %d: deadlock at server %d: progress %v", step, p, s.Progress())
				}
			}
			break
		}
		switch {
		case len(pending) > 0 && (rng.Float64() < pDeliver || (!anyReady && !anyRunning)):
			i := rng.IntN(len(pending))
			m := pending[i]
			pending = slices.Delete(pending, i, i+1)
			if m.isVer {
				if err := scheds[m.to].SetWeightVersion(m.version); err != nil {
					return err
				}
				views[m.to].extVersion = max(views[m.to].extVersion, m.version)
				break
			}
			if err := scheds[m.to].Observe(m.task); err != nil {
				return fmt.Errorf("step %d: server %d: %w", step, m.to, err)
			}
			if err := views[m.to].observe(m.task); err != nil {
				return fmt.Errorf("step %d: server %d view: %w", step, m.to, err)
			}
			if err := mustErr(func() error { _, err := scheds[m.to].Start(m.task); return err }(), ErrNotLocal, "start of a remote task"); err != nil {
				return err
			}
		case anyRunning && (!anyReady || rng.IntN(2) == 0):
			var ps []int
			for p := range running {
				if len(running[p]) > 0 && (p != slow || rng.IntN(4) == 0) {
					ps = append(ps, p)
				}
			}
			if len(ps) == 0 {
				continue
			}
			p := ps[rng.IntN(len(ps))]
			i := rng.IntN(len(running[p]))
			t := running[p][i]
			running[p] = slices.Delete(running[p], i, i+1)
			if err := scheds[p].Done(t); err != nil {
				return fmt.Errorf("step %d: server %d: %w", step, p, err)
			}
			if err := views[p].finish(t); err != nil {
				return fmt.Errorf("step %d: server %d view: %w", step, p, err)
			}
			if err := truth.finish(t); err != nil {
				return fmt.Errorf("step %d: truth: %w", step, err)
			}
			if t.Kind == KindWU && cfg.ExternalVersions && (!cfg.Staleness.Sync() || truth.wuDone[t.Epoch] == truth.n()) {
				// The parameter server applies the gradient (sync: the epoch's last one) and
				// answers the pushing server at once; the others hear of it later.
				psVersion++
				if err := scheds[p].SetWeightVersion(psVersion); err != nil {
					return err
				}
				views[p].extVersion = psVersion
				for q := range scheds {
					if q != p {
						pending = append(pending, message{to: q, version: psVersion, isVer: true})
					}
				}
			}
			if truth.producedFlow(t) >= 0 || t.Kind == KindWU || rng.IntN(3) == 0 {
				for q := range scheds {
					if q != p {
						pending = append(pending, message{to: q, task: t})
					}
				}
			}
		case anyReady:
			var ps []int
			for p := range ready {
				if len(ready[p]) > 0 {
					ps = append(ps, p)
				}
			}
			p := ps[rng.IntN(len(ps))]
			t := ready[p][rng.IntN(len(ready[p]))]
			got, err := scheds[p].Start(t)
			if err != nil {
				return fmt.Errorf("step %d: server %d: Start of a ready task: %w", step, p, err)
			}
			v := views[p].version
			if cfg.ExternalVersions {
				v = views[p].extVersion
			}
			if err := views[p].start(t, got, v); err != nil {
				return fmt.Errorf("step %d: server %d: %w", step, p, err)
			}
			if err := checkTruth(truth, t, got); err != nil {
				return fmt.Errorf("step %d: server %d: %w", step, p, err)
			}
			if cfg.ExternalVersions && got.Weights > psVersion {
				return fmt.Errorf("step %d: %v uses version %d, the parameter server has only %d", step, t, got.Weights, psVersion)
			}
			running[p] = append(running[p], t)
			st.tasks.Add(1)
		default:
			continue
		}
		for p, s := range scheds {
			if err := views[p].check(s); err != nil {
				return fmt.Errorf("step %d: server %d: %w", step, p, err)
			}
		}
	}
	if err := truth.checkComplete(); err != nil {
		return err
	}
	st.schedules.Add(1)
	st.add(truth)
	return nil
}

// checkTruth checks a start against the true global history, which every scheduler's view
// lags: the epoch gate and the staleness bound must hold on the truth, every read must be of
// rows that really exist, and no task may run twice.
func checkTruth(truth *oracle, t Task, got Started) error {
	if truth.started[t] {
		return fmt.Errorf("%v started twice", t)
	}
	if truth.laneRunning(t) || !truth.predsDone(t) {
		return fmt.Errorf("%v started out of order; its lane's next task is %v", t, truth.laneNext(t))
	}
	if t.Kind == KindAV && t.Layer == 0 {
		if m := truth.minUnf(); t.Epoch > m+truth.stale {
			return fmt.Errorf("epoch gate broken: %v starts while interval epochs go down to %d, S=%d", t, m, truth.stale)
		}
		if truth.drains(t.Epoch) {
			return fmt.Errorf("drain broken: %v starts while interval epochs go down to %d, draining every %d epochs", t, truth.minUnf(), truth.cfg.DrainEvery)
		}
		if t.Epoch == truth.minUnf()+truth.stale && truth.stale > 0 {
			truth.gateEdge++
		}
	}
	f, _ := truth.readFlow(t)
	for _, r := range got.Reads {
		h := truth.index[r.From]
		if r.Epoch > truth.latest[f][h] {
			return fmt.Errorf("%v reads epoch %d of %v, which has produced only up to %d", t, r.Epoch, r.From, truth.latest[f][h])
		}
		age := t.Epoch - r.Epoch
		if age > truth.stale+1 || (truth.cfg.Staleness.Sync() && age != 0) {
			return fmt.Errorf("staleness bound broken: %v reads epoch %d of %v", t, r.Epoch, r.From)
		}
		truth.maxAge = max(truth.maxAge, age)
	}
	if truth.cfg.Staleness.Sync() && f >= 0 && truth.produced[[2]int{f, t.Epoch}] != truth.n() {
		return fmt.Errorf("sync barrier broken: %v starts before every interval produced its rows", t)
	}
	if !truth.isTail(t) && truth.epochOf(truth.index[t.ID()]) < t.Epoch {
		truth.overlaps++
	}
	truth.started[t] = true
	truth.setRunning(t, true)
	return nil
}

// TestDistributedSchedules runs random schedules on one scheduler per partition that see each
// other only through delayed, reordered Observe and SetWeightVersion reports.
func TestDistributedSchedules(t *testing.T) {
	seeds := 8
	if *long {
		seeds = 60
	} else if testing.Short() {
		seeds = 1
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			var st stats
			for _, P := range []int{2, 3} {
				for _, I := range []int{1, 2, 4} {
					for _, L := range []int{1, 2} {
						for _, flow := range []GradientFlow{PushGradients, PullGradients} {
							for seed := 0; seed < seeds; seed++ {
								seed := uint64(seed)*7_000_003 + uint64(P*100+I*10+L) + uint64(flow)<<40
								rng := rand.New(rand.NewPCG(seed, 2))
								cfg := Config{Partitions: P, Intervals: I, Layers: L, Epochs: m.stale + 3,
									Staleness: staleness(m.sync, m.stale), Gradients: flow,
									ExternalVersions: !m.sync || rng.IntN(2) == 0, TailOverlap: rng.IntN(2) == 0, DrainEvery: rng.IntN(3)}
								if rng.IntN(3) == 0 {
									cfg.Reads = randomReads(rng, cfg.intervalCounts())
								}
								if err := driveDistributed(cfg, seed, &st); err != nil {
									t.Fatalf("P=%d I=%d L=%d %s %v seed %d: %v\nconfig %+v", P, I, L, m.name, flow, seed, err, cfg)
								}
							}
						}
					}
				}
			}
			if !m.sync && m.stale > 0 && st.maxAge.Load() != int64(m.stale+1) {
				t.Errorf("oldest value read was %d epochs old; never reached the bound S+1 = %d", st.maxAge.Load(), m.stale+1)
			}
			if overlap := !m.sync && m.stale > 0; overlap != (st.overlaps.Load() > 0) {
				t.Errorf("%d head tasks ran beside an older epoch's tail; want some exactly when TailOverlap can act (S ≥ 1)", st.overlaps.Load())
			}
			t.Logf("%s: %d distributed schedules, %d tasks, %d steps, oldest read %d epochs, %d epoch starts at the gate's edge, %d head tasks beside an older tail",
				m.name, st.schedules.Load(), st.tasks.Load(), st.steps.Load(), st.maxAge.Load(), st.gateEdge.Load(), st.overlaps.Load())
		})
	}
}
