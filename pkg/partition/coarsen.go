package partition

import (
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
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
	rng      *rand.Rand
	maxVW    int64  // no coarse vertex may weigh more
	spillDir string // where large coarse graphs are built (os.TempDir when "")
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
// vertex. Coarse vertex ids follow the smaller fine id of each pair. The fine vertices are cut
// into blocks of about contractBlockEntries adjacency entries, and GOMAXPROCS workers build the coarse
// rows of a wave of blocks at once, each merging parallel edges through its own marker array
// indexed by coarse vertex (no per-edge allocation); while a wave is built, the rows of the
// previous one go, in order, to a sink that stores them: in memory, or, for a graph of more than
// spillAbove entries, in temporary files read back once complete, so that the coarse graph is
// never in memory beside its construction; with dropInput, g's adjacency is released before the
// coarse graph is read back, so that two large levels are never in memory together.
func (c *coarsener) contract(g *wgraph, match []int32, dropInput bool) (*wgraph, []int32, error) {
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
	out, err := c.newSink(cg, g.xadj[n])
	if err != nil {
		return nil, nil, err
	}
	defer out.close()
	workers := runtime.GOMAXPROCS(0)
	waves := [2][]*contractBlock{make([]*contractBlock, workers), make([]*contractBlock, workers)}
	for i := range workers {
		pos := make([]int32, cn) // worker i's, in either wave
		for w := range waves {
			size := min(2*contractBlockEntries, g.xadj[n])
			waves[w][i] = &contractBlock{pos: pos, adj: make([]int32, 0, size), ew: make([]int32, 0, size)}
		}
	}
	emit := func(wave []*contractBlock) {
		for _, b := range wave {
			start := 0
			for i, d := range b.deg {
				cv := b.first + int32(i)
				cg.xadj[cv+1] = cg.xadj[cv] + int64(d)
				out.write(b.adj[start:start+int(d)], b.ew[start:start+int(d)])
				start += int(d)
			}
		}
	}
	var prev []*contractBlock
	for lo, k := 0, 0; lo < n; k++ {
		wave, used := waves[k%2], 0
		var wg sync.WaitGroup
		for ; used < workers && lo < n; used++ {
			hi := rowsEnd(g.xadj, lo, 0, contractBlockEntries)
			wg.Add(1)
			go func(b *contractBlock, lo, hi int) {
				defer wg.Done()
				b.build(g, cg, match, cmap, lo, hi)
			}(wave[used], lo, hi)
			lo = hi
		}
		emit(prev)
		wg.Wait()
		prev = wave[:used]
	}
	emit(prev)
	if _, onDisk := out.(*fileSink); onDisk && dropInput {
		// The input is not needed any more: release it before the coarse graph is read back.
		g.adj, g.ew = nil, nil
		debug.FreeOSMemory()
	}
	if err := out.finish(); err != nil {
		return nil, nil, err
	}
	return cg, cmap, nil
}

// contractBlockEntries is about the number of fine adjacency entries in a block of contract (a
// variable so that tests can make many blocks of a small graph). Small blocks keep the workers'
// buffers, and the garbage of their growth, small beside a level.
var contractBlockEntries int64 = 1 << 19

// contractBlock holds one worker's coarse rows: those of the coarse vertices first,
// first+1, … of a block of fine vertices, their neighbours and merged weights one row after
// another.
type contractBlock struct {
	pos     []int32 // per coarse neighbour: 1 + its slot in the current row, 0 if absent
	first   int32
	deg     []int32
	adj, ew []int32
}

// build fills b with the coarse rows of the fine vertices [lo, hi) that stand for their pair
// (the smaller id of it), and sets their coarse weights in cg.
func (b *contractBlock) build(g, cg *wgraph, match, cmap []int32, lo, hi int) {
	b.deg, b.adj, b.ew = b.deg[:0], b.adj[:0], b.ew[:0]
	b.first = -1
	for v := lo; v < hi; v++ {
		m := int(match[v])
		if m < v {
			continue
		}
		cv := cmap[v]
		if b.first < 0 {
			b.first = cv
		}
		start := len(b.adj)
		for _, u := range [2]int{v, m} {
			cg.vw[cv] += g.vw[u]
			for e := g.xadj[u]; e < g.xadj[u+1]; e++ {
				x := cmap[g.adj[e]]
				if x == cv {
					continue
				}
				if p := b.pos[x]; p == 0 {
					b.adj = append(b.adj, x)
					b.ew = append(b.ew, int32(g.weight(e)))
					b.pos[x] = int32(len(b.adj) - start)
				} else {
					b.ew[start+int(p)-1] += int32(g.weight(e))
				}
			}
			if m == v {
				break
			}
		}
		for _, x := range b.adj[start:] {
			b.pos[x] = 0
		}
		b.deg = append(b.deg, int32(len(b.adj)-start))
	}
}
