package pipeline

import "fmt"

// Kind names one task of an interval's epoch, in pipeline order. It mirrors model.TaskKind
// (pkg/model) without importing it: KindAV = TaskAV, KindSC = TaskSC, KindGA = TaskGA,
// KindBackGA = TaskBackGA, KindBackSC = TaskBackSC, KindBackAV = TaskBackAV, KindWU = TaskWU.
// GAT's AE and ∇AE are not scheduled here: a graph server runs them inside GA and ∇GA.
type Kind uint8

// The kinds of task, in the order they first occur in an epoch.
const (
	KindAV     Kind = iota // ApplyVertex AV_l (worker); AV_L is the loss and also does ∇AV_L
	KindSC                 // Scatter SC_l: send the interval's new P_l rows to their ghosts
	KindGA                 // Gather GA_l: Z_l = Â P_l on the interval's rows; reads neighbours' P_l
	KindBackGA             // ∇GA_l: Âᵀ dZ_l from the interval's dZ_l rows
	KindBackSC             // ∇SC_l: send the dP_l rows of ghosts back to their owners
	KindBackAV             // ∇AV_l: dW_l and dZ_{l-1} from dP_l (worker)
	KindWU                 // WeightUpdate: hand the interval's dW to the parameter server
	numKinds
)

var kindNames = [...]string{"AV", "SC", "GA", "∇GA", "∇SC", "∇AV", "WU"}

// String returns the kind's name as the paper writes it.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// IsTensor reports whether the kind runs on a tensor worker (AV, ∇AV) rather than on a graph
// server or the parameter server.
func (k Kind) IsTensor() bool { return k == KindAV || k == KindBackAV }

// IntervalID names an interval: its partition (graph server) and its index within the partition.
type IntervalID struct {
	Partition int
	Interval  int
}

// String returns "p<partition>/i<interval>".
func (id IntervalID) String() string { return fmt.Sprintf("p%d/i%d", id.Partition, id.Interval) }

// Task is one task of one interval in one epoch. Layer is the weight-matrix index l of the
// task's name (AV_l, GA_l, ∇AV_l, ...); AV at Layer == Layers is the output layer's loss, and WU
// has Layer 0. Task is comparable and can be a map key.
type Task struct {
	Partition int
	Interval  int
	Epoch     int
	Layer     int
	Kind      Kind
}

// ID returns the interval the task belongs to.
func (t Task) ID() IntervalID { return IntervalID{t.Partition, t.Interval} }

// String returns e.g. "p0/i3 e2 GA_1" (WU has no layer suffix).
func (t Task) String() string {
	if t.Kind == KindWU {
		return fmt.Sprintf("p%d/i%d e%d WU", t.Partition, t.Interval, t.Epoch)
	}
	return fmt.Sprintf("p%d/i%d e%d %v_%d", t.Partition, t.Interval, t.Epoch, t.Kind, t.Layer)
}

// Step is a position in an interval's epoch: a kind and a layer.
type Step struct {
	Kind  Kind
	Layer int
}

// String returns e.g. "GA_1" or "WU".
func (s Step) String() string {
	if s.Kind == KindWU {
		return "WU"
	}
	return fmt.Sprintf("%v_%d", s.Kind, s.Layer)
}

// Sequence returns the steps of one interval's epoch for a model with the given number of
// weight matrices, in the order they run:
//
//	AV_0 SC_0 GA_0 AV_1 SC_1 GA_1 … GA_{L-1} AV_L ∇GA_{L-1} ∇SC_{L-1} ∇AV_{L-1} … ∇GA_0 ∇SC_0 ∇AV_0 WU
//
// It has 6·layers + 2 steps; it returns nil when layers < 1.
func Sequence(layers int) []Step {
	if layers < 1 {
		return nil
	}
	seq := make([]Step, 0, 6*layers+2)
	for l := 0; l < layers; l++ {
		seq = append(seq, Step{KindAV, l}, Step{KindSC, l}, Step{KindGA, l})
	}
	seq = append(seq, Step{KindAV, layers})
	for l := layers - 1; l >= 0; l-- {
		seq = append(seq, Step{KindBackGA, l}, Step{KindBackSC, l}, Step{KindBackAV, l})
	}
	return append(seq, Step{KindWU, 0})
}

// stepIndex returns the position of (kind, layer) in Sequence(layers), or -1 when the pair does
// not occur in it.
func stepIndex(k Kind, layer, layers int) int {
	switch k {
	case KindAV:
		if layer >= 0 && layer <= layers {
			return 3 * layer
		}
	case KindSC, KindGA:
		if layer >= 0 && layer < layers {
			return 3*layer + int(k-KindAV)
		}
	case KindBackGA, KindBackSC, KindBackAV:
		if layer >= 0 && layer < layers {
			return 3*layers + 1 + 3*(layers-1-layer) + int(k-KindBackGA)
		}
	case KindWU:
		if layer == 0 {
			return 6*layers + 1
		}
	}
	return -1
}

// NoWeights is Started.Weights for a task that uses no weights.
const NoWeights = -1

// Read is one neighbour interval's rows as a task reads them: the epoch that produced them.
type Read struct {
	From  IntervalID
	Epoch int
}

// Started is what Start returns: what the task must read.
type Started struct {
	Task Task
	// Weights is the weight version the task must use: the version the interval pinned at its
	// epoch's AV_0, for AV_l (l < Layers), ∇AV_l and WU (whose gradients were computed against
	// it); NoWeights for every other task.
	Weights int
	// Reads lists, for the task that reads other intervals' rows, the epoch of the rows it must
	// read from each of them, in global interval order: GA_l reads the P_l rows of its sources
	// (Config.Reads); with PushGradients ∇AV_l reads the dP_l contributions of the intervals that
	// read it, with PullGradients ∇GA_l reads their dZ_l rows. Nil for every other task.
	Reads []Read
}
