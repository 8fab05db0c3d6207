package runpolicy

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/model"
)

var long = flag.Bool("long", false, "run many more random runs")

// oracle is the run policy written the plain way, one rule at a time, against which the
// Policy is checked after every report.
type oracle struct {
	cfg        Config
	elapsed    time.Duration
	last       int
	reason     Reason
	overBudget bool
	// selection by validation: best accuracy, lowest loss, evaluations without progress, kept
	bestAcc, bestLoss float64
	stale             int
	kept              int
	keptMetrics       model.Metrics
}

func newOracle(cfg Config) *oracle {
	return &oracle{cfg: cfg, last: cfg.Epochs, bestAcc: math.Inf(-1), bestLoss: math.Inf(1)}
}

// stop ends the run after e unless it already ended early or e is its last epoch anyway.
func (o *oracle) stop(e int, r Reason) Reason {
	if o.reason != None || e >= o.last {
		return None
	}
	o.last, o.reason = e, r
	return r
}

func (o *oracle) epoch(r Report) Decision {
	if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) {
		o.last, o.reason = r.Epoch, NotFinite
		return Decision{Stop: NotFinite}
	}
	var d Decision
	if o.cfg.BudgetUSD > 0 && r.CostUSD >= o.cfg.BudgetUSD && !o.overBudget {
		o.overBudget, d.OverBudget = true, true
		d.Stop = o.stop(r.Epoch, Budget)
	}
	if o.cfg.Deadline > 0 && o.elapsed >= o.cfg.Deadline {
		if s := o.stop(r.Epoch, Deadline); s != None {
			d.Stop = s
		}
	}
	d.Evaluate = o.cfg.Patience > 0 || r.Epoch%o.cfg.EvalEvery == 0 || r.Epoch == o.last
	return d
}

func (o *oracle) evaluated(e int, m model.Metrics) Decision {
	var d Decision
	if o.cfg.Patience > 0 {
		switch {
		case m.ValAcc < o.bestAcc && m.ValLoss > o.bestLoss:
			if o.stale++; o.stale >= o.cfg.Patience {
				d.Stop = o.stop(e, Patience)
			}
		default:
			if m.ValAcc >= o.bestAcc && m.ValLoss <= o.bestLoss {
				o.kept, o.keptMetrics = e, m
			}
			o.bestAcc, o.bestLoss, o.stale = max(o.bestAcc, m.ValAcc), min(o.bestLoss, m.ValLoss), 0
		}
	}
	if t := o.cfg.TargetAccuracy; t > 0 && m.ValAcc >= t {
		if s := o.stop(e, Target); s != None {
			d.Stop = s
		}
	}
	return d
}

// check compares the policy's state with the oracle's, and the invariants that hold after
// every step: the run ends no later than planned, never before an epoch it reported last,
// early for a reason exactly when it ended before Config.Epochs.
func (o *oracle) check(p *Policy, reported int) error {
	switch {
	case p.Last() != o.last || p.Reason() != o.reason || p.OverBudget() != o.overBudget:
		return fmt.Errorf("last %d, reason %q, over budget %v; want %d, %q, %v", p.Last(), p.Reason(), p.OverBudget(), o.last, o.reason, o.overBudget)
	case p.Last() > p.cfg.Epochs || (p.Reason() == None) != (p.Last() == p.cfg.Epochs && p.Reason() != NotFinite):
		return fmt.Errorf("last %d of %d epochs, reason %q", p.Last(), p.cfg.Epochs, p.Reason())
	case p.Reason() == None && p.Last() < reported:
		return fmt.Errorf("last %d, but epoch %d was reported", p.Last(), reported)
	}
	if e, m := p.Best(); e != o.kept || m != o.keptMetrics {
		return fmt.Errorf("kept epoch %d %+v, want %d %+v", e, m, o.kept, o.keptMetrics)
	}
	return nil
}

// stats count what the random runs exercised, so the test can tell it is not vacuous.
type stats struct {
	runs, reports int
	stops         map[Reason]int
	late          int // evaluations taken after a later epoch's report
}

// drive feeds one random run to a Policy and its oracle: epochs in order, each evaluation
// asked for arriving after 0 to 3 later epochs (as in a pipelined run), a clock that moves a
// random step per epoch, a cost that grows, and now and then a non-finite loss.
func drive(rng *rand.Rand, st *stats) error {
	cfg := Config{Epochs: 1 + rng.IntN(30), EvalEvery: 1 + rng.IntN(5)}
	if rng.IntN(2) == 0 {
		cfg.Patience = 1 + rng.IntN(5)
	}
	if rng.IntN(2) == 0 {
		cfg.TargetAccuracy = 0.5 + 0.5*rng.Float64()
	}
	if rng.IntN(2) == 0 {
		cfg.BudgetUSD = 10 * rng.Float64()
	}
	if rng.IntN(2) == 0 {
		cfg.Deadline = time.Duration(1+rng.IntN(30)) * time.Second
	}
	now := time.Unix(1_000_000, 0)
	cfg.Clock = func() time.Time { return now }
	p := New(cfg)
	o := newOracle(cfg)
	lag := rng.IntN(4) // epochs an evaluation trails its epoch by
	var pending []int  // epochs whose evaluation is asked for, oldest first
	cost := 0.0
	evaluate := func() error {
		e := pending[0]
		pending = pending[1:]
		if e > p.Last() {
			return nil // dropped by a stop
		}
		m := model.Metrics{ValAcc: rng.Float64(), ValLoss: rng.Float64(), TestAcc: rng.Float64(), TrainAcc: rng.Float64()}
		got, want := p.Evaluated(e, m), o.evaluated(e, m)
		if got != want {
			return fmt.Errorf("evaluation of epoch %d %+v: %+v, want %+v", e, m, got, want)
		}
		if got.Stop != None {
			st.stops[got.Stop]++
		}
		return o.check(p, e)
	}
	for e := 1; e <= p.Last(); e++ {
		st.reports++
		now = now.Add(time.Duration(rng.IntN(3000)) * time.Millisecond)
		o.elapsed = now.Sub(time.Unix(1_000_000, 0))
		cost += rng.Float64()
		loss := rng.Float64()
		if rng.IntN(60) == 0 {
			loss = []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[rng.IntN(3)]
		}
		r := Report{Epoch: e, Loss: loss, CostUSD: cost}
		got, want := p.Epoch(r), o.epoch(r)
		if got != want {
			return fmt.Errorf("config %+v, epoch %+v: %+v, want %+v", cfg, r, got, want)
		}
		if err := o.check(p, e); err != nil {
			return fmt.Errorf("config %+v, after epoch %+v: %w", cfg, r, err)
		}
		if got.Stop != None {
			st.stops[got.Stop]++
		}
		if got.Stop == NotFinite {
			return nil
		}
		if got.Evaluate {
			pending = append(pending, e)
		}
		for len(pending) > 0 && pending[0] <= e-lag {
			if pending[0] < e {
				st.late++
			}
			if err := evaluate(); err != nil {
				return fmt.Errorf("config %+v: %w", cfg, err)
			}
		}
	}
	for len(pending) > 0 {
		if err := evaluate(); err != nil {
			return fmt.Errorf("config %+v: %w", cfg, err)
		}
	}
	return nil
}

// TestRandomRuns drives random runs — every mix of patience, target, budget and deadline,
// evaluations that trail their epochs, non-finite losses — and checks the Policy against the
// oracle after every report.
func TestRandomRuns(t *testing.T) {
	runs := 20_000
	if *long {
		runs = 1_000_000
	} else if testing.Short() {
		runs = 2_000
	}
	st := stats{stops: map[Reason]int{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range runs {
		st.runs++
		if err := drive(rng, &st); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	t.Logf("%d runs, %d reports, %d late evaluations, stops %v", st.runs, st.reports, st.late, st.stops)
	for _, r := range []Reason{Target, Patience, Budget, Deadline, NotFinite} {
		if st.stops[r] == 0 {
			t.Errorf("no run stopped for %q: the random runs miss a rule", r)
		}
	}
	if st.late == 0 {
		t.Error("no evaluation trailed its epoch")
	}
}

// TestEvaluates: without patience the run evaluates every EvalEvery epochs and after the
// last, with patience after every epoch.
func TestEvaluates(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Epochs: 7, EvalEvery: 3}, "[3 6 7]"},
		{Config{Epochs: 4, EvalEvery: 1}, "[1 2 3 4]"},
		{Config{Epochs: 4, EvalEvery: 10, Patience: 2}, "[1 2 3 4]"},
	} {
		p := New(c.cfg)
		var got []int
		for e := 1; e <= c.cfg.Epochs; e++ {
			if p.Epoch(Report{Epoch: e, Loss: 1}).Evaluate {
				got = append(got, e)
			}
		}
		if fmt.Sprint(got) != c.want {
			t.Errorf("%+v: evaluates after %v, want %s", c.cfg, got, c.want)
		}
	}
}

// TestStopsOnce: the first reason to stop ends the run there; a later one changes nothing,
// and a reason at the last epoch is no early stop.
func TestStopsOnce(t *testing.T) {
	p := New(Config{Epochs: 10, EvalEvery: 1, TargetAccuracy: 0.8, BudgetUSD: 5})
	if d := p.Epoch(Report{Epoch: 4, Loss: 1, CostUSD: 5}); d.Stop != Budget || !d.OverBudget || !d.Evaluate || p.Last() != 4 {
		t.Fatalf("budget reached at epoch 4: %+v, last %d; want a stop after 4 that evaluates it", d, p.Last())
	}
	if d := p.Evaluated(4, model.Metrics{ValAcc: 0.9}); d.Stop != None || p.Reason() != Budget {
		t.Errorf("target after the budget's stop: %+v, reason %q; want no second stop", d, p.Reason())
	}
	p = New(Config{Epochs: 3, EvalEvery: 1, TargetAccuracy: 0.8})
	if d := p.Evaluated(3, model.Metrics{ValAcc: 0.9}); d.Stop != None || p.Reason() != None {
		t.Errorf("target at the last epoch: %+v, reason %q; want none", d, p.Reason())
	}
	if p := New(Config{Epochs: 0, EvalEvery: 0}); p.Last() != 1 || !p.Epoch(Report{Epoch: 1, Loss: 1}).Evaluate {
		t.Errorf("0 epochs, evaluation every 0: last %d; want 1, evaluated", p.Last())
	}
}
