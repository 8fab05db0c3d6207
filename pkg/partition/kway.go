package partition

import (
	"cmp"
	"math/rand/v2"
	"slices"
)

// kway refines k-way partitions: greedy boundary refinement and rebalancing, as METIS does while
// projecting a partition back through the levels.
type kway struct {
	k       int
	maxPW   int64 // no part may weigh more (when it can be helped)
	rng     *rand.Rand
	conn    []int64 // per part: edge weight from the vertex at hand; zero between uses
	touched []int32 // the parts conn holds weight for
	pw      []int64 // part weights
	cnt     []int64 // part vertex counts
}

func newKway(k int, maxPW int64, rng *rand.Rand) *kway {
	return &kway{k: k, maxPW: maxPW, rng: rng, conn: make([]int64, k), pw: make([]int64, k), cnt: make([]int64, k)}
}

// connect fills conn and touched with v's edge weight to every other part and returns the
// weight to its own part.
func (r *kway) connect(g *wgraph, part []int32, v int32) (internal int64) {
	a := part[v]
	for e := g.xadj[v]; e < g.xadj[v+1]; e++ {
		q := part[g.adj[e]]
		if q == a {
			internal += g.weight(e)
			continue
		}
		if r.conn[q] == 0 {
			r.touched = append(r.touched, q)
		}
		r.conn[q] += g.weight(e)
	}
	return internal
}

// clear resets conn and touched.
func (r *kway) clear() {
	for _, q := range r.touched {
		r.conn[q] = 0
	}
	r.touched = r.touched[:0]
}

// bestTarget returns the touched part with room for v that v has most edge weight to (the
// lighter on ties), or -1.
func (r *kway) bestTarget(w int64) int32 {
	best := int32(-1)
	for _, q := range r.touched {
		if r.pw[q]+w > r.maxPW {
			continue
		}
		if best < 0 || r.conn[q] > r.conn[best] || (r.conn[q] == r.conn[best] && (r.pw[q] < r.pw[best] || (r.pw[q] == r.pw[best] && q < best))) {
			best = q
		}
	}
	return best
}

// move moves v to part to.
func (r *kway) move(g *wgraph, part []int32, v, to int32) {
	a := part[v]
	r.pw[a] -= g.vw[v]
	r.cnt[a]--
	r.pw[to] += g.vw[v]
	r.cnt[to]++
	part[v] = to
}

// refine rebalances part if a part is too heavy, then makes up to passes greedy passes: each
// boundary vertex moves to the adjacent part it has most edge weight to if that lowers the cut,
// or keeps it and evens the weights, without overloading the target or emptying its part. The
// first pass visits every vertex in random order, later ones the neighbours of moved vertices.
func (r *kway) refine(g *wgraph, part []int32, passes int) {
	n := g.n()
	clear(r.pw)
	clear(r.cnt)
	for v, q := range part {
		r.pw[q] += g.vw[v]
		r.cnt[q]++
	}
	r.balance(g, part)
	active := make([]int32, n)
	for i := range active {
		active[i] = int32(i)
	}
	r.rng.Shuffle(n, func(i, j int) { active[i], active[j] = active[j], active[i] })
	mark := make([]int32, n) // 1 + the pass that queued the vertex
	var next []int32
	for pass := int32(1); pass <= int32(passes) && len(active) > 0; pass++ {
		next = next[:0]
		for _, v := range active {
			internal := r.connect(g, part, v)
			to := r.bestTarget(g.vw[v])
			a := part[v]
			ok := false
			if to >= 0 && r.cnt[a] > 1 {
				gain := r.conn[to] - internal
				ok = gain > 0 || (gain == 0 && r.pw[to]+g.vw[v] < r.pw[a])
			}
			r.clear()
			if !ok {
				continue
			}
			r.move(g, part, v, to)
			for e := g.xadj[v]; e < g.xadj[v+1]; e++ {
				if u := g.adj[e]; mark[u] != pass {
					mark[u] = pass
					next = append(next, u)
				}
			}
		}
		active, next = next, active
	}
}

// Rebalancing bounds.
const balanceRounds = 4

// balance moves vertices out of parts heavier than maxPW: boundary vertices first, those whose
// move costs least cut first, each to the adjacent part with room it has most edges to; then, if
// a part is still too heavy, any of its vertices to the lightest part with room.
func (r *kway) balance(g *wgraph, part []int32) {
	type cand struct {
		gain int64
		v    int32
	}
	var cands []cand
	for range balanceRounds {
		if !r.overweight() {
			return
		}
		cands = cands[:0]
		for v := range int32(g.n()) {
			if r.pw[part[v]] <= r.maxPW {
				continue
			}
			internal := r.connect(g, part, v)
			if to := r.bestTarget(g.vw[v]); to >= 0 {
				cands = append(cands, cand{r.conn[to] - internal, v})
			}
			r.clear()
		}
		slices.SortFunc(cands, func(a, b cand) int {
			if a.gain != b.gain {
				return cmp.Compare(b.gain, a.gain)
			}
			return cmp.Compare(a.v, b.v)
		})
		for _, c := range cands {
			a := part[c.v]
			if r.pw[a] <= r.maxPW || r.cnt[a] == 1 {
				continue
			}
			r.connect(g, part, c.v)
			to := r.bestTarget(g.vw[c.v])
			r.clear()
			if to >= 0 {
				r.move(g, part, c.v, to)
			}
		}
		if !r.overweight() {
			return
		}
		for v := range int32(g.n()) {
			a := part[v]
			if r.pw[a] <= r.maxPW || r.cnt[a] == 1 {
				continue
			}
			light := int32(slices.Index(r.pw, slices.Min(r.pw)))
			if light != a && r.pw[light]+g.vw[v] <= r.maxPW {
				r.move(g, part, v, light)
			}
		}
	}
}

// overweight reports whether a part weighs more than maxPW.
func (r *kway) overweight() bool { return slices.Max(r.pw) > r.maxPW }

// bestMove returns the part v's move lowers the cut most (or raises it least) and by how much:
// the touched part with room that v has most edge weight to, or -1 when v has none or is alone
// in its part (the gain is then -internal, that of a move to a part it has no edges to).
func (r *kway) bestMove(g *wgraph, part []int32, v int32) (gain int64, to int32) {
	internal := r.connect(g, part, v)
	gain, to = -internal, r.bestTarget(g.vw[v])
	if to >= 0 && r.cnt[part[v]] > 1 {
		gain += r.conn[to]
	} else {
		to = -1
	}
	r.clear()
	return gain, to
}

// fm refines part by up to passes k-way Fiduccia–Mattheyses passes, until one lowers the cut
// no more: each pass moves boundary vertices one at a time, the one whose move lowers the cut
// most first (a move may raise it: a hill to climb), each to the adjacent part with room it has
// most edges to and each at most once, stops stallMoves(n) moves after the best cut so far, and
// takes back the moves after the best. Part weights stay within maxPW.
//
// A move's gain is computed only when its vertex leaves the queue: a move raises each
// neighbour's key by the most it can raise its gain (twice the edge's weight for a neighbour
// left behind, once for one in a third part), so keys are upper bounds and the first key found
// exact is the best move. The first pass starts from every boundary vertex, later ones from
// the queue the last left, with the vertices it moved. Vertices of more than 4× the mean degree stay put:
// their gains cost most to compute and rarely pay.
func (r *kway) fm(g *wgraph, part []int32, passes int) {
	n := g.n()
	key := make([]int64, n)    // an upper bound of the vertex's gain
	locked := make([]int32, n) // the pass that moved the vertex
	maxDeg := 4*g.xadj[n]/int64(max(n, 1)) + 1
	var heap gainHeap
	type move struct{ v, from int32 }
	var moves []move
	push := func(v int32) {
		if g.xadj[v+1]-g.xadj[v] > maxDeg {
			return
		}
		gain, to := r.bestMove(g, part, v)
		if key[v] = gain; to >= 0 {
			heap.push(gainEntry{gain, v})
		}
	}
	for v := range int32(n) {
		push(v)
	}
	stall := stallMoves(n)
	for pass := int32(1); pass <= int32(passes); pass++ {
		moves = moves[:0]
		var cur, best int64
		bestLen := 0
		for len(heap) > 0 && len(moves)-bestLen < stall {
			e := heap.pop()
			v := e.v
			if locked[v] == pass || e.gain != key[v] {
				continue
			}
			gain, to := r.bestMove(g, part, v)
			if key[v] = gain; to < 0 {
				continue
			}
			if gain < e.gain {
				heap.push(gainEntry{gain, v})
				continue
			}
			a := part[v]
			moves = append(moves, move{v, a})
			r.move(g, part, v, to)
			locked[v] = pass
			if cur += gain; cur > best {
				best, bestLen = cur, len(moves)
			}
			for x := g.xadj[v]; x < g.xadj[v+1]; x++ {
				u := g.adj[x]
				q := part[u]
				if locked[u] == pass || q == to || g.xadj[u+1]-g.xadj[u] > maxDeg {
					continue
				}
				if q == a {
					key[u] += 2 * g.weight(x)
				} else {
					key[u] += g.weight(x)
				}
				heap.push(gainEntry{key[u], u})
			}
		}
		for i := len(moves) - 1; i >= bestLen; i-- {
			r.move(g, part, moves[i].v, moves[i].from)
		}
		if bestLen == 0 {
			return
		}
		// The next pass goes on with the queue as it is: taking a move back lowers the gains it
		// raised, so its keys are still upper bounds. The vertices moved are queued again: those
		// kept with their new gains, those taken back with the gain they had (every later move
		// was taken back with them).
		for i, m := range moves {
			if i < bestLen {
				push(m.v)
			} else {
				heap.push(gainEntry{key[m.v], m.v})
			}
		}
	}
}
