package partition

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// ErrPlan reports a partitioning request that cannot be met.
var ErrPlan = errors.New("bad partitioning")

// Plan assigns every vertex to a part: after renumbering by Perm, part q owns the new ids
// [Bounds[q], Bounds[q+1]).
type Plan struct {
	Bounds []int64 // len P+1, Bounds[0] = 0, Bounds[P] = N
	Perm   []int32 // Perm[new] = old id; nil when the numbering is unchanged
	Method Method  // how it was computed; empty for FromOwners
}

// Parts returns the number of parts P.
func (p Plan) Parts() int { return len(p.Bounds) - 1 }

// Owners returns the part of every vertex, indexed by original id.
func (p Plan) Owners() []int32 {
	n := int(p.Bounds[len(p.Bounds)-1])
	owner := make([]int32, n)
	for q := 0; q < p.Parts(); q++ {
		for v := p.Bounds[q]; v < p.Bounds[q+1]; v++ {
			old := v
			if p.Perm != nil {
				old = int64(p.Perm[v])
			}
			owner[old] = int32(q)
		}
	}
	return owner
}

// balancedCut cuts rows [0, n) into k ≤ n contiguous, non-empty ranges of nearly equal weight,
// a row weighing its entries plus one, and returns the k+1 bounds. It reads only the row offsets.
func balancedCut(rowPtr []int64, k int) []int64 {
	n := len(rowPtr) - 1
	total := rowPtr[n] + int64(n)
	bounds := make([]int64, k+1)
	for q := 1; q < k; q++ {
		target := (total*int64(q) + int64(k)/2) / int64(k)
		// The first row v whose cumulative weight rowPtr[v]+v reaches the target.
		bounds[q] = int64(sort.Search(n+1, func(v int) bool { return rowPtr[v]+int64(v) >= target }))
	}
	bounds[k] = int64(n)
	// A vertex heavier than a whole range would leave ranges empty: give each at least one row.
	for q := 1; q < k; q++ {
		bounds[q] = max(bounds[q], bounds[q-1]+1)
	}
	for q := k - 1; q > 0; q-- {
		bounds[q] = min(bounds[q], bounds[q+1]-1)
	}
	return bounds
}

// Contiguous returns the default plan: parts that are ranges of vertex ids of equal weight
// (adjacency entries + vertices), computed from the row offsets alone.
func Contiguous(rowPtr []int64, parts int) (Plan, error) {
	n := len(rowPtr) - 1
	if parts < 1 || parts > n {
		return Plan{}, fmt.Errorf("partition: %d parts of a %d-vertex graph: %w", parts, n, ErrPlan)
	}
	return Plan{Bounds: balancedCut(rowPtr, parts), Method: MethodContiguous}, nil
}

// RefineOptions tunes Refine.
type RefineOptions struct {
	// Imbalance is how far a part's weight may stray from the mean, as a fraction (0.05 when 0).
	Imbalance float64
	// Sweeps bounds the passes over the vertices (10 when 0); refinement stops early when a
	// pass moves fewer than one vertex in a thousand.
	Sweeps int
}

// Refine improves plan (which must not renumber) on the symmetric adjacency adj by
// size-constrained label propagation: each vertex in turn moves to the part holding most of its
// neighbours if that is strictly more than its own part holds and both parts stay within the
// balance bound. The result renumbers the vertices so that each part is a range again, keeping
// the original order within a part.
func Refine(adj *tensor.CSR, plan Plan, opts RefineOptions) (Plan, error) {
	n, parts := adj.Rows, plan.Parts()
	if plan.Perm != nil || int(plan.Bounds[parts]) != n {
		return Plan{}, fmt.Errorf("partition: refine needs a plan without renumbering over the %d vertices: %w", n, ErrPlan)
	}
	if opts.Imbalance <= 0 {
		opts.Imbalance = 0.05
	}
	if opts.Sweeps <= 0 {
		opts.Sweeps = 10
	}
	owner := plan.Owners()
	load := make([]int64, parts)
	for v := range n {
		load[owner[v]] += int64(adj.Degree(v)) + 1
	}
	mean := float64(adj.NNZ()+int64(n)) / float64(parts)
	upper, lower := int64(mean*(1+opts.Imbalance)), int64(mean*(1-opts.Imbalance))
	counts := make([]int64, parts)
	touched := make([]int32, 0, parts)
	for range opts.Sweeps {
		moved := 0
		for v := range n {
			nb := adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]]
			for _, c := range nb {
				q := owner[c]
				if counts[q] == 0 {
					touched = append(touched, q)
				}
				counts[q]++
			}
			own := owner[v]
			best := own
			for _, q := range touched {
				if counts[q] > counts[best] || (counts[q] == counts[best] && best != own && q < best) {
					best = q
				}
			}
			w := int64(len(nb)) + 1
			if best != own && counts[best] > counts[own] && load[best]+w <= upper && load[own]-w >= lower {
				owner[v] = best
				load[best] += w
				load[own] -= w
				moved++
			}
			for _, q := range touched {
				counts[q] = 0
			}
			touched = touched[:0]
		}
		if moved*1000 < n {
			break
		}
	}
	refined, err := planFromOwners(owner, parts)
	refined.Method = MethodLabelPropagation
	return refined, err
}

// planFromOwners renumbers the vertices part by part, keeping their order within a part.
func planFromOwners(owner []int32, parts int) (Plan, error) {
	bounds := make([]int64, parts+1)
	for _, q := range owner {
		bounds[q+1]++
	}
	for q := range parts {
		if bounds[q+1] == 0 {
			return Plan{}, fmt.Errorf("partition: part %d of %d is empty: %w", q, parts, ErrPlan)
		}
		bounds[q+1] += bounds[q]
	}
	perm := make([]int32, len(owner))
	next := slices.Clone(bounds[:parts])
	for v, q := range owner {
		perm[next[q]] = int32(v)
		next[q]++
	}
	return Plan{Bounds: bounds, Perm: perm}, nil
}

// Quality describes how well a plan cuts a graph.
type Quality struct {
	Parts    int     `json:"parts"`     // P
	Entries  int64   `json:"entries"`   // adjacency entries (directed edges)
	Cut      int64   `json:"cut"`       // entries whose endpoints lie in different parts
	CutRatio float64 `json:"cut_ratio"` // Cut / Entries
	// Balance is the heaviest part's weight (entries + vertices) over the mean weight.
	Balance float64 `json:"balance"`
	// VertexBalance is the largest part's vertex count over the mean.
	VertexBalance float64 `json:"vertex_balance"`
	Ghosts        int64   `json:"ghosts"` // ghost vertices summed over the parts
}

// String formats q on one line.
func (q Quality) String() string {
	return fmt.Sprintf("%d parts: edge cut %.4f (%d of %d entries), balance %.4f (edges+vertices), %.4f (vertices), %d ghosts",
		q.Parts, q.CutRatio, q.Cut, q.Entries, q.Balance, q.VertexBalance, q.Ghosts)
}

// partStats accumulates one part's contribution to a Quality.
type partStats struct {
	rows, entries, cut, ghosts int64
}

// quality combines the parts' statistics.
func quality(stats []partStats) Quality {
	q := Quality{Parts: len(stats)}
	var rows, maxW, maxRows int64
	for _, s := range stats {
		q.Entries += s.entries
		q.Cut += s.cut
		q.Ghosts += s.ghosts
		rows += s.rows
		maxW = max(maxW, s.entries+s.rows)
		maxRows = max(maxRows, s.rows)
	}
	if q.Entries > 0 {
		q.CutRatio = float64(q.Cut) / float64(q.Entries)
	}
	if rows > 0 {
		q.Balance = float64(maxW) * float64(len(stats)) / float64(q.Entries+rows)
		q.VertexBalance = float64(maxRows) * float64(len(stats)) / float64(rows)
	}
	return q
}

// Measure returns the quality of plan on the adjacency adj (original numbering).
func Measure(adj *tensor.CSR, plan Plan) Quality {
	owner := plan.Owners()
	stats := make([]partStats, plan.Parts())
	lastSeen := make([]int32, adj.Rows) // per vertex: 1 + the last part that counted it as a ghost
	for q := range stats {
		s, mark := &stats[q], int32(q)+1
		for i := plan.Bounds[q]; i < plan.Bounds[q+1]; i++ {
			v := i
			if plan.Perm != nil {
				v = int64(plan.Perm[i])
			}
			s.rows++
			for _, c := range adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]] {
				s.entries++
				if owner[c] != int32(q) {
					s.cut++
					if lastSeen[c] != mark {
						lastSeen[c] = mark
						s.ghosts++
					}
				}
			}
		}
	}
	return quality(stats)
}
