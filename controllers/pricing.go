package controllers

import (
	corev1 "k8s.io/api/core/v1"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Cost policy: graph server 0 prices the job (pkg/cost) with the run
// config's cost section, which the operator resolves here: its price list,
// each role's instance type — the node label node.kubernetes.io/instance-type
// the role's nodeSelector pins, else the operator's default — and
// spec.runPolicy.budgetUSD. The section is left out of the digest stamped on
// the pod templates, so a new price list or budget never restarts a running
// job's servers; they read it when they start. The budget itself is enforced
// by decide (failure.go) on the reported cost.

// Pricing is what the operator prices jobs with.
type Pricing struct {
	// Prices is the price list; a zero value means cost.Default.
	Prices cost.Prices
	// GraphServerInstance and ParameterServerInstance are the instance types
	// of a role whose nodeSelector names none; empty means cost's defaults.
	GraphServerInstance, ParameterServerInstance string
}

// costSection resolves the run config's cost section of job; budget is
// spec.runPolicy.budgetUSD parsed (0: none).
func (p *Pricing) costSection(job *dorylusv1alpha1.GNNTrainingJob, budget float64) *jobconfig.Cost {
	c := &jobconfig.Cost{
		GraphServerInstance:     instanceType(job.Spec.GraphServers.ServerPodSpec, p.GraphServerInstance, cost.DefaultGraphServerInstance),
		ParameterServerInstance: instanceType(job.Spec.ParameterServers.ServerPodSpec, p.ParameterServerInstance, cost.DefaultParameterServerInstance),
		BudgetUSD:               budget,
	}
	if p.Prices.Instances != nil {
		c.Prices = &p.Prices
	}
	return c
}

// instanceType is the instance type a role's nodeSelector pins, else def, else fallback.
func instanceType(s dorylusv1alpha1.ServerPodSpec, def, fallback string) string {
	if t := s.NodeSelector[corev1.LabelInstanceTypeStable]; t != "" {
		return t
	}
	if def != "" {
		return def
	}
	return fallback
}

// Validate checks that the default instance types have prices.
func (p *Pricing) Validate() error {
	cfg := jobconfig.RunConfig{Cost: p.costSection(&dorylusv1alpha1.GNNTrainingJob{}, 0)}
	return cfg.CostRun().Validate()
}
