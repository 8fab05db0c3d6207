package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/backends"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// defaultLambdaMemoryMB is --lambda-memory-mb's default, the memory of the paper's functions.
const defaultLambdaMemoryMB = 3008

// costOptions are the flags of dorylus train's cost estimate (pkg/cost).
type costOptions struct {
	instance, psInstance string
	lambdaMemoryMB       int
	pricesFile           string
}

// defaultCostOptions are the cost flags' defaults, for runs that take no cost flags (predict).
func defaultCostOptions() costOptions {
	return costOptions{instance: cost.DefaultGraphServerInstance, psInstance: cost.DefaultParameterServerInstance, lambdaMemoryMB: defaultLambdaMemoryMB}
}

// addFlags registers the cost flags.
func (c *costOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.instance, "instance-type", cost.DefaultGraphServerInstance, "cost estimate: EC2 instance type of this process, or of each graph server (and of the nodes of a knative function)")
	f.StringVar(&c.psInstance, "param-server-instance-type", cost.DefaultParameterServerInstance, "cost estimate: EC2 instance type of each parameter server")
	f.IntVar(&c.lambdaMemoryMB, "lambda-memory-mb", defaultLambdaMemoryMB, "cost estimate: memory configured for the Lambda function")
	f.StringVar(&c.pricesFile, "prices", "", "cost estimate: JSON price list over the built-in one (pkg/cost: spot prices, discounts, another region)")
}

// list returns the price list: the built-in one, or --prices over it.
func (c *costOptions) list() (cost.Prices, error) {
	if c.pricesFile == "" {
		return cost.Default, nil
	}
	f, err := os.Open(c.pricesFile)
	if err != nil {
		return cost.Prices{}, fmt.Errorf("--prices: %w", err)
	}
	defer f.Close()
	p, err := cost.ReadPrices(f)
	if err != nil {
		return cost.Prices{}, fmt.Errorf("--prices %s: %w", c.pricesFile, err)
	}
	return p, nil
}

// validate checks the price list and that the instance types have prices.
func (c *costOptions) validate() error {
	if err := jobconfig.Limits.LambdaMemoryMB.Check("--lambda-memory-mb", c.lambdaMemoryMB); err != nil {
		return err
	}
	p, err := c.list()
	if err != nil {
		return err
	}
	_, err = p.Estimate(cost.Usage{LambdaMemoryMB: c.lambdaMemoryMB, Lambda: cost.Calls{Requests: 1},
		Servers: []cost.Servers{{Role: "--instance-type", Instance: c.instance}, {Role: "--param-server-instance-type", Instance: c.psInstance}}})
	return err
}

// config returns the run config's cost section.
func (c *costOptions) config() (*jobconfig.Cost, error) {
	out := &jobconfig.Cost{GraphServerInstance: c.instance, ParameterServerInstance: c.psInstance}
	if c.pricesFile != "" {
		p, err := c.list()
		if err != nil {
			return nil, err
		}
		out.Prices = &p
	}
	return out, nil
}

// single estimates a run of wall time in this process.
func (c *costOptions) single(wall time.Duration) (cost.Breakdown, error) {
	p, err := c.list()
	if err != nil {
		return cost.Breakdown{}, err
	}
	return p.Estimate(cost.Usage{Wall: wall, Servers: []cost.Servers{{Role: "trainer", Instance: c.instance, Count: 1}}})
}

// distributed estimates runs of wall time in all on d's servers, whose tensor backends did
// what usage says, as graph server 0 prices them (jobconfig.RunConfig.CostRun).
func (c *costOptions) distributed(wall time.Duration, d distOptions, usage []backends.Usage) (cost.Breakdown, error) {
	section, err := c.config()
	if err != nil {
		return cost.Breakdown{}, err
	}
	cfg := jobconfig.RunConfig{Cost: section, Backend: d.backend.ToConfig(d.intervals, c.lambdaMemoryMB),
		GraphServers: jobconfig.GraphServers{Replicas: d.graphServers}, ParameterServers: jobconfig.ParameterServers{Replicas: d.paramServers}}
	var calls cost.Calls
	for _, b := range usage {
		calls.Requests += b.Tries
		calls.Billed += time.Duration(b.BilledSeconds * float64(time.Second))
		calls.Local += b.LocalTasks
	}
	return cfg.CostRun().At(wall, calls)
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
