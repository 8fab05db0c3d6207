// Package trainer is the single-process trainer's epoch loop (`dorylus train` without
// --graph-servers): it trains one seed of a model.Learner epoch by epoch, evaluates it and
// stops as the run policy says (pkg/runpolicy, which graph server 0's coordinator follows
// too), saves the checkpoints that are due, and hands every epoch to its caller.
package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/runpolicy"
)

// Record is one point of a run's learning curve.
type Record struct {
	Epoch   int     `json:"epoch"`
	Loss    float64 `json:"loss"`
	ValAcc  float64 `json:"val_accuracy"` // NaN before the first evaluation
	Seconds float64 `json:"seconds"`      // the epoch's training, its evaluation left out
}

// Checkpoints save a run's weights.
type Checkpoints interface {
	// Due reports whether a checkpoint is due after epoch of epochs.
	Due(epoch, epochs int) bool
	// Save saves the weights of tr after epoch.
	Save(ctx context.Context, tr model.Learner, epoch int) error
	// String says where they are saved.
	String() string
}

// Config is one seed's run.
type Config struct {
	// Seed names the run in errors.
	Seed uint64
	// Start is the number of epochs trained already (resumed from a checkpoint).
	Start int
	// Policy says when to evaluate and when to stop; its Clock is the epochs' too.
	Policy runpolicy.Config
	// Checkpoints, when set, saves the weights when one is due, and when ctx ends.
	Checkpoints Checkpoints
	// Epoch, when set, runs after every epoch, its evaluation included, with the policy (which
	// knows the kept epoch of a run that selects by validation); an error ends the run.
	Epoch func(r Record, p *runpolicy.Policy) error
}

// Result is what one seed's run reports.
type Result struct {
	Curve []Record
	// Metrics is the reported evaluation: the kept epoch's with Config.Policy.Patience (which
	// BestEpoch names), else the last epoch's.
	Metrics   model.Metrics
	BestEpoch int
}

// Train trains tr from epoch c.Start on.
func Train(ctx context.Context, tr model.Learner, c Config) (Result, error) {
	var res Result
	pol := runpolicy.New(c.Policy)
	clock := c.Policy.Clock
	if clock == nil {
		clock = time.Now
	}
	valAcc := math.NaN()
	for e := c.Start + 1; e <= pol.Last(); e++ {
		if err := ctx.Err(); err != nil {
			return res, interrupted(ctx, tr, c, e, err)
		}
		t0 := clock()
		loss, err := tr.Epoch(e - 1)
		if err != nil {
			return res, fmt.Errorf("seed %d: %w", c.Seed, err) // ErrNotFinite names the epoch, layer and task
		}
		r := Record{Epoch: e, Loss: loss, ValAcc: valAcc, Seconds: clock().Sub(t0).Seconds()}
		if c.Checkpoints != nil && c.Checkpoints.Due(e, c.Policy.Epochs) {
			if err := c.Checkpoints.Save(ctx, tr, e); err != nil {
				return res, err
			}
		}
		d := pol.Epoch(runpolicy.Report{Epoch: e, Loss: loss})
		if d.Stop == runpolicy.NotFinite {
			return res, fmt.Errorf("seed %d: epoch %d: the training loss is %v", c.Seed, e, loss)
		}
		if d.Evaluate {
			m, err := tr.Evaluate()
			if err != nil {
				return res, err
			}
			valAcc, r.ValAcc = m.ValAcc, m.ValAcc
			pol.Evaluated(e, m)
		}
		res.Curve = append(res.Curve, r)
		if c.Epoch != nil {
			if err := c.Epoch(r, pol); err != nil {
				return res, err
			}
		}
	}
	if pol.Selects() {
		res.BestEpoch, res.Metrics = pol.Best()
		return res, nil
	}
	var err error
	res.Metrics, err = tr.Evaluate()
	return res, err
}

// interrupted returns the error of a run ctx stopped before epoch e, after saving a checkpoint
// of the epochs trained since the start.
func interrupted(ctx context.Context, tr model.Learner, c Config, e int, cause error) error {
	err := fmt.Errorf("training stopped at epoch %d of seed %d: %w", e, c.Seed, cause)
	if c.Checkpoints == nil || e-1 <= c.Start {
		return err
	}
	if serr := c.Checkpoints.Save(ctx, tr, e-1); serr != nil {
		return errors.Join(err, serr)
	}
	return fmt.Errorf("%w (checkpoint of epoch %d saved in %s)", err, e-1, c.Checkpoints)
}
