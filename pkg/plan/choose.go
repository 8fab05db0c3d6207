package plan

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// Space is the set of configurations the planner weighs.
type Space struct {
	Backends     []Backend
	GraphServers []int // counts of graph servers
	Intervals    []int // intervals per graph server
	// ConcurrencyPerInterval are the functions' concurrencies, as multiples of the intervals
	// (1: a call per interval; 2: also the next epoch's with staleness 1).
	ConcurrencyPerInterval []int
	MemoriesMB             []int               // Lambda's function memories
	Staleness              jobconfig.Staleness // every configuration's staleness bound S
	// UpdateEvery is every configuration's update granularity (its zero value: an update per
	// graph server per epoch, the default of a run).
	UpdateEvery jobconfig.UpdateEvery
	// Placement is every configuration's placement of the tensor tasks (Config.Placement;
	// dorylus plan's default is a run's, jobconfig.PlacementAuto).
	Placement string
}

// DefaultSpace is the space dorylus plan searches: 1 to 16 graph servers, 1 to 32 intervals,
// Lambda memories from one vCPU's worth to the most, and staleness 1.
var DefaultSpace = Space{
	Backends:               []Backend{CPU, Lambda, Knative},
	GraphServers:           []int{1, 2, 4, 8, 16},
	Intervals:              []int{1, 2, 4, 8, 16, 32},
	ConcurrencyPerInterval: []int{1, 2},
	MemoriesMB:             []int{1769, 3008, 5120, 10240},
	Staleness:              jobconfig.Bounded(1),
}

// Configs returns every configuration of s.
func (s Space) Configs() []Config {
	var out []Config
	for _, b := range s.Backends {
		for _, p := range s.GraphServers {
			for _, i := range s.Intervals {
				c := Config{Backend: b, GraphServers: p, Intervals: i, Staleness: s.Staleness, UpdateEvery: s.UpdateEvery, Placement: s.Placement}
				switch b {
				case CPU:
					out = append(out, c)
				case Knative:
					for _, k := range s.ConcurrencyPerInterval {
						c.Concurrency = k * i
						out = append(out, c)
					}
				case Lambda:
					for _, k := range s.ConcurrencyPerInterval {
						for _, mem := range s.MemoriesMB {
							c.Concurrency, c.MemoryMB = k*i, mem
							out = append(out, c)
						}
					}
				}
			}
		}
	}
	return out
}

// Objective is what the chooser maximises among the configurations that meet the goal.
type Objective string

// The objectives: the most epochs per dollar, or the shortest run.
const (
	Value Objective = "value"
	Time  Objective = "time"
)

// Goal is what a run must meet: Epochs epochs within Deadline and BudgetUSD (0: no limit).
type Goal struct {
	Epochs    int
	Deadline  time.Duration
	BudgetUSD float64
	Objective Objective
}

// Validate checks the goal.
func (g Goal) Validate() error {
	switch {
	case g.Epochs < 1:
		return fmt.Errorf("%w: %d epochs: want at least 1", ErrConfig, g.Epochs)
	case g.Deadline < 0 || g.BudgetUSD < 0 || math.IsNaN(g.BudgetUSD):
		return fmt.Errorf("%w: deadline %v, budget %v USD: want no negative limit", ErrConfig, g.Deadline, g.BudgetUSD)
	case g.Objective != Value && g.Objective != Time:
		return fmt.Errorf("%w: objective %q: want value or time", ErrConfig, g.Objective)
	}
	return nil
}

// Pricing prices the configurations: the graph servers' and the parameter servers'
// instance types (a Knative call is priced as one vCPU of the graph servers' type).
type Pricing struct {
	Prices                  cost.Prices
	GraphServerInstance     string
	ParameterServerInstance string
	ParameterServers        int
}

// Option is a configuration with its prediction and price.
type Option struct {
	Config       Config     `json:"config"`
	Prediction   Prediction `json:"prediction"`
	TotalSeconds float64    `json:"totalSeconds"`
	CostUSD      float64    `json:"costUSD"`
	EpochsPerUSD float64    `json:"epochsPerUSD"`
	// GraphServerBytes is the predicted memory of the heaviest graph server; Fits says
	// whether it fits the machine (no configuration that does not meets the goal).
	GraphServerBytes float64 `json:"graphServerBytes"`
	Fits             bool    `json:"fits"`
	Meets            bool    `json:"meetsGoal"`
}

// Choose predicts and prices every configuration of s for w and g on machine m (its
// ServerCores and ServerMemoryBytes are those of the graph servers' instance type unless it
// shares cores), and returns them best first: those that meet the goal, by the objective, then the rest by
// value. best is false when none meets the goal.
func Choose(w Workload, s Space, m Machine, cal Calibration, pr Pricing, g Goal) (opts []Option, best bool, err error) {
	if err := g.Validate(); err != nil {
		return nil, false, err
	}
	gs, okGS := pr.Prices.Instances[pr.GraphServerInstance]
	ps, okPS := pr.Prices.Instances[pr.ParameterServerInstance]
	if !okGS || !okPS {
		return nil, false, fmt.Errorf("%w: instance types %q, %q: each needs a price", ErrConfig, pr.GraphServerInstance, pr.ParameterServerInstance)
	}
	if m.SharedCores == 0 {
		m.ServerCores, m.ParamServerCores = gs.VCPUs, ps.VCPUs*pr.ParameterServers
		m.ServerMemoryBytes = gs.MemoryGiB * (1 << 30)
	}
	for _, c := range s.Configs() {
		p, err := Predict(w, c, m, cal)
		if err != nil {
			return nil, false, err
		}
		o := Option{Config: c, Prediction: p, TotalSeconds: p.EpochSeconds * float64(g.Epochs)}
		if o.CostUSD, err = pr.price(c, p, o.TotalSeconds, g.Epochs); err != nil {
			return nil, false, err
		}
		o.EpochsPerUSD = float64(g.Epochs) / o.CostUSD
		o.GraphServerBytes = w.GraphServerBytes(c)
		o.Fits = m.fits(c.GraphServers, o.GraphServerBytes)
		o.Meets = o.Fits && (g.Deadline == 0 || o.TotalSeconds <= g.Deadline.Seconds()) && (g.BudgetUSD == 0 || o.CostUSD <= g.BudgetUSD)
		opts = append(opts, o)
	}
	slices.SortStableFunc(opts, func(a, b Option) int {
		if a.Meets != b.Meets {
			if a.Meets {
				return -1
			}
			return 1
		}
		if a.Meets && g.Objective == Time {
			return cmp.Or(cmp.Compare(a.TotalSeconds, b.TotalSeconds), cmp.Compare(a.CostUSD, b.CostUSD))
		}
		return cmp.Or(cmp.Compare(b.EpochsPerUSD, a.EpochsPerUSD), cmp.Compare(a.TotalSeconds, b.TotalSeconds))
	})
	return opts, len(opts) > 0 && opts[0].Meets, nil
}

// price returns the cost of a run of epochs epochs in configuration c, total seconds long.
func (pr Pricing) price(c Config, p Prediction, total float64, epochs int) (float64, error) {
	u := cost.Usage{
		Wall: time.Duration(total * float64(time.Second)),
		Servers: []cost.Servers{
			{Role: "graph servers", Instance: pr.GraphServerInstance, Count: c.GraphServers},
			{Role: "parameter servers", Instance: pr.ParameterServerInstance, Count: pr.ParameterServers},
		},
	}
	calls := p.Calls * float64(epochs)
	billed := cost.Calls{
		Requests: int64(math.Ceil(calls)),
		Billed:   time.Duration(calls * math.Ceil(p.CallSeconds*1e3) * float64(time.Millisecond)),
	}
	switch c.Backend {
	case Lambda:
		u.Lambda, u.LambdaMemoryMB = billed, c.MemoryMB
	case Knative:
		u.Knative, u.KnativeInstance = billed, pr.GraphServerInstance
	}
	b, err := pr.Prices.Estimate(u)
	return b.TotalUSD, err
}

// Validate checks that s has at least one configuration and no invalid value.
func (s Space) Validate() error {
	lists := map[string][]int{"graph servers": s.GraphServers, "intervals": s.Intervals,
		"concurrencies per interval": s.ConcurrencyPerInterval, "memories": s.MemoriesMB}
	for name, l := range lists {
		if len(l) == 0 || slices.Min(l) < 1 {
			return fmt.Errorf("%w: %s %v: want at least one, each at least 1", ErrConfig, name, l)
		}
	}
	if s.Staleness.Sync() {
		return fmt.Errorf("%w: staleness %v: the synchronous mode is not modelled, want a bound S", ErrConfig, s.Staleness)
	}
	if len(s.Backends) == 0 {
		return fmt.Errorf("%w: no backend: want cpu, lambda or knative", ErrConfig)
	}
	if s.Placement != "" && s.Placement != jobconfig.PlacementAuto && s.Placement != jobconfig.PlacementRemote {
		return fmt.Errorf("%w: placement %q: want %s or %s", ErrConfig, s.Placement, jobconfig.PlacementAuto, jobconfig.PlacementRemote)
	}
	for _, b := range s.Backends {
		if b != CPU && b != Lambda && b != Knative {
			return fmt.Errorf("%w: backend %q: want cpu, lambda or knative", ErrConfig, b)
		}
	}
	return nil
}
