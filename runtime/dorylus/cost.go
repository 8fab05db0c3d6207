package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// defaultLambdaMemoryMB is --lambda-memory-mb's default, the memory of the paper's functions.
const defaultLambdaMemoryMB = 3008

// costOptions are the flags of dorylus train's cost estimate (pkg/cost).
type costOptions struct {
	instance, psInstance string
	lambdaMemoryMB       int
}

// addFlags registers the cost flags.
func (c *costOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.instance, "instance-type", "c5n.2xlarge", "cost estimate: EC2 instance type of this process, or of each graph server (and of the nodes of a knative function)")
	f.StringVar(&c.psInstance, "param-server-instance-type", "c5.xlarge", "cost estimate: EC2 instance type of each parameter server")
	f.IntVar(&c.lambdaMemoryMB, "lambda-memory-mb", defaultLambdaMemoryMB, "cost estimate: memory configured for the Lambda function")
}

// validate checks that the instance types have prices.
func (c *costOptions) validate() error {
	_, err := cost.Default.Estimate(cost.Usage{LambdaMemoryMB: c.lambdaMemoryMB, Lambda: cost.Calls{Requests: 1},
		Servers: []cost.Servers{{Role: "--instance-type", Instance: c.instance}, {Role: "--param-server-instance-type", Instance: c.psInstance}}})
	return err
}

// single estimates a run of wall time in this process.
func (c *costOptions) single(wall time.Duration) (cost.Breakdown, error) {
	return cost.Default.Estimate(cost.Usage{Wall: wall, Servers: []cost.Servers{{Role: "trainer", Instance: c.instance, Count: 1}}})
}

// distributed estimates runs of wall time in all on d's servers, whose tensor backends did
// what usage says.
func (c *costOptions) distributed(wall time.Duration, d distOptions, usage []backendUsage) (cost.Breakdown, error) {
	u := cost.Usage{Wall: wall, LambdaMemoryMB: c.lambdaMemoryMB, KnativeInstance: c.instance, Servers: []cost.Servers{
		{Role: "graph servers", Instance: c.instance, Count: d.graphServers},
		{Role: "parameter servers", Instance: c.psInstance, Count: d.paramServers}}}
	for _, b := range usage {
		calls := &u.Lambda
		switch b.Backend {
		case jobconfig.BackendLambda:
		case jobconfig.BackendKnative:
			calls = &u.Knative
		default:
			continue
		}
		calls.Requests += b.Tries
		calls.Billed += time.Duration(b.BilledSeconds * float64(time.Second))
	}
	return cost.Default.Estimate(u)
}

// reportCost puts an estimate into the report and says it on log.
func reportCost(rep *trainReport, b cost.Breakdown, log io.Writer) {
	rep.CostUSD, rep.Cost = b.TotalUSD, &b
	fmt.Fprintf(log, "estimated cost: $%.6f", b.TotalUSD)
	for _, it := range b.Items {
		fmt.Fprintf(log, "; %s $%.6f", it.Name, it.USD)
	}
	fmt.Fprintln(log)
}
