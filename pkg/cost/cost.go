// Package cost estimates what a training run costs on AWS, as the Dorylus paper counts it:
// the on-demand hours of the server instances (graph and parameter servers) for as long as
// the run holds them, plus the tensor calls — Lambda's per-request fee and its GB-seconds
// (billed duration × configured memory), or, for Knative, the vCPU-seconds of the nodes the
// function runs on. The prices live in one table, Default, with their date and source;
// callers feed it measured call counts and durations.
package cost

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Instance is an EC2 instance type's size and hourly price.
type Instance struct {
	VCPUs     int     `json:"vcpus"`
	MemoryGiB float64 `json:"memoryGiB"`
	HourUSD   float64 `json:"hourUSD"`
}

// Prices is a price list.
type Prices struct {
	// Source says where the prices come from.
	Source string `json:"source"`
	// AsOf is when the prices were read off their source: a year or a date (YYYY-MM-DD).
	AsOf string `json:"asOf"`
	// LambdaGBSecondUSD is the price of one GB-second of Lambda duration.
	LambdaGBSecondUSD float64 `json:"lambdaGBSecondUSD"`
	// LambdaRequestUSD is the price of one Lambda request.
	LambdaRequestUSD float64 `json:"lambdaRequestUSD"`
	// Instances are the known instance types by name.
	Instances map[string]Instance `json:"instances"`
}

// Default is the price list of AWS us-east-1: on-demand Linux instances and Lambda on x86
// (first pricing tier, no free tier), from aws.amazon.com/ec2/pricing/on-demand and
// aws.amazon.com/lambda/pricing as listed in 2024 (these rates were unchanged from 2020 to
// 2024). Check them before quoting a figure.
var Default = Prices{
	Source:            "AWS us-east-1 on-demand Linux and Lambda x86 prices as listed in 2024 (aws.amazon.com/ec2/pricing/on-demand, aws.amazon.com/lambda/pricing)",
	AsOf:              "2024",
	LambdaGBSecondUSD: 0.0000166667,
	LambdaRequestUSD:  0.20 / 1e6,
	Instances: map[string]Instance{
		"c5.xlarge":   {4, 8, 0.17},
		"c5.2xlarge":  {8, 16, 0.34},
		"c5.4xlarge":  {16, 32, 0.68},
		"c5n.xlarge":  {4, 10.5, 0.216},
		"c5n.2xlarge": {8, 21, 0.432},
		"c5n.4xlarge": {16, 42, 0.864},
		"m5.xlarge":   {4, 16, 0.192},
		"m5.2xlarge":  {8, 32, 0.384},
		"r5.xlarge":   {4, 32, 0.252},
		"r5.2xlarge":  {8, 64, 0.504},
		"g4dn.xlarge": {4, 16, 0.526},
		"p3.2xlarge":  {8, 61, 3.06},
	},
}

// The instance types a run is priced with when none is given: those of the paper's graph
// servers (network-optimised) and of a small parameter server.
const (
	DefaultGraphServerInstance     = "c5n.2xlarge"
	DefaultParameterServerInstance = "c5.xlarge"
)

// Servers are Count servers of one role on one instance type.
type Servers struct {
	Role     string // e.g. "graph servers"
	Instance string // an instance type of the price list
	Count    int
}

// Calls are the tensor calls of a run.
type Calls struct {
	Requests int64         // calls sent, retries and relaunches included
	Billed   time.Duration // their summed duration, each rounded up to a millisecond
	// Local are the tensor tasks placement ran in the graph servers instead (pkg/dispatch,
	// Placement): their time is the graph servers' instance-hours, so their line costs 0.
	Local int64
}

// Usage is what a run used.
type Usage struct {
	// Wall is how long the servers were held.
	Wall    time.Duration
	Servers []Servers
	// Lambda are the Lambda calls, of a function with LambdaMemoryMB of memory.
	Lambda         Calls
	LambdaMemoryMB int
	// Knative are the Knative calls; each is priced as one vCPU of KnativeInstance for its
	// duration.
	Knative         Calls
	KnativeInstance string
}

// Item is one line of a cost breakdown.
type Item struct {
	Name     string  `json:"name"`
	Quantity float64 `json:"quantity"`
	Unit     string  `json:"unit"`
	UnitUSD  float64 `json:"unit_usd"`
	USD      float64 `json:"usd"`
}

// Breakdown is an estimate: its total and the lines it sums.
type Breakdown struct {
	TotalUSD float64 `json:"total_usd"`
	Prices   string  `json:"prices"`
	Items    []Item  `json:"items"`
}

// instance returns the named instance type, or an error listing the known ones.
func (p Prices) instance(name, what string) (Instance, error) {
	in, ok := p.Instances[name]
	if !ok {
		known := make([]string, 0, len(p.Instances))
		for n := range p.Instances {
			known = append(known, n)
		}
		slices.Sort(known)
		return Instance{}, fmt.Errorf("cost: %s instance type %q: no price known (known: %s)", what, name, strings.Join(known, ", "))
	}
	return in, nil
}

// Estimate prices a run's usage. Lines with nothing used are left out.
func (p Prices) Estimate(u Usage) (Breakdown, error) {
	b := Breakdown{Prices: p.Source + ", as of " + p.AsOf}
	add := func(name string, q float64, unit string, price float64) {
		if q > 0 {
			b.Items = append(b.Items, Item{Name: name, Quantity: q, Unit: unit, UnitUSD: price, USD: q * price})
		}
	}
	switch {
	case u.Wall < 0:
		return b, fmt.Errorf("cost: negative wall time %v", u.Wall)
	case u.Lambda.Requests < 0 || u.Lambda.Billed < 0 || u.Knative.Requests < 0 || u.Knative.Billed < 0 || u.Lambda.Local < 0 || u.Knative.Local < 0:
		return b, fmt.Errorf("cost: negative call counts %+v, %+v", u.Lambda, u.Knative)
	case u.Lambda.Requests > 0 && u.LambdaMemoryMB < 128:
		return b, fmt.Errorf("cost: Lambda memory %d MB: want at least 128", u.LambdaMemoryMB)
	}
	for _, s := range u.Servers {
		in, err := p.instance(s.Instance, s.Role)
		if err != nil {
			return b, err
		}
		add(fmt.Sprintf("%s (%d × %s)", s.Role, s.Count, s.Instance), float64(s.Count)*u.Wall.Hours(), "instance-hours", in.HourUSD)
	}
	add("lambda requests", float64(u.Lambda.Requests), "requests", p.LambdaRequestUSD)
	add(fmt.Sprintf("lambda duration (%d MB)", u.LambdaMemoryMB), u.Lambda.Billed.Seconds()*float64(u.LambdaMemoryMB)/1024, "GB-seconds", p.LambdaGBSecondUSD)
	if u.Knative.Billed > 0 {
		in, err := p.instance(u.KnativeInstance, "knative node")
		if err != nil {
			return b, err
		}
		add(fmt.Sprintf("knative calls (one vCPU of %s each)", u.KnativeInstance), u.Knative.Billed.Seconds(), "vCPU-seconds", in.HourUSD/float64(in.VCPUs)/3600)
	}
	add("tensor tasks run in the graph servers (in their instance-hours)", float64(u.Lambda.Local+u.Knative.Local), "tasks", 0)
	for _, it := range b.Items {
		b.TotalUSD += it.USD
	}
	return b, nil
}
