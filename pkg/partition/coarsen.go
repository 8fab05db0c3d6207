package partition

import (
	"math/rand/v2"
)

// wgraph is one level of the multilevel hierarchy: a symmetric graph in CSR form with vertex
// and edge weights. At the finest level a vertex weighs 1 + its degree and every edge 1 (ew
// nil); a coarse vertex weighs the sum of the fine vertices it stands for and a coarse edge the
// number of fine adjacency entries it stands for.
type wgraph struct {
	xadj []int64 // n+1 row offsets
	adj  []int32 // neighbours, no self loops
	ew   []int32 // edge weights; nil when every edge weighs 1
	vw   []int64 // vertex weights
	tw   int64   // total vertex weight
}

// n returns the number of vertices.
func (g *wgraph) n() int { return len(g.xadj) - 1 }

// weight returns the weight of adjacency entry e.
func (g *wgraph) weight(e int64) int64 {
	if g.ew == nil {
		return 1
	}
	return int64(g.ew[e])
}

// coarsener holds the scratch space the matchings and contractions of one run share.
type coarsener struct {
	rng   *rand.Rand
	maxVW int64 // no coarse vertex may weigh more
}

// Matching limits: 2-hop matching runs when heavy-edge matching leaves more than this fraction
// of the vertices unmatched, and pairs only vertices of at most twoHopDegree neighbours.
const (
	twoHopFraction = 0.10
	twoHopDegree   = 64
)

// match computes a matching of g: match[v] is v's partner, or v itself. Vertices are visited in
// order of increasing degree (ties in random order) and each is matched to the unmatched
// neighbour joined by the heaviest edge, preferring the lighter vertex on ties (sorted heavy-edge
// matching, as METIS's SHEM). Vertices left over are paired with unmatched vertices sharing a
// neighbour (2-hop matching, for the many low-degree vertices of skewed graphs) and isolated
// vertices with each other.
func (c *coarsener) match(g *wgraph) []int32 {
	n := g.n()
	match := make([]int32, n)
	for v := range match {
		match[v] = -1
	}
	unmatched := 0
	for _, u := range c.degreeOrder(g) {
		if match[u] != -1 {
			continue
		}
		best, bestW := int32(-1), int64(-1)
		for e := g.xadj[u]; e < g.xadj[u+1]; e++ {
			v := g.adj[e]
			if match[v] != -1 || g.vw[u]+g.vw[v] > c.maxVW {
				continue
			}
			if w := g.weight(e); w > bestW || (w == bestW && g.vw[v] < g.vw[best]) {
				best, bestW = v, w
			}
		}
		if best >= 0 {
			match[u], match[best] = best, u
		} else {
			unmatched++
		}
	}
	if float64(unmatched) > twoHopFraction*float64(n) {
		c.matchTwoHop(g, match)
	}
	for v, m := range match {
		if m == -1 {
			match[v] = int32(v)
		}
	}
	return match
}

// matchTwoHop pairs unmatched low-degree vertices that share a neighbour, and unmatched
// isolated vertices with each other.
func (c *coarsener) matchTwoHop(g *wgraph, match []int32) {
	n := g.n()
	isolated := int32(-1)
	for h := range n {
		if g.xadj[h] == g.xadj[h+1] {
			if match[h] != -1 {
				continue
			}
			if isolated >= 0 && g.vw[isolated]+g.vw[h] <= c.maxVW {
				match[isolated], match[h] = int32(h), isolated
				isolated = -1
			} else {
				isolated = int32(h)
			}
			continue
		}
		cand := int32(-1)
		for e := g.xadj[h]; e < g.xadj[h+1]; e++ {
			v := g.adj[e]
			if match[v] != -1 || g.xadj[v+1]-g.xadj[v] > twoHopDegree {
				continue
			}
			if cand >= 0 && g.vw[cand]+g.vw[v] <= c.maxVW {
				match[cand], match[v] = v, cand
				cand = -1
			} else {
				cand = v
			}
		}
	}
}

// degreeOrder returns the vertices sorted by degree (capped at four times the mean), ties in
// random order: a random permutation bucket-sorted by degree.
func (c *coarsener) degreeOrder(g *wgraph) []int32 {
	n := g.n()
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	c.rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	limit := int64(4*float64(g.xadj[n])/float64(max(n, 1))) + 1
	count := make([]int64, limit+2)
	key := func(v int32) int64 { return min(g.xadj[v+1]-g.xadj[v], limit) }
	for _, v := range perm {
		count[key(v)+1]++
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	order := make([]int32, n)
	for _, v := range perm {
		k := key(v)
		order[count[k]] = v
		count[k]++
	}
	return order
}

// contract returns the coarse graph of g under match and cmap, the coarse vertex of every fine
// vertex. Coarse vertex ids follow the smaller fine id of each pair. Two passes over the edges
// (count, then fill) size the coarse arrays exactly; a marker array indexed by coarse vertex
// merges parallel edges without per-edge allocation.
func (c *coarsener) contract(g *wgraph, match []int32) (*wgraph, []int32) {
	n := g.n()
	cmap := make([]int32, n)
	cn := int32(0)
	for v := range n {
		if m := int(match[v]); m >= v {
			cmap[v] = cn
			cmap[m] = cn
			cn++
		}
	}
	cg := &wgraph{xadj: make([]int64, cn+1), vw: make([]int64, cn), tw: g.tw}
	pos := make([]int32, cn) // per coarse neighbour: 1 + its slot in the current row, 0 if absent
	var row []int32          // coarse neighbours of the current coarse vertex
	// visit calls fn(cv, u) for the one or two fine vertices u of every coarse vertex cv.
	visit := func(fn func(cv int32, u int)) {
		for v := range n {
			if m := int(match[v]); m >= v {
				fn(cmap[v], v)
				if m != v {
					fn(cmap[v], m)
				}
			}
		}
	}
	// Pass 1: degrees.
	cur := int32(-1)
	flush := func() {
		if cur >= 0 {
			cg.xadj[cur+1] = int64(len(row))
			for _, x := range row {
				pos[x] = 0
			}
			row = row[:0]
		}
	}
	visit(func(cv int32, u int) {
		if cv != cur {
			flush()
			cur = cv
		}
		cg.vw[cv] += g.vw[u]
		for e := g.xadj[u]; e < g.xadj[u+1]; e++ {
			x := cmap[g.adj[e]]
			if x != cv && pos[x] == 0 {
				row = append(row, x)
				pos[x] = int32(len(row))
			}
		}
	})
	flush()
	for v := range cn {
		cg.xadj[v+1] += cg.xadj[v]
	}
	m := cg.xadj[cn]
	cg.adj = make([]int32, m)
	cg.ew = make([]int32, m)
	// Pass 2: neighbours and merged weights.
	cur = -1
	var base int64
	visit(func(cv int32, u int) {
		if cv != cur {
			for e := cg.xadj[max(cur, 0)]; cur >= 0 && e < base; e++ {
				pos[cg.adj[e]] = 0
			}
			cur = cv
			base = cg.xadj[cv]
		}
		for e := g.xadj[u]; e < g.xadj[u+1]; e++ {
			x := cmap[g.adj[e]]
			if x == cv {
				continue
			}
			if pos[x] == 0 {
				cg.adj[base] = x
				cg.ew[base] = int32(g.weight(e))
				base++
				pos[x] = int32(base - cg.xadj[cv])
			} else {
				cg.ew[cg.xadj[cv]+int64(pos[x])-1] += int32(g.weight(e))
			}
		}
	})
	return cg, cmap
}
