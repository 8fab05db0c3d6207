package jobconfig

import (
	"github.com/dorylus-gnn/dorylus/pkg/cost"
)

// Cost says how graph server 0 prices the run as it goes (pkg/cost). The servers read it
// when they start; it is left out of the digest that restarts them when the config changes,
// so new prices or a new budget never restart a running job.
type Cost struct {
	// Prices is the price list; nil means cost.Default.
	Prices *cost.Prices `json:"prices,omitempty"`
	// GraphServerInstance is the EC2 instance type of every graph server's node.
	GraphServerInstance string `json:"graphServerInstance"`
	// ParameterServerInstance is that of every parameter server's node.
	ParameterServerInstance string `json:"parameterServerInstance"`
	// KnativeInstance is that of the nodes a Knative function runs on; empty means
	// GraphServerInstance.
	KnativeInstance string `json:"knativeInstance,omitempty"`
	// BudgetUSD, above 0, is the cost at which graph server 0 stops the run after the epoch
	// that reached it and reports that epoch at once, so the operator fails the job.
	BudgetUSD float64 `json:"budgetUSD,omitempty"`
}

// CostRun returns what graph server 0 prices the run with; nil when the config has no Cost.
func (cfg *RunConfig) CostRun() *cost.Run {
	c := cfg.Cost
	if c == nil {
		return nil
	}
	r := &cost.Run{Prices: cost.Default, BudgetUSD: c.BudgetUSD}
	switch cfg.Backend.Kind {
	case BackendLambda:
		r.Function = cost.Lambda
	case BackendKnative:
		r.Function = cost.Knative
	}
	if c.Prices != nil {
		r.Prices = *c.Prices
	}
	r.Base.Servers = []cost.Servers{
		{Role: "graph servers", Instance: c.GraphServerInstance, Count: cfg.GraphServers.Replicas},
		{Role: "parameter servers", Instance: c.ParameterServerInstance, Count: cfg.ParameterServers.Replicas},
	}
	r.Base.KnativeInstance = c.KnativeInstance
	if r.Base.KnativeInstance == "" {
		r.Base.KnativeInstance = c.GraphServerInstance
	}
	if l := cfg.Backend.Lambda; l != nil {
		r.Base.LambdaMemoryMB = l.MemoryMB
	}
	return r
}

func (cfg *RunConfig) validateCost(v *validator) {
	if cfg.Cost == nil {
		return
	}
	v.nonEmpty("cost.graphServerInstance", cfg.Cost.GraphServerInstance)
	v.nonEmpty("cost.parameterServerInstance", cfg.Cost.ParameterServerInstance)
	if err := cfg.CostRun().Validate(); err != nil {
		v.fail("cost", "%v", err)
	}
}
