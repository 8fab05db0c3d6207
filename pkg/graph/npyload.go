package graph

import (
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/npy"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// The arrays of a NumPy dataset, named as PyG's Data names them.
const (
	npEdgeIndex = "edge_index" // 2 × E node ids (int32 or int64): source row, target row
	npX         = "x"          // N × F features (float32 or float64)
	npXIndptr   = "x_indptr"   // sparse features instead of x: CSR row offsets (N+1)
	npXIndices  = "x_indices"  // CSR column indices (nnz), increasing within a row
	npXData     = "x_data"     // CSR values (nnz); absent: all ones
	npXShape    = "x_shape"    // CSR shape (N, F)
	npY         = "y"          // N classes (integer), -1 for an unlabelled node; N or N × 1
)

// npMasks and npIdx name each split's array: a bool mask over the nodes, or node ids.
var (
	npMasks = [3]string{"train_mask", "val_mask", "test_mask"}
	npIdx   = [3]string{"train_idx", "val_idx", "test_idx"}
)

// arraySource is a set of named arrays: a directory of .npy files or one .npz archive.
type arraySource struct {
	has  func(name string) bool
	read func(name string) (*npy.Array, error)
	file func(name string) string // how errors name the file that holds array name
}

// npyDir returns the arrays of directory dir of fsys, one NAME.npy file each.
func npyDir(fsys fs.FS, dir, display string) arraySource {
	return arraySource{
		has: func(name string) bool {
			st, err := fs.Stat(fsys, path.Join(dir, name+".npy"))
			return err == nil && st.Mode().IsRegular()
		},
		read: func(name string) (*npy.Array, error) {
			f, err := fsys.Open(path.Join(dir, name+".npy"))
			if err != nil {
				return nil, err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return nil, err
			}
			return npy.Read(f, st.Size())
		},
		file: func(name string) string { return path.Join(display, name+".npy") },
	}
}

// npzArchive returns the arrays of the .npz file of size bytes at r.
func npzArchive(r io.ReaderAt, size int64, display string) (arraySource, error) {
	a, err := npy.OpenArchive(r, size)
	if err != nil {
		return arraySource{}, &ParseError{File: display, Msg: "not a NumPy .npz archive", Err: err}
	}
	return arraySource{has: a.Has, read: a.Read, file: func(string) string { return display }}, nil
}

// IsNumPy reports whether path p is a .npz file or a directory holding edge_index.npy.
func IsNumPy(p string) bool {
	if strings.HasSuffix(p, ".npz") && isFile(p) {
		return true
	}
	return isFile(filepath.Join(p, npEdgeIndex+".npy"))
}

// LoadNumPy reads the NumPy dataset at p: a directory of NAME.npy files or one .npz archive
// (np.savez, np.savez_compressed) holding the arrays of a PyG Data object: edge_index (2 × E,
// int32 or int64), x (N × F, float32 or float64; or the CSR triple x_indptr, x_indices,
// x_data with x_shape), y (N, integer, -1 unlabelled) and, for each split, a bool mask
// (train_mask, val_mask, test_mask) or node ids (train_idx, val_idx, test_idx). Other arrays
// are ignored. The edge list is made symmetric as LoadOGB makes it; dense features are held
// sparse when fewer than half their values are nonzero. A wrong dtype or shape, an id out of
// range, an overlap of splits or a value float32 cannot hold is refused with an *ArrayError
// naming the file, the array and the index; nothing is half-loaded.
func LoadNumPy(p string, opts LoadOptions) (*Dataset, error) {
	if isDir(p) {
		display := displayDir(p)
		return loadNumPy(npyDir(os.DirFS(p), ".", display), filepath.Base(display), opts)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("graph: load %s: %w", p, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("graph: load %s: %w", p, err)
	}
	src, err := npzArchive(f, st.Size(), p)
	if err != nil {
		return nil, err
	}
	return loadNumPy(src, strings.TrimSuffix(filepath.Base(p), ".npz"), opts)
}

// npLoader reads the arrays of one NumPy dataset.
type npLoader struct{ arraySource }

func (l npLoader) errf(name string, index []int, format string, args ...any) error {
	return &ArrayError{File: l.file(name), Array: name, Index: index, Msg: fmt.Sprintf(format, args...)}
}

// get reads array name, which must have one of dtypes and, when ndims is not empty, one of
// its numbers of dimensions.
func (l npLoader) get(name string, dtypes []string, ndims ...int) (*npy.Array, error) {
	if !l.has(name) {
		return nil, l.errf(name, nil, "missing")
	}
	a, err := l.read(name)
	if err != nil {
		return nil, &ArrayError{File: l.file(name), Array: name, Msg: "unreadable", Err: err}
	}
	if !slices.Contains(dtypes, a.DType) {
		return nil, l.errf(name, nil, "dtype %s, want %s", a.DType, strings.Join(dtypes, " or "))
	}
	if len(ndims) > 0 && !slices.Contains(ndims, len(a.Shape)) {
		return nil, l.errf(name, nil, "shape %v has %d dimensions, want %v", a.Shape, len(a.Shape), ndims)
	}
	return a, nil
}

var (
	npInts   = []string{npy.Int32, npy.Int64}
	npFloats = []string{npy.Float32, npy.Float64}
)

// intAt returns element i of an int32 or int64 array.
func intAt(a *npy.Array, i int) int64 {
	if a.DType == npy.Int32 {
		return int64(a.Int32s[i])
	}
	return a.Int64s[i]
}

// float32At returns element i of a float32 or float64 array as float32, and whether it is
// finite and within float32's range.
func float32At(a *npy.Array, i int) (float32, bool) {
	if a.DType == npy.Float32 {
		v := a.Float32s[i]
		return v, !math.IsInf(float64(v), 0) && !math.IsNaN(float64(v))
	}
	v := a.Float64s[i]
	return float32(v), math.Abs(v) <= math.MaxFloat32
}

func loadNumPy(src arraySource, name string, opts LoadOptions) (*Dataset, error) {
	l := npLoader{src}
	y, err := l.get(npY, npInts, 1, 2)
	if err != nil {
		return nil, err
	}
	if len(y.Shape) == 2 && y.Shape[1] != 1 {
		return nil, l.errf(npY, nil, "shape %v, want (N,) or (N, 1)", y.Shape)
	}
	n := y.Shape[0]
	if n > math.MaxInt32 {
		return nil, l.errf(npY, nil, "%d nodes, more than %d", n, math.MaxInt32)
	}
	labels := make([]int32, n)
	top := int64(-1)
	for i := range labels {
		v := intAt(y, i)
		if v < -1 || v >= maxClasses {
			return nil, l.errf(npY, []int{i}, "label %d outside [-1, %d) (-1: unlabelled)", v, maxClasses)
		}
		labels[i] = int32(v)
		top = max(top, v)
	}
	if top < 0 {
		return nil, l.errf(npY, nil, "no node is labelled")
	}
	d := &Dataset{Name: name, NumClasses: int(top) + 1, Labels: labels}
	owner := make([]uint8, n)
	splitFrom := make([]string, 3)
	for s, dst := range [3]*[]int32{&d.Train, &d.Val, &d.Test} {
		if *dst, splitFrom[s], err = l.split(s, labels, owner); err != nil {
			return nil, err
		}
	}
	edges, err := l.get(npEdgeIndex, npInts, 2)
	if err != nil {
		return nil, err
	}
	if edges.Shape[0] != 2 {
		return nil, l.errf(npEdgeIndex, nil, "shape %v, want (2, E): a source row and a target row (transpose an E × 2 array)", edges.Shape)
	}
	e := edges.Shape[1]
	var st symmetrized
	d.Adj, st, err = symmetricAdjacency(n, func(add func(u, v int32)) error {
		for k := range e {
			u, v := intAt(edges, k), intAt(edges, e+k)
			switch {
			case u < 0 || u >= int64(n):
				return l.errf(npEdgeIndex, []int{0, k}, "node id %d out of range [0, %d) (N, the length of y)", u, n)
			case v < 0 || v >= int64(n):
				return l.errf(npEdgeIndex, []int{1, k}, "node id %d out of range [0, %d) (N, the length of y)", v, n)
			}
			add(int32(u), int32(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if d.Features, err = l.features(n); err != nil {
		return nil, err
	}
	if !d.Features.Present() && !opts.AllowMissingFeatures {
		return nil, fmt.Errorf("graph: dataset %s: %w (load it only for graph work): neither %s nor %s is present", l.file(npX), ErrNoFeatures, npX, npXIndptr)
	}
	d.Meta = convertedMeta(d, "NumPy arrays (PyG Data names): "+l.file(npEdgeIndex), "from "+strings.Join(splitFrom, ", "), l.file(npEdgeIndex)+" ("+npEdgeIndex+")", st)
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("graph: load %s: %w", l.file(npEdgeIndex), err)
	}
	return d, nil
}

// split reads split s from its mask or its index array (exactly one of them must be there)
// and returns its sorted node ids and the array's name; owner records which split holds each
// node, so that an overlap is refused.
func (l npLoader) split(s int, labels []int32, owner []uint8) ([]int32, string, error) {
	mask, idx := npMasks[s], npIdx[s]
	n := len(labels)
	var ids []int32
	take := func(name string, at []int, v int) error {
		switch {
		case owner[v] == uint8(s+1):
			return l.errf(name, at, "node %d listed twice", v)
		case owner[v] != 0:
			return l.errf(name, at, "node %d is also in the %s split (%s)", v, splitNames[owner[v]-1], l.splitArray(int(owner[v]-1)))
		case labels[v] < 0:
			return l.errf(name, at, "node %d is unlabelled (-1 in %s)", v, npY)
		}
		owner[v] = uint8(s + 1)
		ids = append(ids, int32(v))
		return nil
	}
	switch {
	case l.has(mask) && l.has(idx):
		return nil, "", l.errf(mask, nil, "both %s and %s are present; keep one", mask, idx)
	case l.has(mask):
		a, err := l.get(mask, []string{npy.Bool}, 1)
		if err != nil {
			return nil, "", err
		}
		if a.Shape[0] != n {
			return nil, "", l.errf(mask, nil, "%d elements for the %d nodes of %s", a.Shape[0], n, npY)
		}
		for v, in := range a.Bools {
			if in {
				if err := take(mask, []int{v}, v); err != nil {
					return nil, "", err
				}
			}
		}
		return ids, mask, nil
	case l.has(idx):
		a, err := l.get(idx, npInts, 1)
		if err != nil {
			return nil, "", err
		}
		for k := range a.Shape[0] {
			v := intAt(a, k)
			if v < 0 || v >= int64(n) {
				return nil, "", l.errf(idx, []int{k}, "node id %d out of range [0, %d) (N, the length of %s)", v, n, npY)
			}
			if err := take(idx, []int{k}, int(v)); err != nil {
				return nil, "", err
			}
		}
		slices.Sort(ids)
		return ids, idx, nil
	}
	return nil, "", l.errf(mask, nil, "missing (and no %s either)", idx)
}

// splitArray names the array split s was read from.
func (l npLoader) splitArray(s int) string {
	if l.has(npMasks[s]) {
		return npMasks[s]
	}
	return npIdx[s]
}

// features reads x, or the CSR triple that stands for it; neither: no features.
func (l npLoader) features(n int) (Features, error) {
	switch {
	case l.has(npX) && l.has(npXIndptr):
		return Features{}, l.errf(npX, nil, "both %s and the sparse %s are present; keep one", npX, npXIndptr)
	case l.has(npX):
		x, err := l.get(npX, npFloats, 2)
		if err != nil {
			return Features{}, err
		}
		if x.Shape[0] != n || x.Shape[1] > math.MaxInt32 {
			return Features{}, l.errf(npX, nil, "shape %v, want (%d, F): a row for each node of %s", x.Shape, n, npY)
		}
		f := x.Shape[1]
		data := x.Float32s
		if x.DType == npy.Float64 || !allFinite(data) {
			data = make([]float32, x.Len())
			for i := range data {
				v, ok := float32At(x, i)
				if !ok {
					return Features{}, l.errf(npX, []int{i / f, i % f}, "value %v is not a finite float32", floatAt(x, i))
				}
				data[i] = v
			}
		}
		return denseOrSparse(&tensor.Dense{Rows: n, Cols: f, Data: data}), nil
	case l.has(npXIndptr):
		return l.sparseFeatures(n)
	}
	return Features{}, nil
}

// allFinite reports whether no value of v is NaN or infinite.
func allFinite(v []float32) bool {
	i, _ := scanValues(v)
	return i < 0
}

// floatAt returns element i of a float32 or float64 array as float64, for error messages.
func floatAt(a *npy.Array, i int) float64 {
	if a.DType == npy.Float32 {
		return float64(a.Float32s[i])
	}
	return a.Float64s[i]
}

// sparseFeatures reads the CSR triple x_indptr, x_indices, x_data (optional) and x_shape.
func (l npLoader) sparseFeatures(n int) (Features, error) {
	shape, err := l.get(npXShape, npInts, 1)
	if err != nil {
		return Features{}, err
	}
	if shape.Shape[0] != 2 || intAt(shape, 0) != int64(n) || intAt(shape, 1) < 0 || intAt(shape, 1) > math.MaxInt32 {
		return Features{}, l.errf(npXShape, nil, "%v, want (%d, F): a row for each node of %s", shapeValues(shape), n, npY)
	}
	f := int(intAt(shape, 1))
	ptr, err := l.get(npXIndptr, npInts, 1)
	if err != nil {
		return Features{}, err
	}
	if ptr.Shape[0] != n+1 {
		return Features{}, l.errf(npXIndptr, nil, "%d elements, want N+1 = %d", ptr.Shape[0], n+1)
	}
	cols, err := l.get(npXIndices, npInts, 1)
	if err != nil {
		return Features{}, err
	}
	nnz := cols.Shape[0]
	x := &tensor.CSR{Rows: n, Cols: f, RowPtr: make([]int64, n+1), ColIdx: make([]int32, nnz)}
	for i := range n + 1 {
		p := intAt(ptr, i)
		switch {
		case i == 0 && p != 0:
			return Features{}, l.errf(npXIndptr, []int{0}, "%d, want 0", p)
		case i > 0 && (p < x.RowPtr[i-1] || p > int64(nnz)):
			return Features{}, l.errf(npXIndptr, []int{i}, "%d after %d: offsets must not decrease nor pass the %d entries of %s", p, x.RowPtr[i-1], nnz, npXIndices)
		}
		x.RowPtr[i] = p
	}
	if x.RowPtr[n] != int64(nnz) {
		return Features{}, l.errf(npXIndptr, []int{n}, "%d, want the %d entries of %s", x.RowPtr[n], nnz, npXIndices)
	}
	for r := range n {
		for k := x.RowPtr[r]; k < x.RowPtr[r+1]; k++ {
			c := intAt(cols, int(k))
			switch {
			case c < 0 || c >= int64(f):
				return Features{}, l.errf(npXIndices, []int{int(k)}, "column %d of row %d out of range [0, %d)", c, r, f)
			case k > x.RowPtr[r] && c <= int64(x.ColIdx[k-1]):
				return Features{}, l.errf(npXIndices, []int{int(k)}, "column %d of row %d not greater than the previous %d (sort_indices and sum_duplicates before saving)", c, r, x.ColIdx[k-1])
			}
			x.ColIdx[k] = int32(c)
		}
	}
	if l.has(npXData) {
		vals, err := l.get(npXData, npFloats, 1)
		if err != nil {
			return Features{}, err
		}
		if vals.Shape[0] != nnz {
			return Features{}, l.errf(npXData, nil, "%d values for the %d entries of %s", vals.Shape[0], nnz, npXIndices)
		}
		x.Val = make([]float32, nnz)
		for k := range x.Val {
			v, ok := float32At(vals, k)
			if !ok {
				return Features{}, l.errf(npXData, []int{k}, "value %v is not a finite float32", floatAt(vals, k))
			}
			x.Val[k] = v
		}
	}
	return Features{Sparse: x}, nil
}

// shapeValues returns the elements of an integer array, for error messages.
func shapeValues(a *npy.Array) []int64 {
	v := make([]int64, a.Len())
	for i := range v {
		v[i] = intAt(a, i)
	}
	return v
}
