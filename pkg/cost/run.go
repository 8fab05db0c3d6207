package cost

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"time"
)

// Function is what runs a run's tensor calls.
type Function int

// The functions: none (the calls run on the graph servers), Lambda or Knative.
const (
	NoFunction Function = iota
	Lambda
	Knative
)

// Run prices a run as it goes: its servers for the time they have been held, and the tensor
// calls made so far.
type Run struct {
	Prices Prices
	// Base is the run's servers and function settings; its Wall and calls are left zero.
	Base Usage
	// Function is what runs the tensor calls: they are priced as Lambda's requests and
	// GB-seconds, Knative's vCPU-seconds, or not at all.
	Function Function
	// BudgetUSD, when above 0, is the cost at which the run stops.
	BudgetUSD float64
}

// At prices the run after wall, with the tensor calls made so far.
func (r *Run) At(wall time.Duration, calls Calls) (Breakdown, error) {
	u := r.Base
	u.Wall = wall
	switch r.Function {
	case Lambda:
		u.Lambda = calls
	case Knative:
		u.Knative = calls
	}
	return r.Prices.Estimate(u)
}

// Over reports whether a cost has reached the budget.
func (r *Run) Over(usd float64) bool { return r.BudgetUSD > 0 && usd >= r.BudgetUSD }

// Validate checks that every instance type has a price and that the calls can be priced.
func (r *Run) Validate() error {
	if r.BudgetUSD < 0 {
		return fmt.Errorf("cost: budget %v USD", r.BudgetUSD)
	}
	_, err := r.At(0, Calls{Requests: 1, Billed: time.Millisecond})
	return err
}

// ReadPrices reads a price list in JSON over Default: the fields and instance types it
// names replace Default's, the rest stay (spot prices, discounts, another region).
func ReadPrices(rd io.Reader) (Prices, error) {
	p := Default
	p.Instances = maps.Clone(Default.Instances)
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Prices{}, fmt.Errorf("cost: read prices: %w", err)
	}
	if p.LambdaGBSecondUSD < 0 || p.LambdaRequestUSD < 0 {
		return Prices{}, fmt.Errorf("cost: negative Lambda prices %v, %v", p.LambdaGBSecondUSD, p.LambdaRequestUSD)
	}
	for name, in := range p.Instances {
		if in.HourUSD < 0 || in.VCPUs < 1 {
			return Prices{}, fmt.Errorf("cost: instance type %q: %+v: want a price ≥ 0 and at least one vCPU", name, in)
		}
	}
	return p, nil
}
