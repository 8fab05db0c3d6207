package partition

import (
	"fmt"
	"math"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Part is one graph server's partition in local numbering: owned vertices are rows and columns
// 0..Owned-1 (global ids Lo..Lo+Owned-1), ghosts are columns Owned..Owned+len(Ghosts)-1.
type Part struct {
	ID, Parts int
	Lo, Owned int
	Bounds    []int64 // partition q owns global ids [Bounds[q], Bounds[q+1])
	Ghosts    []int32 // global ids of the ghost columns, ascending (so grouped by owner)
	// GhostDegree is each ghost's adjacency entries in the whole graph (a GraphSAGE's mean).
	GhostDegree []int32
	GhostStart  []int // len Parts+1: the ghosts owned by q are Ghosts[GhostStart[q]:GhostStart[q+1]]
	// OriginalIDs is the source dataset's id of every local column (owned rows, then ghosts),
	// which keys the dropout masks.
	OriginalIDs []int32
	// Adj is Â on the owned rows: Owned × (Owned+len(Ghosts)), local columns.
	Adj *tensor.CSR
	// AdjLocal is Adj restricted to the owned columns (Owned × Owned); Adj itself when there
	// are no ghosts.
	AdjLocal *tensor.CSR
	// SendTo[q] lists the owned rows partition q holds as ghosts, ascending: q's ghost order.
	SendTo     [][]int32
	Features   graph.Features
	Labels     []int32
	Splits     [3][]int32 // train, val, test: sorted local rows
	Totals     [3]int     // train, val, test sizes of the whole graph
	NumClasses int
	Meta       graph.Meta // the whole graph's
}

// Build returns the local view of a partition file's data.
func Build(d *graph.PartitionData) (*Part, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	p := &Part{
		ID: d.Part, Parts: d.Parts, Lo: d.Lo(), Owned: d.Rows(), Bounds: d.Bounds, Ghosts: d.GhostIDs, GhostDegree: d.GhostDegree, OriginalIDs: d.LocalOrigIDs(),
		Features: d.Features, Labels: d.Labels, Splits: [3][]int32{d.Train, d.Val, d.Test},
		Totals:     [3]int{d.Meta.SplitSizes.Train, d.Meta.SplitSizes.Val, d.Meta.SplitSizes.Test},
		NumClasses: d.NumClasses, Meta: d.Meta,
	}
	for s, ids := range p.Splits {
		if p.Totals[s] < len(ids) {
			return nil, fmt.Errorf("partition %d: %d rows in split %d but the graph has %d: %w", p.ID, len(ids), s, p.Totals[s], graph.ErrInvalid)
		}
	}
	p.GhostStart = make([]int, p.Parts+1)
	for q := range p.Parts + 1 {
		p.GhostStart[q], _ = slices.BinarySearch(p.Ghosts, int32(min(p.Bounds[q], math.MaxInt32)))
	}
	p.GhostStart[p.Parts] = len(p.Ghosts)
	p.buildAdj(d)
	return p, nil
}

// buildAdj fills Adj, AdjLocal and SendTo.
func (p *Part) buildAdj(d *graph.PartitionData) {
	n, g := p.Owned, len(p.Ghosts)
	dinv := make([]float64, n+g) // D̃^-1/2 of every local column
	for r := range n {
		dinv[r] = 1 / math.Sqrt(float64(d.Adj.Degree(r))+1)
	}
	for i, deg := range d.GhostDegree {
		dinv[n+i] = 1 / math.Sqrt(float64(deg)+1)
	}
	owner := make([]int32, g)
	for q := range p.Parts {
		for i := p.GhostStart[q]; i < p.GhostStart[q+1]; i++ {
			owner[i] = int32(q)
		}
	}
	nnz := d.Adj.NNZ() + int64(n)
	adj := &tensor.CSR{Rows: n, Cols: n + g, RowPtr: make([]int64, n+1), ColIdx: make([]int32, 0, nnz), Val: make([]float32, 0, nnz)}
	loc := &tensor.CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1)}
	p.SendTo = make([][]int32, p.Parts)
	last := make([]int, p.Parts) // 1 + the last row appended to SendTo[q]
	lo, hi := int32(p.Lo), int32(p.Lo+n)
	for r := range n {
		row := d.Adj.ColIdx[d.Adj.RowPtr[r]:d.Adj.RowPtr[r+1]]
		a, _ := slices.BinarySearch(row, lo)
		b, _ := slices.BinarySearch(row, hi)
		di := dinv[r]
		emit := func(c int32) {
			adj.ColIdx = append(adj.ColIdx, c)
			adj.Val = append(adj.Val, float32(di*dinv[c]))
		}
		self := false
		for _, c := range row[a:b] { // owned neighbours, with the self loop in sorted position
			if !self && c-lo > int32(r) {
				emit(int32(r))
				self = true
			}
			emit(c - lo)
		}
		if !self {
			emit(int32(r))
		}
		loc.RowPtr[r+1] = loc.RowPtr[r] + int64(len(adj.ColIdx)) - adj.RowPtr[r]
		for _, part := range [2][]int32{row[:a], row[b:]} {
			for _, c := range part {
				gi, _ := slices.BinarySearch(p.Ghosts, c)
				emit(int32(n + gi))
				if q := owner[gi]; last[q] != r+1 {
					last[q] = r + 1
					p.SendTo[q] = append(p.SendTo[q], int32(r))
				}
			}
		}
		adj.RowPtr[r+1] = int64(len(adj.ColIdx))
	}
	p.Adj = adj
	if g == 0 {
		p.AdjLocal = adj
		return
	}
	loc.ColIdx = make([]int32, 0, loc.RowPtr[n])
	loc.Val = make([]float32, 0, loc.RowPtr[n])
	for r := range n {
		a := adj.RowPtr[r]
		b := a + loc.RowPtr[r+1] - loc.RowPtr[r]
		loc.ColIdx = append(loc.ColIdx, adj.ColIdx[a:b]...)
		loc.Val = append(loc.Val, adj.Val[a:b]...)
	}
	p.AdjLocal = loc
}

// GhostsOf returns the number of ghosts this part holds of partition q.
func (p *Part) GhostsOf(q int) int { return p.GhostStart[q+1] - p.GhostStart[q] }

// Interval is a contiguous range of a part's owned rows, with what its Scatter and its
// backward Scatter exchange with the other parts.
type Interval struct {
	Lo, Hi int // owned local rows [Lo, Hi)
	// Send[q] is the range [a, b) of SendTo[q] whose rows lie in the interval: the rows its
	// Scatter sends to q, which q places at its ghost positions a..b-1 of this part's block.
	Send [][2]int
	// Touched lists the ghosts (indices into Part.Ghosts) the interval's rows reach, ascending;
	// those of owner q are Touched[TouchedStart[q]:TouchedStart[q+1]].
	Touched      []int32
	TouchedStart []int
	// TouchedRows[t] is Touched[t]'s row in its owner's local numbering.
	TouchedRows []int32
	// GhostT is the interval's ghost block transposed: row t holds Â[r, Touched[t]] at column r
	// for the interval's rows r. GhostT · dZ (dZ indexed by owned local row) is what the
	// backward Gather of the interval contributes to the touched ghosts' gradient rows.
	GhostT *tensor.CSR
}

// Rows returns the number of rows in the interval.
func (iv *Interval) Rows() int { return iv.Hi - iv.Lo }

// Cut splits the owned rows into k intervals balanced by Â entries plus rows.
func (p *Part) Cut(k int) ([]Interval, error) {
	if k < 1 || k > p.Owned {
		return nil, fmt.Errorf("partition %d: %d intervals of %d rows: %w", p.ID, k, p.Owned, ErrPlan)
	}
	bounds := balancedCut(p.Adj.RowPtr, k)
	out := make([]Interval, k)
	g := len(p.Ghosts)
	count := make([]int64, g) // entries per ghost within the interval
	pos := make([]int32, g)   // a ghost's row in GhostT
	for i := range out {
		iv := &out[i]
		iv.Lo, iv.Hi = int(bounds[i]), int(bounds[i+1])
		iv.Send = make([][2]int, p.Parts)
		for q, rows := range p.SendTo {
			a, _ := slices.BinarySearch(rows, int32(iv.Lo))
			b, _ := slices.BinarySearch(rows, int32(iv.Hi))
			iv.Send[q] = [2]int{a, b}
		}
		ghostEntries := func(r int) (cols []int32, vals []float32) {
			a, b := p.Adj.RowPtr[r]+(p.AdjLocal.RowPtr[r+1]-p.AdjLocal.RowPtr[r]), p.Adj.RowPtr[r+1]
			return p.Adj.ColIdx[a:b], p.Adj.Val[a:b]
		}
		for r := iv.Lo; r < iv.Hi; r++ {
			cols, _ := ghostEntries(r)
			for _, c := range cols {
				count[int(c)-p.Owned]++
			}
		}
		t := &tensor.CSR{Cols: p.Owned, RowPtr: []int64{0}}
		for gi, c := range count {
			if c > 0 {
				pos[gi] = int32(len(iv.Touched))
				iv.Touched = append(iv.Touched, int32(gi))
				t.RowPtr = append(t.RowPtr, t.RowPtr[len(t.RowPtr)-1]+c)
			}
		}
		t.Rows = len(iv.Touched)
		t.ColIdx = make([]int32, t.RowPtr[t.Rows])
		t.Val = make([]float32, t.RowPtr[t.Rows])
		next := slices.Clone(t.RowPtr[:t.Rows])
		for r := iv.Lo; r < iv.Hi; r++ { // rows in order, so each GhostT row's columns ascend
			cols, vals := ghostEntries(r)
			for k, c := range cols {
				j := pos[int(c)-p.Owned]
				t.ColIdx[next[j]], t.Val[next[j]] = int32(r), vals[k]
				next[j]++
			}
		}
		iv.GhostT = t
		iv.TouchedStart = make([]int, p.Parts+1)
		iv.TouchedRows = make([]int32, len(iv.Touched))
		for q := range p.Parts {
			iv.TouchedStart[q+1], _ = slices.BinarySearch(iv.Touched, int32(p.GhostStart[q+1]))
		}
		for j, gi := range iv.Touched {
			q, _ := slices.BinarySearch(p.GhostStart[1:], int(gi)+1)
			iv.TouchedRows[j] = p.Ghosts[gi] - int32(p.Bounds[q])
		}
		for _, gi := range iv.Touched {
			count[gi] = 0
		}
	}
	return out, nil
}
