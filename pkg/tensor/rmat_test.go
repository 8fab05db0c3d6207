package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"unsafe"
)

// rmatEdges returns m distinct undirected R-MAT edges (a, b, c, d = 0.57, 0.19, 0.19, 0.05) over n
// vertices as keys lo·n+hi with lo < hi, ids randomly permuted, sorted. It is the generator of
// the PyTorch reference (../shared/peers/torch_gcn.py), re-implemented here so that these
// benchmarks do not depend on package graph.
func rmatEdges(n, m int, seed uint64) []int64 {
	scale := max(1, bits.Len(uint(n-1)))
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	// quadrant thresholds on 16-bit uniforms: a, a+b, a+b+c
	const t1, t2, t3 = 37356, 49807, 62259
	keys := make([]int64, 0, m+m/10)
	for len(keys) < m {
		need := (m-len(keys))*21/20 + 1024
		for e := 0; e < need; e++ {
			var u, v uint64
			var r uint64
			for l := 0; l < scale; l++ {
				if l%4 == 0 {
					r = rng.Uint64()
				}
				x := r & 0xFFFF
				r >>= 16
				ub := b2u(x >= t2)
				vb := b2u((x >= t1 && x < t2) || x >= t3)
				u = u<<1 | ub
				v = v<<1 | vb
			}
			if u >= uint64(n) || v >= uint64(n) || u == v {
				continue
			}
			lo, hi := min(u, v), max(u, v)
			keys = append(keys, int64(lo)*int64(n)+int64(hi))
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
	}
	if len(keys) > m {
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		keys = keys[:m]
	}
	perm := rng.Perm(n)
	for i, k := range keys {
		u, v := int64(perm[k/int64(n)]), int64(perm[k%int64(n)])
		keys[i] = min(u, v)*int64(n) + max(u, v)
	}
	slices.Sort(keys)
	return keys
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// gcnAdjacency builds Â = D̃^-1/2 (A+I) D̃^-1/2 from undirected edge keys, both directions.
func gcnAdjacency(n int, keys []int64) *CSR {
	deg := make([]int64, n)
	for _, k := range keys {
		deg[k/int64(n)]++
		deg[k%int64(n)]++
	}
	a := &CSR{Rows: n, Cols: n, RowPtr: make([]int64, n+1)}
	for i := 0; i < n; i++ {
		deg[i]++ // self loop
		a.RowPtr[i+1] = a.RowPtr[i] + deg[i]
	}
	nnz := a.RowPtr[n]
	a.ColIdx = make([]int32, nnz)
	a.Val = make([]float32, nnz)
	next := slices.Clone(a.RowPtr[:n])
	put := func(r, c int64) {
		a.ColIdx[next[r]] = int32(c)
		next[r]++
	}
	// Keys are sorted by (lo, hi): emitting, for every row, first the edges where it is the hi end
	// (in increasing lo), then itself, then those where it is the lo end keeps columns sorted.
	for _, k := range keys { // (hi, lo) direction: row hi gets column lo, lo increasing
		put(k%int64(n), k/int64(n))
	}
	for i := int64(0); i < int64(n); i++ {
		put(i, i)
	}
	for _, k := range keys {
		put(k/int64(n), k%int64(n))
	}
	// The second pass above is ordered by lo, then hi; rows receiving (hi, lo) entries got them in
	// key order, which for a fixed hi is increasing lo. Sort rows anyway to be safe.
	for i := 0; i < n; i++ {
		s, e := a.RowPtr[i], a.RowPtr[i+1]
		if !slices.IsSorted(a.ColIdx[s:e]) {
			slices.Sort(a.ColIdx[s:e])
		}
	}
	for i := 0; i < n; i++ {
		di := 1 / math.Sqrt(float64(deg[i]))
		for k := a.RowPtr[i]; k < a.RowPtr[i+1]; k++ {
			a.Val[k] = float32(di / math.Sqrt(float64(deg[a.ColIdx[k]])))
		}
	}
	return a
}

var rmatCache sync.Map

// rmatGraph returns the GCN-normalised R-MAT graph with n vertices and about directed directed
// edges plus self loops, cached in the temporary directory across runs.
func rmatGraph(tb testing.TB, n, directed int) *CSR {
	key := fmt.Sprintf("%d-%d", n, directed)
	if a, ok := rmatCache.Load(key); ok {
		return a.(*CSR)
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("dorylus-tensor-rmat-%d-%d-v1.bin", n, directed))
	a, err := loadCSR(path)
	if err != nil {
		a = gcnAdjacency(n, rmatEdges(n, directed/2, 1))
		if err := saveCSR(path, a); err != nil {
			tb.Logf("caching %s: %v", path, err)
		}
	}
	if err := a.Validate(); err != nil {
		tb.Fatal(err)
	}
	rmatCache.Store(key, a)
	return a
}

func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

func saveCSR(path string, a *CSR) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	hdr := []int64{int64(a.Rows), int64(a.Cols), a.NNZ()}
	for _, part := range [][]byte{asBytes(hdr), asBytes(a.RowPtr), asBytes(a.ColIdx), asBytes(a.Val)} {
		if _, err := f.Write(part); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func loadCSR(path string) (*CSR, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(buf) < 24 {
		return nil, fmt.Errorf("%s: short file", path)
	}
	rows, cols, nnz := int(binary.LittleEndian.Uint64(buf)), int(binary.LittleEndian.Uint64(buf[8:])), int(binary.LittleEndian.Uint64(buf[16:]))
	if want := 24 + 8*(rows+1) + 8*nnz; len(buf) != want {
		return nil, fmt.Errorf("%s: %d bytes, want %d", path, len(buf), want)
	}
	a := &CSR{Rows: rows, Cols: cols, RowPtr: make([]int64, rows+1), ColIdx: make([]int32, nnz), Val: make([]float32, nnz)}
	o := 24
	o += copy(asBytes(a.RowPtr), buf[o:])
	o += copy(asBytes(a.ColIdx), buf[o:])
	copy(asBytes(a.Val), buf[o:])
	return a, nil
}

func TestRMATGenerator(t *testing.T) {
	keys := rmatEdges(1000, 5000, 3)
	if len(keys) != 5000 {
		t.Fatalf("%d edges", len(keys))
	}
	a := gcnAdjacency(1000, keys)
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if a.NNZ() != 2*5000+1000 {
		t.Fatalf("nnz %d", a.NNZ())
	}
	// symmetric, normalised: Â = Âᵀ
	if at := Transpose(a); !at.Equal(a) {
		t.Fatal("normalised adjacency is not symmetric")
	}
	// skewed: the top 1% of vertices hold far more than 1% of the entries
	deg := DegreeOrder(a)
	top := 0
	for _, v := range deg[:10] {
		top += a.Degree(int(v))
	}
	if float64(top) < 0.05*float64(a.NNZ()) {
		t.Errorf("top 1%% of vertices hold only %d of %d entries", top, a.NNZ())
	}
}
