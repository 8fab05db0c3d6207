package tensor

import (
	"fmt"
	"slices"
)

// A vertex ordering is a permutation perm of [0, n): new vertex i is old vertex perm[i]. Applying
// it to a square matrix (PermuteCSR) and to the dense rows it multiplies (PermuteRows) gives the
// same product, permuted; InversePermutation maps results back.

// DegreeOrder returns the ordering of a square matrix's vertices by decreasing row degree (ties by
// old index). The high-degree rows, which R-MAT graphs gather most often, end up next to one
// another, so their rows of the dense operand share pages and stay cached.
func DegreeOrder(a *CSR) []int32 {
	n := a.Rows
	maxDeg := 0
	for i := 0; i < n; i++ {
		maxDeg = max(maxDeg, a.Degree(i))
	}
	// counting sort, descending
	count := make([]int, maxDeg+2)
	for i := 0; i < n; i++ {
		count[maxDeg-a.Degree(i)+1]++
	}
	for d := 1; d < len(count); d++ {
		count[d] += count[d-1]
	}
	perm := make([]int32, n)
	for i := 0; i < n; i++ {
		k := maxDeg - a.Degree(i)
		perm[count[k]] = int32(i)
		count[k]++
	}
	return perm
}

// RCMOrder returns a reverse Cuthill–McKee ordering of a square matrix treated as a graph: a
// breadth-first search from a lowest-degree vertex of each component, visiting neighbours by
// increasing degree, reversed. Neighbouring vertices get nearby indices.
func RCMOrder(a *CSR) []int32 {
	n := a.Rows
	byDeg := DegreeOrder(a) // decreasing degree
	slices.Reverse(byDeg)   // increasing degree: component starts
	visited := make([]bool, n)
	perm := make([]int32, 0, n)
	var nb []int32
	for _, s := range byDeg {
		if visited[s] {
			continue
		}
		visited[s] = true
		head := len(perm)
		perm = append(perm, s)
		for head < len(perm) {
			v := perm[head]
			head++
			nb = nb[:0]
			for _, u := range a.ColIdx[a.RowPtr[v]:a.RowPtr[v+1]] {
				if !visited[u] {
					visited[u] = true
					nb = append(nb, u)
				}
			}
			slices.SortFunc(nb, func(x, y int32) int { return a.Degree(int(x)) - a.Degree(int(y)) })
			perm = append(perm, nb...)
		}
	}
	slices.Reverse(perm)
	return perm
}

// InversePermutation returns inv with inv[perm[i]] = i.
func InversePermutation(perm []int32) []int32 {
	inv := make([]int32, len(perm))
	for i, p := range perm {
		inv[p] = int32(i)
	}
	return inv
}

// CheckPermutation reports whether perm is a permutation of [0, n).
func CheckPermutation(perm []int32, n int) error {
	if len(perm) != n {
		return fmt.Errorf("tensor: permutation of %d entries for %d vertices", len(perm), n)
	}
	seen := make([]bool, n)
	for i, p := range perm {
		if p < 0 || int(p) >= n || seen[p] {
			return fmt.Errorf("tensor: permutation entry %d is %d: out of range or repeated", i, p)
		}
		seen[p] = true
	}
	return nil
}

// PermuteCSR returns P·a·Pᵀ for a square matrix: entry (i, j) of the result is entry (perm[i],
// perm[j]) of a. Column indices stay increasing within rows.
func PermuteCSR(a *CSR, perm []int32) *CSR {
	if a.Rows != a.Cols {
		must(shapeErr("PermuteCSR", "matrix is %dx%d, not square", a.Rows, a.Cols))
	}
	must(CheckPermutation(perm, a.Rows))
	inv := InversePermutation(perm)
	n := a.Rows
	out := &CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1), ColIdx: make([]int32, a.NNZ())}
	if a.Val != nil {
		out.Val = make([]float32, a.NNZ())
	}
	for i := 0; i < n; i++ {
		out.RowPtr[i+1] = out.RowPtr[i] + int64(a.Degree(int(perm[i])))
	}
	ParallelFor(n, 1024, func(lo, hi int) {
		type entry struct {
			c int32
			v float32
		}
		var buf []entry
		for i := lo; i < hi; i++ {
			old := int(perm[i])
			s, e := a.RowPtr[old], a.RowPtr[old+1]
			buf = buf[:0]
			for k := s; k < e; k++ {
				v := float32(1)
				if a.Val != nil {
					v = a.Val[k]
				}
				buf = append(buf, entry{inv[a.ColIdx[k]], v})
			}
			slices.SortFunc(buf, func(x, y entry) int { return int(x.c) - int(y.c) })
			o := out.RowPtr[i]
			for j, en := range buf {
				out.ColIdx[o+int64(j)] = en.c
				if out.Val != nil {
					out.Val[o+int64(j)] = en.v
				}
			}
		}
	})
	return out
}

// PermuteRows sets dst row i to src row perm[i]; dst and src must have the same shape and must
// not alias. With perm = InversePermutation(p) it undoes PermuteRows with p.
func PermuteRows(dst, src *Dense, perm []int32) {
	must(CheckSameShape("PermuteRows", dst, src))
	if len(perm) != src.Rows {
		must(shapeErr("PermuteRows", "permutation of %d for %d rows", len(perm), src.Rows))
	}
	n := src.Cols
	ParallelFor(src.Rows, max(1, elemGrain/max(n, 1)), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			p := int(perm[i])
			copy(dst.Data[i*n:(i+1)*n], src.Data[p*n:(p+1)*n])
		}
	})
}
