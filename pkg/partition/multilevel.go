package partition

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Options tunes Multilevel.
type Options struct {
	// Seed fixes every random choice: the same graph, parts and seed give the same plan.
	Seed uint64
	// Imbalance bounds the heaviest part: its weight (adjacency entries + vertices) is at most
	// (1 + Imbalance) × the mean (0.05 when 0).
	Imbalance float64
	// SpillDir is where coarse levels of more than 2^27 adjacency entries are built, in temporary
	// files read back once complete, so that a level is never in memory beside its construction
	// (os.TempDir when ""). They are removed before Multilevel returns.
	SpillDir string
	// Reload, when set, reads the adjacency's column indices again (a prepared file's): Multilevel
	// then takes adj.ColIdx, releases it while the coarse levels are built on disk, and reads it
	// back to refine the finest level, so that the finest level is never in memory beside the
	// first coarse one. adj.ColIdx is the reloaded array on return.
	Reload func() ([]int32, error)
}

// Multilevel tuning.
const (
	coarsenPerPart  = 40      // coarsening stops at about this many vertices per part
	coarsenMin      = 200     // and never below this many vertices
	coarsenStall    = 0.90    // or when a level keeps more than this fraction of the vertices
	coarseVWFactor  = 1.5     // no coarse vertex weighs more than this × total / coarsening target
	initialTries    = 8       // grown bisections per cut of a bisection's coarsest graph
	multiTries      = 4       // cuts of the small levels, each coarsened anew; the best goes on
	multiTryEntries = 1 << 16 // a small level has at most this many adjacency entries
	refinePasses    = 8       // greedy and FM k-way passes per level, at most
	finestMinPasses = 4       // passes at levels of more than finestLarge adjacency entries
	finestLarge     = 1 << 26
	// k-way FM refines levels of at most this many entries: its gains and queue cost about 100
	// bytes of resident memory a vertex, and with greedy passes alone on the larger levels the
	// cut of the 1M-vertex graphs tried (a grid, a random 6-regular graph, R-MAT of two skews)
	// stayed within 1.18× of METIS's.
	fmMaxEntries = 1 << 20
	keepFraction = 0.5
)

// Multilevel returns a plan of parts parts for the symmetric adjacency adj (no self loops), cut
// the way METIS's k-way partitioner cuts (Karypis and Kumar, 1998): the graph is coarsened by
// heavy-edge matching (2-hop matching where that stalls, on skewed graphs) until about 40
// vertices per part remain, the coarsest graph is cut by recursive bisection (each bisection
// multilevel itself: coarsened further, the best of several grown bisections, refined by
// Fiduccia–Mattheyses on the way back), and the cut is projected back level by level, refined
// at each by greedy boundary passes and then (on levels of at most 2^20 entries) k-way
// Fiduccia–Mattheyses passes (boundary moves in order of gain, hill-climbing, the moves after
// the best cut taken back) until a pass gains nothing. The small levels (at most 2^16 adjacency entries) are cut 4 times, each time
// coarsened anew, and the least cut of the 4 goes on: one unlucky matching or bisection does
// not decide the cut. Vertices weigh 1 + degree, so parts are balanced by edges + vertices (the
// measure of Quality.Balance): no part weighs more than (1 + Imbalance) × the mean unless a
// single vertex is heavier. The plan renumbers the vertices part by part, keeping their order
// within a part.
//
// Memory: the input arrays are used in place (with vertex weights, 8 bytes a vertex); a coarse
// level holds offsets and weights (16 bytes a vertex), neighbours and edge weights (8 bytes an
// entry) and its map (4 bytes a vertex). Large coarse levels that kept most of the edges are not
// kept for refinement (see coarsen), and levels of more than 2^27 entries are built on disk
// (Options.SpillDir) and read back only after the level they come from is released, so that
// beside the input at most one large coarse level is in memory; with Options.Reload, none is.
func Multilevel(adj *tensor.CSR, parts int, opts Options) (Plan, error) {
	owner, err := MultilevelOwners(adj, parts, opts)
	if err != nil {
		return Plan{}, err
	}
	plan, err := planFromOwners(owner, parts)
	plan.Method = MethodMultilevel
	return plan, err
}

// MultilevelOwners is Multilevel returning the part of every vertex instead of a plan.
func MultilevelOwners(adj *tensor.CSR, parts int, opts Options) ([]int32, error) {
	n := adj.Rows
	if err := checkRequest(adj, parts); err != nil {
		return nil, err
	}
	if opts.Imbalance <= 0 {
		opts.Imbalance = 0.05
	}
	g := &wgraph{xadj: adj.RowPtr, adj: adj.ColIdx, vw: make([]int64, n)}
	if opts.Reload != nil {
		adj.ColIdx = nil // g's until coarsen releases it
	}
	for v := range n {
		g.vw[v] = 1 + adj.RowPtr[v+1] - adj.RowPtr[v]
		g.tw += g.vw[v]
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6d756c74696c6576)) // "multilev"
	target := max(coarsenPerPart*parts, coarsenMin)
	c := &coarsener{rng: rng, maxVW: int64(coarseVWFactor * float64(g.tw) / float64(target)), spillDir: opts.SpillDir}
	levels, cmaps, err := coarsen(c, g, target, opts.Reload != nil)
	if err != nil {
		return nil, err
	}
	if g.adj == nil {
		if g.adj, err = opts.Reload(); err != nil {
			return nil, err
		}
		if int64(len(g.adj)) != g.xadj[n] {
			return nil, fmt.Errorf("partition: the adjacency read again has %d entries, not %d: %w", len(g.adj), g.xadj[n], ErrPlan)
		}
	}
	adj.ColIdx = g.adj
	// The small levels (of at most multiTryEntries entries each) are cut several times, each
	// time coarsened anew from the largest of them; the cut of least weight there, within the
	// balance, goes on up.
	small := len(levels) - 1
	for small > 0 && int64(len(levels[small-1].adj)) <= multiTryEntries {
		small--
	}
	tries := 1
	if int64(len(levels[small].adj)) <= multiTryEntries {
		tries = multiTries
	}
	r := newKway(parts, int64((1+opts.Imbalance)*float64(g.tw)/float64(parts)), rng)
	b := &bisector{rng: rng, tries: initialTries, spillDir: opts.SpillDir}
	var part []int32
	bestCut, bestOver := int64(math.MaxInt64), int64(math.MaxInt64)
	top, sub, subMaps := levels[small], levels[small:], cmaps[small:]
	for try := range tries {
		if try > 0 {
			if sub, subMaps, err = coarsen(c, top, target, false); err != nil {
				return nil, err
			}
		}
		p, err := initialPartition(b, r, sub[len(sub)-1], parts, opts.Imbalance)
		if err != nil {
			return nil, err
		}
		for l := len(sub) - 2; l >= 0; l-- {
			p = project(sub[l], subMaps[l], p)
			sub[l+1], subMaps[l] = nil, nil // released before the finer level's refinement
			refineLevel(r, sub[l], p)
		}
		over := max(0, slices.Max(r.pw)-r.maxPW)
		if cut := cutWeight(top, p); over < bestOver || (over == bestOver && cut < bestCut) {
			part, bestCut, bestOver = p, cut, over
		}
	}
	for l := small - 1; l >= 0; l-- {
		part = project(levels[l], cmaps[l], part)
		levels[l+1], cmaps[l] = nil, nil
		refineLevel(r, levels[l], part)
	}
	return part, nil
}

// initialPartition cuts the coarsest level into parts by recursive bisection, each cut within
// (1 + imbalance)^(1/depth) of its target so that the parts are within 1 + imbalance, and refines
// the cut.
func initialPartition(b *bisector, r *kway, coarsest *wgraph, parts int, imbalance float64) ([]int32, error) {
	part := make([]int32, coarsest.n())
	ids := make([]int32, coarsest.n())
	for i := range ids {
		ids[i] = int32(i)
	}
	depth := math.Ceil(math.Log2(float64(parts)))
	if err := b.recursiveBisect(coarsest, parts, 0, part, ids, math.Pow(1+imbalance, 1/max(depth, 1))); err != nil {
		return nil, err
	}
	r.refine(coarsest, part, refinePasses)
	r.fm(coarsest, part, refinePasses)
	return part, nil
}

// project returns the partition of the level fine whose map to the coarser level of partition
// coarse is cmap.
func project(fine *wgraph, cmap, coarse []int32) []int32 {
	part := make([]int32, fine.n())
	for v, cv := range cmap {
		part[v] = coarse[cv]
	}
	return part
}

// refineLevel refines the partition of level g: greedy passes, then, on a level of at most
// fmMaxEntries entries, Fiduccia–Mattheyses passes.
func refineLevel(r *kway, g *wgraph, part []int32) {
	passes := refinePasses
	if int64(len(g.adj)) > finestLarge {
		passes = finestMinPasses
	}
	r.refine(g, part, passes)
	if int64(len(g.adj)) <= fmMaxEntries {
		r.fm(g, part, passes)
	}
}

// coarsen builds the levels from g until about target vertices remain or matching stalls, and
// returns the levels kept for refinement with the maps between consecutive kept levels. With
// reloadable, g's adjacency may be released while a level is built on disk (see contract). Small
// levels are all kept; a level of more than keepAlways entries is kept only if it has at most
// keepFraction of the entries of the last kept level (skewed graphs keep nearly all their edges
// for many levels: keeping each would cost as much memory as the graph again, per level), and
// the maps through the levels dropped are composed.
func coarsen(c *coarsener, g *wgraph, target int, reloadable bool) ([]*wgraph, [][]int32, error) {
	levels := []*wgraph{g}
	var cmaps [][]int32
	var pending []int32 // from the last kept level to cur, when cur is not kept
	for cur := g; cur.n() > target; {
		cg, cmap, err := c.contract(cur, c.match(cur), cur != levels[len(levels)-1] || (cur == g && reloadable))
		if err != nil {
			return nil, nil, err
		}
		if cg.n() == cur.n() {
			break
		}
		if pending != nil {
			for v, x := range pending {
				pending[v] = cmap[x]
			}
		} else {
			pending = cmap
		}
		stalled := float64(cg.n()) > coarsenStall*float64(cur.n())
		last := levels[len(levels)-1]
		if len(cg.adj) <= keepAlways || float64(len(cg.adj)) <= keepFraction*float64(len(last.adj)) || stalled || cg.n() <= target {
			levels, cmaps, pending = append(levels, cg), append(cmaps, pending), nil
		}
		if stalled {
			break
		}
		cur = cg
	}
	return levels, cmaps, nil
}

// keepAlways is the size, in adjacency entries, up to which every level is kept for refinement
// (a variable so that tests can make small graphs skip levels).
var keepAlways = 1 << 24

// checkRequest refuses a partitioning Multilevel cannot do: parts outside [1, N], a malformed
// adjacency, or one whose merged edge weights could overflow int32.
func checkRequest(adj *tensor.CSR, parts int) error {
	n := adj.Rows
	switch {
	case parts < 1 || parts > n:
		return fmt.Errorf("partition: %d parts of a %d-vertex graph (want 1 to %d parts): %w", parts, n, n, ErrPlan)
	case adj.Cols != n || len(adj.RowPtr) != n+1:
		return fmt.Errorf("partition: adjacency is %d×%d with %d row offsets, want square with N+1: %w", adj.Rows, adj.Cols, len(adj.RowPtr), ErrPlan)
	case adj.RowPtr[n]/2 > math.MaxInt32 || adj.RowPtr[n] != int64(len(adj.ColIdx)):
		return fmt.Errorf("partition: %d adjacency entries (%d column ids): want them to match, at most %d: %w", adj.RowPtr[n], len(adj.ColIdx), int64(2*math.MaxInt32), ErrPlan)
	}
	for i, c := range adj.ColIdx {
		if c < 0 || int(c) >= n {
			return fmt.Errorf("partition: adjacency entry %d names vertex %d of %d: %w", i, c, n, ErrPlan)
		}
	}
	return nil
}
