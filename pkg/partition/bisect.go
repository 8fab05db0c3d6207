package partition

import (
	"math"
	"math/rand/v2"
)

// gainHeap is a max-heap of (gain, vertex) entries with lazy deletion: an entry is stale when
// its vertex moved, was locked, or got another gain since, and is skipped when popped.
type gainHeap []gainEntry

type gainEntry struct {
	gain int64
	v    int32
}

func (h *gainHeap) push(e gainEntry) {
	*h = append(*h, e)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if !a[i].above(a[p]) {
			break
		}
		a[i], a[p] = a[p], a[i]
		i = p
	}
}

func (h *gainHeap) pop() gainEntry {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, best := 2*i+1, i
		if l < len(a) && a[l].above(a[best]) {
			best = l
		}
		if r := l + 1; r < len(a) && a[r].above(a[best]) {
			best = r
		}
		if best == i {
			break
		}
		a[i], a[best] = a[best], a[i]
		i = best
	}
	*h = a
	return top
}

// above orders entries by gain, then by vertex id (so the order never depends on the heap's
// history).
func (e gainEntry) above(o gainEntry) bool {
	return e.gain > o.gain || (e.gain == o.gain && e.v < o.v)
}

// bisector computes 2-way cuts of small graphs: the coarsest level's recursive bisection.
type bisector struct {
	rng      *rand.Rand
	tries    int    // grown bisections of a graph too small to coarsen; the best after refinement is kept
	spillDir string // Options.SpillDir, for the coarse graphs of a bisection
}

// Bisection bounds.
const (
	fmPasses        = 8   // FM passes per bisection
	fmStallMoves    = 100 // an FM pass stops after this many moves without a better cut,
	fmStallMin      = 15  // or 1% of the vertices if more than this many
	bisectCoarsenTo = 100 // a bisection coarsens its graph until about this many vertices remain
)

// bisect cuts g into side 0 of weight about target0 and side 1 with the rest, each side within
// maxW of weight and holding at least minN vertices, and returns the side of every vertex and
// the cut weight. It is multilevel, as METIS's bisection: a graph of more than bisectCoarsenTo
// vertices is coarsened by heavy-edge matching, the coarse graph bisected, and the bisection
// projected back and refined by Fiduccia–Mattheyses passes; a graph that small (or one whose
// matching stalls) is cut the best way (least overweight, then least cut) of b.tries
// bisections grown breadth-first, each so refined.
func (b *bisector) bisect(g *wgraph, target0 int64, maxW [2]int64, minN [2]int) ([]int8, int64, error) {
	var best []int8
	bestCut, bestOver := int64(math.MaxInt64), int64(math.MaxInt64)
	keep := func(side []int8) {
		fm2(g, side, target0, maxW)
		ensureCount(g, side, minN) // may move vertices: the cut is counted after it
		pw := sideWeights(g, side)
		over := max(0, pw[0]-maxW[0]) + max(0, pw[1]-maxW[1])
		if cut := cutWeight(g, side); over < bestOver || (over == bestOver && cut < bestCut) {
			best, bestCut, bestOver = side, cut, over
		}
	}
	if g.n() > bisectCoarsenTo {
		c := &coarsener{rng: b.rng, maxVW: int64(coarseVWFactor * float64(g.tw) / bisectCoarsenTo), spillDir: b.spillDir}
		cg, cmap, err := c.contract(g, c.match(g), false)
		if err != nil {
			return nil, 0, err
		}
		if float64(cg.n()) <= coarsenStall*float64(g.n()) && cg.n() >= minN[0]+minN[1] {
			cside, _, err := b.bisect(cg, target0, maxW, minN)
			if err != nil {
				return nil, 0, err
			}
			side := make([]int8, g.n())
			for v, cv := range cmap {
				side[v] = cside[cv]
			}
			keep(side)
			return best, bestCut, nil
		}
	}
	for range b.tries {
		keep(b.grow(g, target0))
	}
	return best, bestCut, nil
}

// grow returns a bisection grown breadth-first from a random vertex (and from further random
// vertices when a component runs out) until side 0 reaches target0.
func (b *bisector) grow(g *wgraph, target0 int64) []int8 {
	n := g.n()
	side := make([]int8, n)
	for i := range side {
		side[i] = 1
	}
	queue := make([]int32, 0, n)
	var w int64
	for head := 0; w < target0; {
		if head == len(queue) {
			start := int32(b.rng.IntN(n))
			for side[start] == 0 {
				start = (start + 1) % int32(n)
			}
			side[start] = 0
			w += g.vw[start]
			queue = append(queue, start)
			if len(queue) == n {
				break
			}
			continue
		}
		u := queue[head]
		head++
		for e := g.xadj[u]; e < g.xadj[u+1] && w < target0; e++ {
			if v := g.adj[e]; side[v] == 1 {
				side[v] = 0
				w += g.vw[v]
				queue = append(queue, v)
			}
		}
	}
	return side
}

// sideWeights returns the weights of both sides.
func sideWeights(g *wgraph, side []int8) [2]int64 {
	var pw [2]int64
	for v, s := range side {
		pw[s] += g.vw[v]
	}
	return pw
}

// cutWeight returns the weight of the edges between the sides (or parts).
func cutWeight[S int8 | int32](g *wgraph, side []S) int64 {
	var cut int64
	for u := range g.n() {
		for e := g.xadj[u]; e < g.xadj[u+1]; e++ {
			if side[g.adj[e]] != side[u] {
				cut += g.weight(e)
			}
		}
	}
	return cut / 2
}

// ensureCount moves vertices so that each side holds at least minN[s] vertices (lightest first
// is not needed: only degenerate requests, parts close to vertices, get here).
func ensureCount(g *wgraph, side []int8, minN [2]int) {
	var cnt [2]int
	for _, s := range side {
		cnt[s]++
	}
	for s := range int8(2) {
		for v := 0; v < len(side) && cnt[s] < minN[s]; v++ {
			if o := side[v]; o != s && cnt[o] > minN[o] {
				side[v] = s
				cnt[s]++
				cnt[o]--
			}
		}
	}
}

// fm2 refines a bisection by Fiduccia–Mattheyses passes, until one gains nothing: each pass
// moves boundary vertices (those with an edge to the other side, or that get one) one at a
// time, always from the side further above its target, highest gain first, each vertex at most
// once, stops stallMoves(n) moves after the best cut so far, and takes back the moves after the
// best prefix (first least overweight, then least cut). It returns the cut weight.
func fm2(g *wgraph, side []int8, target0 int64, maxW [2]int64) int64 {
	n := g.n()
	target := [2]int64{target0, g.tw - target0}
	gain := make([]int64, n) // external minus internal edge weight
	ext := make([]int64, n)  // external edge weight: a vertex with none is not queued
	locked := make([]bool, n)
	var cut int64
	for u := range n {
		for e := g.xadj[u]; e < g.xadj[u+1]; e++ {
			if side[g.adj[e]] != side[u] {
				gain[u] += g.weight(e)
				ext[u] += g.weight(e)
			} else {
				gain[u] -= g.weight(e)
			}
		}
		cut += ext[u]
	}
	cut /= 2
	pw := sideWeights(g, side)
	over := func() int64 { return max(0, pw[0]-maxW[0]) + max(0, pw[1]-maxW[1]) }
	var heaps [2]gainHeap
	moves := make([]int32, 0, n)
	stall := stallMoves(n)
	for range fmPasses {
		heaps[0], heaps[1] = heaps[0][:0], heaps[1][:0]
		for u := range n {
			if locked[u] = false; ext[u] > 0 {
				heaps[side[u]].push(gainEntry{gain[u], int32(u)})
			}
		}
		moves = moves[:0]
		bestCut, bestOver, bestLen := cut, over(), 0
		for len(moves)-bestLen < stall {
			from := 0
			if pw[1]-target[1] > pw[0]-target[0] {
				from = 1
			}
			v := popValid(&heaps[from], side, locked, gain, int8(from))
			if v < 0 {
				from = 1 - from
				if v = popValid(&heaps[from], side, locked, gain, int8(from)); v < 0 {
					break
				}
			}
			to := 1 - from
			cut -= gain[v]
			pw[from] -= g.vw[v]
			pw[to] += g.vw[v]
			side[v] = int8(to)
			locked[v] = true
			gain[v] = -gain[v]
			moves = append(moves, v)
			for e := g.xadj[v]; e < g.xadj[v+1]; e++ {
				u, w := g.adj[e], g.weight(e)
				if int(side[u]) == to {
					gain[u] -= 2 * w
					ext[u] -= w
					ext[v] -= w
				} else {
					gain[u] += 2 * w
					ext[u] += w
					ext[v] += w
				}
				if !locked[u] {
					heaps[side[u]].push(gainEntry{gain[u], u})
				}
			}
			if o := over(); o < bestOver || (o == bestOver && cut < bestCut) {
				bestCut, bestOver, bestLen = cut, o, len(moves)
			}
		}
		// Undo the moves after the best prefix.
		for i := len(moves) - 1; i >= bestLen; i-- {
			v := moves[i]
			from := side[v]
			to := 1 - from
			pw[from] -= g.vw[v]
			pw[to] += g.vw[v]
			side[v] = to
			gain[v] = -gain[v]
			for e := g.xadj[v]; e < g.xadj[v+1]; e++ {
				u, w := g.adj[e], g.weight(e)
				if side[u] == to {
					gain[u] -= 2 * w
					ext[u] -= w
					ext[v] -= w
				} else {
					gain[u] += 2 * w
					ext[u] += w
					ext[v] += w
				}
			}
		}
		cut = bestCut
		if bestLen == 0 {
			break
		}
	}
	return cut
}

// stallMoves returns the moves without a better cut after which an FM pass of an n-vertex graph
// stops: 1% of the vertices, within [fmStallMin, fmStallMoves] (as METIS's).
func stallMoves(n int) int { return min(max(n/100, fmStallMin), fmStallMoves) }

// popValid pops the best non-stale entry of side s, or returns -1.
func popValid(h *gainHeap, side []int8, locked []bool, gain []int64, s int8) int32 {
	for len(*h) > 0 {
		e := h.pop()
		if !locked[e.v] && side[e.v] == s && gain[e.v] == e.gain {
			return e.v
		}
	}
	return -1
}

// recursiveBisect assigns the vertices of g to parts first..first+k-1 by recursive bisection,
// each cut's sides weighted in proportion to their part counts within the bound ub.
func (b *bisector) recursiveBisect(g *wgraph, k int, first int32, part []int32, ids []int32, ub float64) error {
	if k == 1 {
		for _, v := range ids {
			part[v] = first
		}
		return nil
	}
	k0 := k / 2
	target0 := int64(float64(g.tw) * float64(k0) / float64(k))
	maxW := [2]int64{int64(float64(target0) * ub), int64(float64(g.tw-target0) * ub)}
	side, _, err := b.bisect(g, target0, maxW, [2]int{k0, k - k0})
	if err != nil {
		return err
	}
	for s, kk := range [2]int{k0, k - k0} {
		sub, subIDs := subgraph(g, side, int8(s), ids)
		off := first
		if s == 1 {
			off += int32(k0)
		}
		if err := b.recursiveBisect(sub, kk, off, part, subIDs, ub); err != nil {
			return err
		}
	}
	return nil
}

// subgraph returns the subgraph induced by the vertices on side s and their ids (ids[v] of each).
func subgraph(g *wgraph, side []int8, s int8, ids []int32) (*wgraph, []int32) {
	local := make([]int32, g.n())
	var subIDs []int32
	for v, x := range side {
		if x == s {
			local[v] = int32(len(subIDs))
			subIDs = append(subIDs, ids[v])
		}
	}
	sub := &wgraph{xadj: make([]int64, 1, len(subIDs)+1), vw: make([]int64, 0, len(subIDs)), ew: []int32{}}
	for v, x := range side {
		if x != s {
			continue
		}
		for e := g.xadj[v]; e < g.xadj[v+1]; e++ {
			if u := g.adj[e]; side[u] == s {
				sub.adj = append(sub.adj, local[u])
				sub.ew = append(sub.ew, int32(g.weight(e)))
			}
		}
		sub.xadj = append(sub.xadj, int64(len(sub.adj)))
		sub.vw = append(sub.vw, g.vw[v])
		sub.tw += g.vw[v]
	}
	return sub, subIDs
}
