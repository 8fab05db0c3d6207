package plan

import (
	"errors"
	"fmt"
	"math"
)

// Architecture is a model's kind.
type Architecture string

// The architectures the planner models. SAGE is GraphSAGE with the mean aggregator: a GCN's
// pipeline and buffers with W = [W_self; W_neigh], 2·w[l-1] × w[l], each tensor task a GCN op
// per half.
const (
	GCN  Architecture = "gcn"
	GAT  Architecture = "gat"
	SAGE Architecture = "sage"
)

// Model is the network trained.
type Model struct {
	Architecture Architecture
	Layers       int
	Hidden       int // width of a hidden layer (GAT: per head)
	Heads        int // GAT: heads of a hidden layer; ignored for GCN and SAGE
}

// halves returns the weight halves of each layer, the GCN ops of each tensor task: 2 for
// GraphSAGE (W_self and W_neigh), 1 for the others.
func (m Model) halves() int {
	if m.Architecture == SAGE {
		return 2
	}
	return 1
}

// Workload is a dataset and the model trained on it.
type Workload struct {
	Vertices int64
	Entries  int64 // adjacency entries: both directions of every undirected edge
	Features int
	// FeatureEntries is the count of non-zero features when they are stored sparse (0: dense).
	FeatureEntries int64
	Classes        int
	Model          Model
	// Cuts gives, by number of parts, the heaviest part of a measured edge cut; a part
	// count it lacks is estimated (EstimatePart).
	Cuts map[int]Part
}

// Part is the heaviest part of an edge cut into P parts: what its graph server holds.
type Part struct {
	Vertices int64 // vertices it owns
	Entries  int64 // entries of its rows of Â, self loops included
	Ghosts   int64 // vertices of other parts its rows reach
}

// ErrWorkload is wrapped by the errors of an invalid workload.
var ErrWorkload = errors.New("plan: invalid workload")

// Validate checks that the workload can be modelled.
func (w Workload) Validate() error {
	switch {
	case w.Vertices < 1 || w.Entries < 0 || w.FeatureEntries < 0:
		return fmt.Errorf("%w: %d vertices, %d entries: want at least one vertex and no negative count", ErrWorkload, w.Vertices, w.Entries)
	case w.Features < 1 || w.Classes < 1:
		return fmt.Errorf("%w: %d features, %d classes: want at least 1 of each", ErrWorkload, w.Features, w.Classes)
	case w.Model.Architecture != GCN && w.Model.Architecture != GAT && w.Model.Architecture != SAGE:
		return fmt.Errorf("%w: model %q: want gcn, gat or sage", ErrWorkload, w.Model.Architecture)
	case w.Model.Layers < 1 || w.Model.Hidden < 1:
		return fmt.Errorf("%w: %d layers of width %d: want at least 1 of each", ErrWorkload, w.Model.Layers, w.Model.Hidden)
	case w.Model.Architecture == GAT && w.Model.Heads < 1:
		return fmt.Errorf("%w: gat with %d heads: want at least 1", ErrWorkload, w.Model.Heads)
	}
	return nil
}

// widths returns the widths of the layers' inputs and outputs: w[0] the features, w[L]
// the classes. A GAT hidden layer's output is its heads concatenated.
func (w Workload) widths() []int {
	m := w.Model
	hidden := m.Hidden
	if m.Architecture == GAT {
		hidden *= m.Heads
	}
	ws := make([]int, m.Layers+1)
	ws[0], ws[m.Layers] = w.Features, w.Classes
	for l := 1; l < m.Layers; l++ {
		ws[l] = hidden
	}
	return ws
}

// Weights returns the elements of the model's weights, as the parameter servers hold them: a
// GCN's w[l-1]·w[l] per layer, a GraphSAGE's twice that ([W_self; W_neigh]), a GAT's its
// heads' weights (its attention vectors, 2 per head, left out).
func (w Workload) Weights() float64 {
	ws := w.widths()
	var n float64
	for l := 1; l < len(ws); l++ {
		n += float64(ws[l-1]) * float64(ws[l])
	}
	return float64(w.Model.halves()) * n
}

// Part returns the heaviest part of a cut into parts: the measured one, or an estimate.
func (w Workload) Part(parts int) Part {
	if p, ok := w.Cuts[parts]; ok {
		return p
	}
	return EstimatePart(w.Vertices, w.Entries, parts)
}

// EstimatePart estimates the heaviest part of a cut into parts of a graph known only by its
// size: balanced parts, each entry's far end in a uniformly random part (the worst case a
// partitioner improves on), and each vertex of another part a ghost if at least one of the
// part's cut entries reaches it.
func EstimatePart(vertices, entries int64, parts int) Part {
	p := int64(parts)
	own := (vertices + p - 1) / p
	rows := (entries+p-1)/p + own // self loops
	outside := vertices - own
	if outside <= 0 {
		return Part{Vertices: own, Entries: rows}
	}
	cut := float64(entries/p) * float64(outside) / float64(vertices)
	ghosts := float64(outside) * (1 - math.Exp(-cut/float64(outside)))
	return Part{Vertices: own, Entries: rows, Ghosts: int64(math.Round(ghosts))}
}
