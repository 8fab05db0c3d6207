package pipeline

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// GradientFlow says which backward task reads other intervals' gradient rows.
type GradientFlow uint8

const (
	// PushGradients is pkg/model's cut, the mirror image of the forward pass: ∇GA_l of interval k
	// scatters Âᵀ dZ_l contributions into the dP_l rows of the intervals k read in GA_l (ghost
	// rows included), ∇SC_l sends the ghost rows' sums to their owners, and ∇AV_l of interval j
	// reads the contributions of every interval that reads j. ∇GA_l only needs the interval's
	// own dZ_l.
	PushGradients GradientFlow = iota
	// PullGradients makes ∇GA_l of interval j read the dZ_l rows of every interval that reads j,
	// as soon as they have produced them (at AV_L for l = L-1, at ∇AV_{l+1} otherwise); the
	// caller ships dZ rows to ghosts before it reports that task done, and ∇SC_l reads nothing.
	PullGradients
)

// String returns "push" or "pull".
func (g GradientFlow) String() string {
	switch g {
	case PushGradients:
		return "push"
	case PullGradients:
		return "pull"
	}
	return fmt.Sprintf("GradientFlow(%d)", uint8(g))
}

// ErrConfig is wrapped by every error New returns for an invalid Config.
var ErrConfig = errors.New("invalid pipeline config")

// Config describes one training run's pipeline.
type Config struct {
	// Partitions is the number of graph servers P (≥ 1).
	Partitions int
	// Intervals is the number of intervals of every partition (≥ 1); ignored when IntervalsOf
	// is set.
	Intervals int
	// IntervalsOf, when not nil, gives the number of intervals of each partition (len
	// Partitions, each ≥ 1).
	IntervalsOf []int
	// Layers is the number of weight matrices L (≥ 1).
	Layers int
	// Epochs is the number of epochs to run (≥ 1); StopAfter can end the run earlier.
	Epochs int
	// FirstEpoch is the epoch the run starts at (0 ≤ FirstEpoch < Epochs): a run resumed from
	// a checkpoint taken after FirstEpoch epochs. In synchronous mode the weight version starts
	// at FirstEpoch too, the version a checkpoint of that epoch holds.
	FirstEpoch int
	// Staleness is synchronous training — a barrier after every SC_l (and every gradient
	// exchange), one weight update per epoch — or the bound S ≥ 0 of asynchronous mode: no
	// interval starts epoch e unless e ≤ LowestUnfinished() + S.
	Staleness jobconfig.Staleness
	// DrainEvery, N ≥ 1 in asynchronous mode, drains the pipeline every N epochs: no interval
	// starts an epoch that is a multiple of N until every interval has finished the epoch
	// before it, so that the weights are those after a common epoch boundary, where a
	// checkpoint can be taken. It only tightens the epoch gate (S = 0 drains every epoch
	// anyway); 0 never drains. Synchronous mode ignores it.
	DrainEvery int
	// Reads maps an interval to the intervals whose rows its GA reads (its in-neighbour
	// intervals in Â, itself included if it has self-loops). An interval missing from the map,
	// or a nil map, reads every interval of every partition. Duplicates are ignored.
	Reads map[IntervalID][]IntervalID
	// Gradients says which backward task reads other intervals' gradient rows.
	Gradients GradientFlow
	// Local lists the partitions whose tasks this scheduler runs (Ready, Start, Done); the
	// others' progress is reported with Observe. Nil means every partition; an empty non-nil
	// slice means none (a scheduler that only tracks the epoch gate from observed progress).
	Local []int
	// ExternalVersions makes the caller the source of weight versions (SetWeightVersion), as a
	// graph server of a multi-server asynchronous run must, since only the parameter server
	// sees every update in order. Otherwise the scheduler counts versions itself from 0: one per
	// WU done in asynchronous mode, one per epoch (when every interval's WU of it is done) in
	// synchronous mode.
	ExternalVersions bool
	// TailOverlap lets an interval start epoch e+1 once its forward pass of epoch e (up to the
	// loss, AV_L) is done, while the tail of epoch e — the backward pass and WU — still runs, so
	// that the two passes' tensor tasks and the weight push overlap. It takes effect only in
	// asynchronous mode with Staleness ≥ 1, where the epoch gate already lets an interval run one
	// epoch ahead of the lowest unfinished one; it changes no bound. The caller must keep what
	// the tail reads apart from what the next forward pass writes (Z_l and activations, per
	// epoch parity).
	TailOverlap bool
}

// intervalCounts returns the number of intervals of each partition.
func (c *Config) intervalCounts() []int {
	if c.IntervalsOf != nil {
		return c.IntervalsOf
	}
	counts := make([]int, c.Partitions)
	for p := range counts {
		counts[p] = c.Intervals
	}
	return counts
}

// Validate reports the first problem with c, wrapping ErrConfig.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if c.Partitions < 1 {
		return bad("partitions %d, want at least 1", c.Partitions)
	}
	if c.IntervalsOf != nil {
		if len(c.IntervalsOf) != c.Partitions {
			return bad("IntervalsOf has %d entries for %d partitions", len(c.IntervalsOf), c.Partitions)
		}
		for p, n := range c.IntervalsOf {
			if n < 1 {
				return bad("partition %d has %d intervals, want at least 1", p, n)
			}
		}
	} else if c.Intervals < 1 {
		return bad("intervals %d per partition, want at least 1", c.Intervals)
	}
	total := 0
	for _, n := range c.intervalCounts() {
		total += n
		if total > math.MaxInt32 {
			return bad("more than %d intervals in all", math.MaxInt32)
		}
	}
	if c.Layers < 1 {
		return bad("layers %d, want at least 1", c.Layers)
	}
	if c.Layers > math.MaxInt32/8 {
		return bad("layers %d, want at most %d", c.Layers, math.MaxInt32/8)
	}
	if c.Epochs < 1 {
		return bad("epochs %d, want at least 1", c.Epochs)
	}
	if c.Epochs > math.MaxInt32-1 {
		return bad("epochs %d, want at most %d", c.Epochs, math.MaxInt32-1)
	}
	if c.FirstEpoch < 0 || c.FirstEpoch >= c.Epochs {
		return bad("first epoch %d, want 0..%d", c.FirstEpoch, c.Epochs-1)
	}
	if c.DrainEvery < 0 {
		return bad("drain every %d epochs, want at least 0", c.DrainEvery)
	}
	if c.Gradients != PushGradients && c.Gradients != PullGradients {
		return bad("unknown gradient flow %v", c.Gradients)
	}
	counts := c.intervalCounts()
	valid := func(id IntervalID) bool {
		return id.Partition >= 0 && id.Partition < c.Partitions && id.Interval >= 0 && id.Interval < counts[id.Partition]
	}
	// Map order is random; report the smallest bad key so the message is deterministic.
	var badKeys []IntervalID
	for id, srcs := range c.Reads {
		if !valid(id) {
			badKeys = append(badKeys, id)
			continue
		}
		for _, src := range srcs {
			if !valid(src) {
				badKeys = append(badKeys, id)
				break
			}
		}
	}
	if len(badKeys) > 0 {
		slices.SortFunc(badKeys, compareIDs)
		id := badKeys[0]
		if !valid(id) {
			return bad("Reads has interval %v, which does not exist", id)
		}
		for _, src := range c.Reads[id] {
			if !valid(src) {
				return bad("Reads[%v] has interval %v, which does not exist", id, src)
			}
		}
	}
	seen := make([]bool, c.Partitions)
	for _, p := range c.Local {
		if p < 0 || p >= c.Partitions {
			return bad("local partition %d, want 0..%d", p, c.Partitions-1)
		}
		if seen[p] {
			return bad("local partition %d listed twice", p)
		}
		seen[p] = true
	}
	return nil
}

func compareIDs(a, b IntervalID) int {
	if a.Partition != b.Partition {
		return a.Partition - b.Partition
	}
	return a.Interval - b.Interval
}
