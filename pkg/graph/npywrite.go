package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/npy"
)

// numpyArrays returns d as the arrays of a PyG Data object, in the order written: edge_index
// (int64, both directions of every edge, as PyG holds them), x (dense float32), y (int64) and
// the three bool masks.
func numpyArrays(d *Dataset) ([]string, []*npy.Array) {
	a, n := d.Adj, d.NumNodes()
	nnz := len(a.ColIdx)
	edges := make([]int64, 2*nnz)
	for u := range n {
		for k := a.RowPtr[u]; k < a.RowPtr[u+1]; k++ {
			edges[k], edges[int64(nnz)+k] = int64(u), int64(a.ColIdx[k])
		}
	}
	names := []string{npEdgeIndex}
	arrays := []*npy.Array{{DType: npy.Int64, Shape: []int{2, nnz}, Int64s: edges}}
	if d.Features.Present() {
		f := d.NumFeatures()
		x := make([]float32, n*f)
		for i := range n {
			if s := d.Features.Sparse; s != nil {
				for k := s.RowPtr[i]; k < s.RowPtr[i+1]; k++ {
					x[i*f+int(s.ColIdx[k])] = 1
					if s.Val != nil {
						x[i*f+int(s.ColIdx[k])] = s.Val[k]
					}
				}
			} else {
				copy(x[i*f:], d.Features.Dense.Row(i))
			}
		}
		names = append(names, npX)
		arrays = append(arrays, &npy.Array{DType: npy.Float32, Shape: []int{n, f}, Float32s: x})
	}
	y := make([]int64, n)
	for i, l := range d.Labels {
		y[i] = int64(l)
	}
	names = append(names, npY)
	arrays = append(arrays, &npy.Array{DType: npy.Int64, Shape: []int{n}, Int64s: y})
	for s, ids := range [][]int32{d.Train, d.Val, d.Test} {
		mask := make([]bool, n)
		for _, v := range ids {
			mask[v] = true
		}
		names = append(names, npMasks[s])
		arrays = append(arrays, &npy.Array{DType: npy.Bool, Shape: []int{n}, Bools: mask})
	}
	return names, arrays
}

// WriteNumPy writes d as the arrays of a PyG Data object, as LoadNumPy reads them: to one .npz
// archive when p ends in .npz (stored, as np.savez writes), else to directory p (created if
// needed), one NAME.npy file each.
func WriteNumPy(p string, d *Dataset) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("graph: write NumPy %s: %w", p, err)
	}
	names, arrays := numpyArrays(d)
	if strings.HasSuffix(p, ".npz") {
		b, err := npy.EncodeArchive(names, arrays)
		if err == nil {
			err = os.WriteFile(p, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("graph: write NumPy %s: %w", p, err)
		}
		return nil
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("graph: write NumPy: %w", err)
	}
	for i, name := range names {
		b, err := npy.Encode(arrays[i])
		if err == nil {
			err = os.WriteFile(filepath.Join(p, name+".npy"), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("graph: write NumPy %s: %s: %w", p, name, err)
		}
	}
	return nil
}
