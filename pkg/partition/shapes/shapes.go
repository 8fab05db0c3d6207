// Package shapes builds graphs of other shapes than the shipped datasets' — R-MAT graphs of any
// skew, 2-D grids, random regular graphs, and any graph with its vertices renumbered at random —
// on which the multilevel partitioner's cut is held against METIS's (pkg/partition's tests and
// hack/bench/partition). Every graph is a symmetric adjacency without self loops or repeated
// edges, its vertices numbered at random (a seeded permutation), so that no partitioner profits
// from an order the generator left.
package shapes

import (
	"cmp"
	"math/rand/v2"
	"slices"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// FromEdges returns the adjacency of n vertices with the undirected edges (each stored in both
// directions, rows sorted); the edges must be distinct and no self loops.
func FromEdges(n int, edges [][2]int32) *tensor.CSR {
	adj := &tensor.CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1)}
	for _, e := range edges {
		adj.RowPtr[e[0]+1]++
		adj.RowPtr[e[1]+1]++
	}
	for v := range n {
		adj.RowPtr[v+1] += adj.RowPtr[v]
	}
	adj.ColIdx = make([]int32, adj.RowPtr[n])
	next := slices.Clone(adj.RowPtr[:n])
	for _, e := range edges {
		adj.ColIdx[next[e[0]]] = e[1]
		next[e[0]]++
		adj.ColIdx[next[e[1]]] = e[0]
		next[e[1]]++
	}
	for v := range n {
		slices.Sort(adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]])
	}
	return adj
}

// RMAT returns an R-MAT graph of 2^scale vertices from m edges drawn with quadrant
// probabilities a, b, c and 1-a-b-c (graph.RMAT's are 0.57, 0.19, 0.19), self loops and repeats
// dropped.
func RMAT(scale, m int, a, b, c float64, seed uint64) *tensor.CSR {
	rng := rand.New(rand.NewPCG(seed, 2))
	edges := make([][2]int32, 0, m)
	for range m {
		var u, v int32
		for range scale {
			u, v = 2*u, 2*v
			switch x := rng.Float64(); {
			case x < a:
			case x < a+b:
				v++
			case x < a+b+c:
				u++
			default:
				u, v = u+1, v+1
			}
		}
		if u != v {
			edges = append(edges, [2]int32{min(u, v), max(u, v)})
		}
	}
	return permuted(1<<scale, distinct(edges), seed)
}

// Grid returns the w×h grid, each vertex joined to its 4 neighbours.
func Grid(w, h int, seed uint64) *tensor.CSR {
	var edges [][2]int32
	for y := range h {
		for x := range w {
			v := int32(y*w + x)
			if x+1 < w {
				edges = append(edges, [2]int32{v, v + 1})
			}
			if y+1 < h {
				edges = append(edges, [2]int32{v, v + int32(w)})
			}
		}
	}
	return permuted(w*h, edges, seed)
}

// Regular returns a random d-regular graph of n vertices by the pairing model: the n·d stubs
// are shuffled and paired, and the few self loops and repeated pairs dropped (so a handful of
// vertices have degree below d).
func Regular(n, d int, seed uint64) *tensor.CSR {
	rng := rand.New(rand.NewPCG(seed, 3))
	stubs := make([]int32, n*d)
	for i := range stubs {
		stubs[i] = int32(i / d)
	}
	rng.Shuffle(len(stubs), func(i, j int) { stubs[i], stubs[j] = stubs[j], stubs[i] })
	edges := make([][2]int32, 0, len(stubs)/2)
	for i := 0; i+1 < len(stubs); i += 2 {
		if u, v := stubs[i], stubs[i+1]; u != v {
			edges = append(edges, [2]int32{min(u, v), max(u, v)})
		}
	}
	return permuted(n, distinct(edges), seed)
}

// Permuted returns the symmetric adjacency adj with its vertices renumbered at random.
func Permuted(adj *tensor.CSR, seed uint64) *tensor.CSR {
	edges := make([][2]int32, 0, adj.NNZ()/2)
	for u := range adj.Rows {
		for _, v := range adj.ColIdx[adj.RowPtr[u]:adj.RowPtr[u+1]] {
			if int32(u) < v {
				edges = append(edges, [2]int32{int32(u), v})
			}
		}
	}
	return permuted(adj.Rows, edges, seed)
}

// distinct sorts the edges (each given as u < v) and drops repeats.
func distinct(edges [][2]int32) [][2]int32 {
	slices.SortFunc(edges, func(x, y [2]int32) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	return slices.Compact(edges)
}

// permuted returns the adjacency of the edges with vertex v renamed π(v), π a random
// permutation.
func permuted(n int, edges [][2]int32, seed uint64) *tensor.CSR {
	pi := rand.New(rand.NewPCG(seed, 4)).Perm(n)
	for i, e := range edges {
		edges[i] = [2]int32{int32(pi[e[0]]), int32(pi[e[1]])}
	}
	return FromEdges(n, edges)
}
