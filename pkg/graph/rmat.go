package graph

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// RMATParams describes a synthetic R-MAT graph (see RMAT).
type RMATParams struct {
	Nodes    int    // N ≥ 2
	Edges    int    // directed edges E, even: E/2 distinct undirected pairs, each stored both ways
	Features int    // dense feature columns; 0 for a graph-only dataset
	Classes  int    // label classes, ≥ 1
	Seed     uint64 // the seed of every random stream
}

// Defaults of the optional keys of an rmat: spec, those of the PyTorch reference's synthetic mode.
const (
	defaultRMATFeatures = 128
	defaultRMATClasses  = 16
)

// String returns p as an rmat: spec that Load and ParseRMATSpec accept.
func (p RMATParams) String() string {
	return fmt.Sprintf("rmat:nodes=%d,edges=%d,features=%d,classes=%d,seed=%d", p.Nodes, p.Edges, p.Features, p.Classes, p.Seed)
}

// ParseRMATSpec parses "rmat:nodes=N,edges=E[,features=F][,classes=C][,seed=S]" (the "rmat:"
// prefix optional); numbers are decimal and may end in k, M or G (×10³, ×10⁶, ×10⁹). Features
// default to 128, classes to 16 and the seed to 0, as in the PyTorch reference.
func ParseRMATSpec(spec string) (RMATParams, error) {
	body := strings.TrimPrefix(spec, "rmat:")
	p := RMATParams{Features: defaultRMATFeatures, Classes: defaultRMATClasses}
	seen := map[string]bool{}
	for kv := range strings.SplitSeq(body, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return p, fmt.Errorf("graph: rmat spec %q: %q is not key=value", spec, kv)
		}
		if seen[k] {
			return p, fmt.Errorf("graph: rmat spec %q: key %s given twice", spec, k)
		}
		seen[k] = true
		if !slices.Contains([]string{"nodes", "edges", "features", "classes", "seed"}, k) {
			return p, fmt.Errorf("graph: rmat spec %q: unknown key %q (want nodes, edges, features, classes, seed)", spec, k)
		}
		x, err := parseCount(v)
		if err != nil {
			return p, fmt.Errorf("graph: rmat spec %q: %s: %v", spec, k, err)
		}
		if k != "seed" && x > math.MaxInt32*uint64(math.MaxInt32) {
			return p, fmt.Errorf("graph: rmat spec %q: %s=%s is too large", spec, k, v)
		}
		switch k {
		case "nodes":
			p.Nodes = int(x)
		case "edges":
			p.Edges = int(x)
		case "features":
			p.Features = int(x)
		case "classes":
			p.Classes = int(x)
		case "seed":
			p.Seed = x
		}
	}
	for _, k := range []string{"nodes", "edges"} {
		if !seen[k] {
			return p, fmt.Errorf("graph: rmat spec %q: %s is required", spec, k)
		}
	}
	return p, p.check()
}

// parseCount parses a non-negative decimal integer with an optional k, M or G suffix.
func parseCount(s string) (uint64, error) {
	mult := uint64(1)
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'k', 'K':
			mult, s = 1e3, s[:n-1]
		case 'M':
			mult, s = 1e6, s[:n-1]
		case 'G':
			mult, s = 1e9, s[:n-1]
		}
	}
	x, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a non-negative integer", s)
	}
	hi, lo := bits.Mul64(x, mult)
	if hi != 0 {
		return 0, fmt.Errorf("%q overflows", s)
	}
	return lo, nil
}

// Limits on what RMAT will try to allocate.
const (
	maxRMATEdges  = 1 << 34
	maxRMATValues = 1 << 34 // Nodes × Features
)

// check reports impossible or unreasonable parameters.
func (p RMATParams) check() error {
	n := int64(p.Nodes)
	switch {
	case p.Nodes < 2 || p.Nodes > math.MaxInt32:
		return fmt.Errorf("graph: rmat: nodes=%d outside [2, %d]", p.Nodes, math.MaxInt32)
	case p.Edges < 0 || p.Edges%2 != 0:
		return fmt.Errorf("graph: rmat: edges=%d must be even and ≥ 0 (it counts both directions of each undirected edge)", p.Edges)
	case int64(p.Edges/2) > n*(n-1)/2:
		return fmt.Errorf("graph: rmat: edges=%d needs %d distinct undirected pairs, but %d nodes have only N(N-1)/2 = %d", p.Edges, p.Edges/2, n, n*(n-1)/2)
	case p.Edges > maxRMATEdges:
		return fmt.Errorf("graph: rmat: edges=%d exceeds the generator's limit of %d", p.Edges, int64(maxRMATEdges))
	case p.Features < 0 || n*int64(p.Features) > maxRMATValues:
		return fmt.Errorf("graph: rmat: features=%d must be ≥ 0 with nodes × features ≤ %d", p.Features, int64(maxRMATValues))
	case p.Classes < 1 || p.Classes > maxClasses:
		return fmt.Errorf("graph: rmat: classes=%d outside [1, %d]", p.Classes, maxClasses)
	}
	return nil
}

// The R-MAT quadrant probabilities (a, b, c, d) = (0.57, 0.19, 0.19, 0.05), as thresholds on a
// uniform 32-bit draw x: x < ⌊a·2³²⌋ picks (0,0), x < ⌊(a+b)·2³²⌋ picks (0,1) (the second endpoint
// gets bit 1), x < ⌊(a+b+c)·2³²⌋ picks (1,0), anything else (1,1).
const (
	rmatTA   = 2448131358 // ⌊0.57·2³²⌋
	rmatTAB  = 3264175144 // ⌊0.76·2³²⌋
	rmatTABC = 4080218931 // ⌊0.95·2³²⌋
)

// rmatChunk is the number of draws (and feature values) per random stream.
const rmatChunk = 1 << 20

// Tags that keep the random streams of the generator's stages apart.
const (
	tagEdges uint64 = iota + 1
	tagSample
	tagPermute
	tagFeatures
	tagLabels
	tagSplit
)

// RMAT generates a synthetic dataset, following rmat_edges of the PyTorch reference
// (shared/peers/torch_gcn.py):
//   - scale = ⌈log2 N⌉; each draw picks, per level, one quadrant with probabilities
//     (a, b, c, d) = (0.57, 0.19, 0.19, 0.05) from one uniform draw;
//   - a pair with an endpoint ≥ N, or with u == v, is rejected; pairs are undirected keys
//     (min, max), deduplicated; rounds of draws continue until E/2 distinct pairs exist, and when
//     more were found a uniform random subset of exactly E/2 is kept;
//   - node ids are randomly permuted and both directions stored, so Adj has exactly E entries;
//   - features are dense standard-normal float32, labels uniform in [0, C), all nodes labelled;
//   - a random ⌊N/10⌋ nodes form Train, another ⌊N/10⌋ Val, and the rest Test.
//
// The result depends only on p (not on GOMAXPROCS): draws come from fixed-size chunks, each with
// its own PCG stream seeded from (Seed, stage, round, chunk). Draws are uint64 keys, radix-sorted
// (16 bytes per drawn pair while sorting) and merged in place, never per-edge objects; then the
// CSR takes 4 bytes per entry. Peak memory measured for 10⁸ edges on 5·10⁶ nodes: 1.2 GB. A graph too dense for R-MAT's skew to fill (most pairs drawn only with tiny
// probability) is refused with an error after a bounded number of draws.
func RMAT(p RMATParams) (*Dataset, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	n, m := p.Nodes, p.Edges/2
	keys, shift, err := rmatKeys(n, m, p.Seed)
	if err != nil {
		return nil, err
	}
	keys = sampleSorted(keys, m, rand.New(newStream(p.Seed, tagSample, 0, 0)))
	perm := permutation(n, rand.New(newStream(p.Seed, tagPermute, 0, 0)))
	adj := symmetricCSR(n, keys, shift, perm) // keys is dead from here: the features below may reuse its memory

	name := fmt.Sprintf("rmat-n%d-e%d-f%d-c%d-s%d", p.Nodes, p.Edges, p.Features, p.Classes, p.Seed)
	d := &Dataset{Name: name, NumClasses: p.Classes, Adj: adj}
	if p.Features > 0 {
		d.Features.Dense = normalFeatures(n, p.Features, p.Seed)
	}
	lr := rand.New(newStream(p.Seed, tagLabels, 0, 0))
	d.Labels = make([]int32, n)
	for i := range d.Labels {
		d.Labels[i] = int32(lr.IntN(p.Classes))
	}
	d.Train, d.Val, d.Test = randomSplit(n, rand.New(newStream(p.Seed, tagSplit, 0, 0)))

	seed := int64(p.Seed)
	d.Meta = Meta{
		Name: d.Name, NumNodes: n, NumEdges: int64(p.Edges), NumUndirectedEdges: int64(m),
		NumFeatures: p.Features, NumClasses: p.Classes, FeaturesAvailable: p.Features > 0,
		EdgeFile: edgeFileName(adj), IsolatedNodes: isolatedNodes(adj),
		ClassCounts: classCounts(d.Labels, p.Classes),
		SplitSizes:  SplitSizes{len(d.Train), len(d.Val), len(d.Test)},
		Split:       "random: floor(N/10) nodes train, another floor(N/10) val, the rest test (seeded)",
		SplitSeed:   &seed,
		Source: p.String() + "; R-MAT (a, b, c, d) = (0.57, 0.19, 0.19, 0.05), scale ceil(log2 N), " +
			"rejected pairs with an endpoint >= N or u == v, deduplicated undirected pairs, node ids permuted",
	}
	if p.Features > 0 {
		nz := d.Features.Nonzeros()
		d.Meta.NumFeatureNonzeros = &nz
		d.Meta.FeatureType = "random standard normal float32, dense"
	} else {
		d.Meta.Missing = "features: generated with features=0 (graph only)"
	}
	return d, nil
}

// splitmix64 is a bijective 64-bit mixer (the SplitMix64 output function).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// newStream returns the PCG stream for (seed, stage tag, a, b).
func newStream(seed, tag, a, b uint64) *rand.PCG {
	h := splitmix64(seed)
	h = splitmix64(h ^ tag)
	h = splitmix64(h ^ a)
	h = splitmix64(h ^ b)
	return rand.NewPCG(h, splitmix64(h^0xda3e39cb94b95bdb))
}

// rmatKeys draws until at least m distinct undirected pairs exist and returns them sorted as keys
// lo<<shift | hi (this orders pairs as lo*N+hi does).
func rmatKeys(n, m int, seed uint64) ([]uint64, uint, error) {
	scale := max(1, bits.Len(uint(n-1)))
	shift := uint(scale)
	var keys []uint64
	var drawn int64
	rate := 1.0 // distinct pairs gained per draw in the previous round
	maxDraws := 32*int64(m) + 1<<22
	for round := uint64(0); len(keys) < m; round++ {
		missing := m - len(keys)
		need := min(int(float64(missing)*1.05/rate)+1024, m+rmatChunk)
		if drawn+int64(need) > maxDraws {
			return nil, 0, fmt.Errorf("graph: rmat: found only %d of %d distinct pairs over %d nodes after %d draws: "+
				"the graph is too dense for R-MAT's skewed distribution; ask for fewer edges or more nodes", len(keys), m, n, drawn)
		}
		drawn += int64(need)
		buf := make([]uint64, need)
		chunks := (need + rmatChunk - 1) / rmatChunk
		accepted := make([]int, chunks)
		parallelChunks(chunks, func(c int) {
			lo := c * rmatChunk
			hi := min(lo+rmatChunk, need)
			accepted[c] = drawPairs(buf[lo:hi], uint64(n), scale, newStream(seed, tagEdges, round, uint64(c)))
		})
		w := 0
		for c, k := range accepted {
			w += copy(buf[w:], buf[c*rmatChunk:c*rmatChunk+k])
		}
		buf = dedupSorted(radixSort(buf[:w], 2*shift))
		before := len(keys)
		keys = mergeDedup(keys, buf)
		rate = max(float64(len(keys)-before)/float64(need), 1e-3)
	}
	return keys, shift, nil
}

// drawPairs fills dst with R-MAT draws, keeping only the accepted ones (both endpoints < n,
// u != v) compacted at the front as lo<<scale | hi keys; it returns how many were kept.
func drawPairs(dst []uint64, n uint64, scale int, rng *rand.PCG) int {
	kept := 0
	for range dst {
		var u, v, r uint64
		for l := range scale {
			if l&1 == 0 {
				r = rng.Uint64()
			} else {
				r >>= 32
			}
			x := uint32(r)
			u = u<<1 | b2u(x >= rmatTAB)
			v = v<<1 | (b2u(x-rmatTA < rmatTAB-rmatTA) | b2u(x >= rmatTABC))
		}
		if u >= n || v >= n || u == v {
			continue
		}
		if u > v {
			u, v = v, u
		}
		dst[kept] = u<<uint(scale) | v
		kept++
	}
	return kept
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// radixSort sorts keys below 1<<keyBits with an LSD radix sort on bytes and returns the sorted
// slice (keys or a scratch buffer of the same length).
func radixSort(keys []uint64, keyBits uint) []uint64 {
	if len(keys) < 256 {
		slices.Sort(keys)
		return keys
	}
	tmp := make([]uint64, len(keys))
	src, dst := keys, tmp
	for sh := uint(0); sh < keyBits; sh += 8 {
		var count [256]int
		for _, k := range src {
			count[byte(k>>sh)]++
		}
		if count[byte(src[0]>>sh)] == len(src) {
			continue // every key has the same byte here
		}
		pos := 0
		for b := range count {
			c := count[b]
			count[b] = pos
			pos += c
		}
		for _, k := range src {
			b := byte(k >> sh)
			dst[count[b]] = k
			count[b]++
		}
		src, dst = dst, src
	}
	return src
}

// dedupSorted removes repeated keys from a sorted slice in place.
func dedupSorted(keys []uint64) []uint64 {
	if len(keys) == 0 {
		return keys
	}
	w := 1
	for _, k := range keys[1:] {
		if k != keys[w-1] {
			keys[w] = k
			w++
		}
	}
	return keys[:w]
}

// mergeDedup merges two sorted duplicate-free slices into one, reusing a's backing array when it
// has room: the merge runs from the back, so it never overwrites an element not yet read.
func mergeDedup(a, b []uint64) []uint64 {
	if len(a) == 0 {
		return b
	}
	total := len(a) + len(b)
	out := slices.Grow(a, len(b))[:total]
	i, j, k := len(a)-1, len(b)-1, total-1
	for j >= 0 {
		switch {
		case i >= 0 && out[i] > b[j]:
			out[k] = out[i]
			i--
		case i >= 0 && out[i] == b[j]:
			out[k] = b[j]
			i--
			j--
		default:
			out[k] = b[j]
			j--
		}
		k--
	}
	// out[:i+1] already holds the rest of a in place; close the gap left by duplicates.
	gap := k - i
	if gap > 0 {
		copy(out[i+1:], out[k+1:])
	}
	return out[:total-gap]
}

// sampleSorted keeps a uniform random subset of exactly m of the keys, in order (selection
// sampling, Knuth's Algorithm S), in place.
func sampleSorted(keys []uint64, m int, r *rand.Rand) []uint64 {
	if len(keys) <= m {
		return keys
	}
	kept := 0
	for i := 0; kept < m; i++ {
		if r.Uint64N(uint64(len(keys)-i)) < uint64(m-kept) {
			keys[kept] = keys[i]
			kept++
		}
	}
	return keys[:m]
}

// permutation returns a uniformly random permutation of [0, n).
func permutation(n int, r *rand.Rand) []int32 {
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	for i := n - 1; i > 0; i-- {
		j := r.IntN(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	return perm
}

// symmetricCSR stores both directions of each pair key (lo<<shift | hi), relabelled by perm.
func symmetricCSR(n int, keys []uint64, shift uint, perm []int32) *tensor.CSR {
	mask := uint64(1)<<shift - 1
	rowPtr := make([]int64, n+1)
	for _, k := range keys {
		rowPtr[perm[k>>shift]+1]++
		rowPtr[perm[k&mask]+1]++
	}
	for i := range n {
		rowPtr[i+1] += rowPtr[i]
	}
	colIdx := make([]int32, rowPtr[n])
	cur := slices.Clone(rowPtr[:n])
	for _, k := range keys {
		u, v := perm[k>>shift], perm[k&mask]
		colIdx[cur[u]] = v
		cur[u]++
		colIdx[cur[v]] = u
		cur[v]++
	}
	parallelRanges(n, rowGrain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			slices.Sort(colIdx[rowPtr[i]:rowPtr[i+1]])
		}
	})
	return &tensor.CSR{Rows: n, Cols: n, RowPtr: rowPtr, ColIdx: colIdx}
}

// normalFeatures returns an n×f matrix of standard-normal float32 values, generated in chunks of
// rows with their own streams.
func normalFeatures(n, f int, seed uint64) *tensor.Dense {
	x := tensor.NewDense(n, f)
	rows := max(1, rmatChunk/f)
	chunks := (n + rows - 1) / rows
	parallelChunks(chunks, func(c int) {
		r := rand.New(newStream(seed, tagFeatures, uint64(c), 0))
		lo, hi := c*rows*f, min((c+1)*rows, n)*f
		for i := lo; i < hi; i++ {
			x.Data[i] = float32(r.NormFloat64())
		}
	})
	return x
}

// randomSplit puts a random ⌊n/10⌋ nodes in train, another ⌊n/10⌋ in val and the rest in test,
// each sorted.
func randomSplit(n int, r *rand.Rand) (train, val, test []int32) {
	tenth := n / 10
	perm := permutation(n, r)
	which := make([]uint8, n) // 0 train, 1 val, 2 test
	for i, v := range perm {
		w := 2
		if i < 2*tenth {
			w = i / tenth
		}
		which[v] = uint8(w)
	}
	train, val, test = make([]int32, 0, tenth), make([]int32, 0, tenth), make([]int32, 0, n-2*tenth)
	for v, w := range which {
		switch w {
		case 0:
			train = append(train, int32(v))
		case 1:
			val = append(val, int32(v))
		default:
			test = append(test, int32(v))
		}
	}
	return train, val, test
}
