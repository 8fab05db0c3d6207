// Package runpolicy is the run policy of training, the same for the single-process trainer and
// for graph server 0's coordinator of a distributed run: after each epoch's report it says
// whether to evaluate the weights, and whether and why the run ends early — the validation
// accuracy reached its target, patience ran out (the GAT paper's selection by validation,
// model.BestValidation), the cost reached the budget, the deadline passed, or the training loss
// is not finite. A Policy is pure: it does no I/O, and reads the time only from the clock it is
// given; its caller acts on its Decisions.
//
// Epochs are counted from 1. Reports of epochs come in order; the evaluation of an epoch may
// come after later epochs' reports (a pipelined run goes on while it evaluates), and a stop it
// decides drops those later epochs.
package runpolicy

import (
	"math"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/model"
)

// Config says when a run evaluates and when it ends.
type Config struct {
	// Epochs is the number of epochs the run trains unless it stops earlier.
	Epochs int
	// EvalEvery evaluates after every this many epochs, and after the last.
	EvalEvery int
	// Patience > 0 selects by validation (model.BestValidation): every epoch is evaluated, the
	// result is the kept epoch's (Best), and the run stops after Patience evaluations in a row
	// without progress.
	Patience int
	// TargetAccuracy > 0 stops the run after the first evaluation whose validation accuracy
	// reaches it.
	TargetAccuracy float64
	// BudgetUSD > 0 stops the run after the first epoch whose cost reaches it.
	BudgetUSD float64
	// Deadline > 0 stops the run after the first epoch that ends Deadline or more after New.
	Deadline time.Duration
	// Clock reads the time (time.Now if nil).
	Clock func() time.Time
}

// Reason says why a run ends.
type Reason string

// The reasons a run ends early; None is a run that trains every epoch of Config.Epochs.
const (
	None      Reason = ""
	Target    Reason = "target"     // the validation accuracy reached Config.TargetAccuracy
	Patience  Reason = "patience"   // Config.Patience evaluations without progress
	Budget    Reason = "budget"     // the cost reached Config.BudgetUSD
	Deadline  Reason = "deadline"   // Config.Deadline passed
	NotFinite Reason = "not finite" // the training loss is NaN or infinite: the run fails
)

// Report is what the policy learns of one epoch's training.
type Report struct {
	Epoch   int     // 1-based
	Loss    float64 // the training loss
	CostUSD float64 // the run's cost so far (0 without a budget)
}

// Decision is what to do after a report.
type Decision struct {
	// Evaluate the weights after this epoch.
	Evaluate bool
	// Stop, when not None, ends the run after the epoch the report named, earlier than
	// planned (Last is that epoch now): later epochs are dropped. NotFinite fails the run.
	Stop Reason
	// OverBudget says that this epoch's cost is the first to reach the budget (whether or not
	// it stops the run: the last epoch may reach it).
	OverBudget bool
}

// Policy applies a Config to a run's reports.
type Policy struct {
	cfg        Config
	start      time.Time
	last       int    // the run's last epoch
	reason     Reason // why the run ended early; None while it goes on to Config.Epochs
	overBudget bool
	sel        *model.BestValidation
}

// New returns the policy of a run that starts now. Epochs and EvalEvery below 1 count as 1;
// a Patience, TargetAccuracy, BudgetUSD or Deadline of 0 or less is none.
func New(cfg Config) *Policy {
	cfg.Epochs, cfg.EvalEvery = max(cfg.Epochs, 1), max(cfg.EvalEvery, 1)
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	p := &Policy{cfg: cfg, start: cfg.Clock(), last: cfg.Epochs}
	if cfg.Patience > 0 {
		p.sel = model.NewBestValidation(cfg.Patience)
	}
	return p
}

// Epoch takes the report of an epoch, the next of the run's.
func (p *Policy) Epoch(r Report) Decision {
	var d Decision
	if math.IsNaN(r.Loss) || math.IsInf(r.Loss, 0) {
		p.stopAfter(r.Epoch, NotFinite, &d)
		return d
	}
	if p.cfg.BudgetUSD > 0 && r.CostUSD >= p.cfg.BudgetUSD && !p.overBudget {
		p.overBudget, d.OverBudget = true, true
		p.stopAfter(r.Epoch, Budget, &d)
	}
	if p.cfg.Deadline > 0 && p.cfg.Clock().Sub(p.start) >= p.cfg.Deadline {
		p.stopAfter(r.Epoch, Deadline, &d)
	}
	d.Evaluate = p.sel != nil || r.Epoch%p.cfg.EvalEvery == 0 || r.Epoch == p.last
	return d
}

// Evaluated takes the evaluation of an epoch that Epoch asked for.
func (p *Policy) Evaluated(epoch int, m model.Metrics) Decision {
	var d Decision
	if p.sel != nil && p.sel.Observe(epoch, m) {
		p.stopAfter(epoch, Patience, &d)
	}
	if t := p.cfg.TargetAccuracy; t > 0 && m.ValAcc >= t {
		p.stopAfter(epoch, Target, &d)
	}
	return d
}

// stopAfter ends the run after epoch for reason, unless it has ended or ends then anyway; a
// non-finite loss ends it whatever.
func (p *Policy) stopAfter(epoch int, reason Reason, d *Decision) {
	if reason != NotFinite && (p.reason != None || epoch >= p.last) {
		return
	}
	p.last, p.reason, d.Stop = epoch, reason, reason
}

// Last returns the run's last epoch: Config.Epochs, or the epoch a stop ended it after.
func (p *Policy) Last() int { return p.last }

// Reason returns why the run ends early: None while it goes on to Config.Epochs.
func (p *Policy) Reason() Reason { return p.reason }

// OverBudget reports whether an epoch's cost reached the budget.
func (p *Policy) OverBudget() bool { return p.overBudget }

// Selects reports whether the run selects by validation (Config.Patience).
func (p *Policy) Selects() bool { return p.sel != nil }

// Best returns, with Config.Patience, the kept epoch and its evaluation (epoch 0 before any).
func (p *Policy) Best() (int, model.Metrics) {
	if p.sel == nil {
		return 0, model.Metrics{}
	}
	return p.sel.Best()
}
