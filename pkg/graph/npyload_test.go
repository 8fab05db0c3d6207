package graph

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/npy"
)

// TestNumPyLayoutMatchesText writes Cora as NumPy arrays, a directory of .npy files and one
// .npz, and reads each back: the same CSR, features (sparse, as the text layout's), labels and
// split.
func TestNumPyLayoutMatchesText(t *testing.T) {
	text := must(Load("cora", LoadOptions{}))
	for _, name := range []string{"cora", "cora.npz"} {
		p := filepath.Join(t.TempDir(), name)
		if err := WriteNumPy(p, text); err != nil {
			t.Fatal(err)
		}
		if f, err := DetectFormat(p); f != FormatNumPy || err != nil {
			t.Errorf("%s: DetectFormat = %q, %v; want numpy", name, f, err)
		}
		d, err := Load(p, LoadOptions{Format: FormatNumPy})
		if err != nil {
			t.Fatal(err)
		}
		if diff := diffStructures(text, d); diff != "" {
			t.Fatalf("%s: the NumPy layout of cora differs from the text layout in %s", name, diff)
		}
		file := filepath.Join(filepath.Dir(p), "cora", "edge_index.npy")
		if name == "cora.npz" {
			file = p
		}
		want := "edge list made symmetric: each of the 10556 pairs of " + file + " (edge_index) entered in both directions, 10556 repeated entries merged, 0 self loops dropped"
		if d.Meta.Conversion != want || d.Meta.Split != "from train_mask, val_mask, test_mask" {
			t.Errorf("%s: meta conversion %q, split %q; want %q", name, d.Meta.Conversion, d.Meta.Split, want)
		}
	}
}

// npTiny returns the tiny dataset as PyG arrays, by name.
func npTiny(t testing.TB) map[string]*npy.Array {
	names, arrays := numpyArrays(loadTiny(t))
	m := map[string]*npy.Array{}
	for i, n := range names {
		m[n] = arrays[i]
	}
	return m
}

// npzOf returns arrays as a .npz archive.
func npzOf(t testing.TB, arrays map[string]*npy.Array) []byte {
	t.Helper()
	names := slices.Sorted(maps.Keys(arrays))
	list := make([]*npy.Array, len(names))
	for i, n := range names {
		list[i] = arrays[n]
	}
	b, err := npy.EncodeArchive(names, list)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// loadNPZ loads the .npz archive b, named t.npz.
func loadNPZ(b []byte, opts LoadOptions) (*Dataset, error) {
	src, err := npzArchive(bytes.NewReader(b), int64(len(b)), "t.npz")
	if err != nil {
		return nil, err
	}
	return loadNumPy(src, "t", opts)
}

func ints32(shape []int, v ...int32) *npy.Array {
	return &npy.Array{DType: npy.Int32, Shape: shape, Int32s: v}
}

// TestNumPyVariants reads the tiny dataset from the other forms the loader takes: int32
// directed edges with a self loop and a repeat, y as N × 1, features as a CSR triple or as
// float64, splits as index arrays in any order.
func TestNumPyVariants(t *testing.T) {
	want := loadTiny(t)
	arr := npTiny(t)
	arr[npEdgeIndex] = ints32([]int{2, 6}, 0, 0, 1, 3, 2, 4, 1, 2, 2, 3, 0, 3)
	arr[npY] = ints32([]int{5, 1}, 0, 1, 0, -1, 1)
	delete(arr, "train_mask")
	delete(arr, "test_mask")
	arr["train_idx"] = ints32([]int{1}, 0)
	arr["test_idx"] = &npy.Array{DType: npy.Int64, Shape: []int{2}, Int64s: []int64{4, 2}}
	x := arr[npX]
	delete(arr, npX)
	// The tiny features as CSR: rows {0:1, 2:0.5}, {}, {1:3}, {3:-2.25}, {0..3: 1}.
	arr[npXShape] = ints32([]int{2}, 5, 4)
	arr[npXIndptr] = &npy.Array{DType: npy.Int64, Shape: []int{6}, Int64s: []int64{0, 2, 2, 3, 4, 8}}
	arr[npXIndices] = ints32([]int{8}, 0, 2, 1, 3, 0, 1, 2, 3)
	arr[npXData] = &npy.Array{DType: npy.Float64, Shape: []int{8}, Float64s: []float64{1, 0.5, 3, -2.25, 1, 1, 1, 1}}
	d, err := loadNPZ(npzOf(t, arr), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffStructures(want, d); diff != "" && diff != "Name" {
		t.Errorf("CSR features, index splits: differs from the text layout in %s", diff)
	}
	if m := d.Meta; m.SelfLoopsRemoved != 1 || *m.RawAdjacencyPairs != 6 || m.Split != "from train_idx, val_mask, test_idx" {
		t.Errorf("meta %+v", m)
	}
	for _, k := range []string{npXShape, npXIndptr, npXIndices, npXData} {
		delete(arr, k)
	}
	f64 := &npy.Array{DType: npy.Float64, Shape: x.Shape, Float64s: make([]float64, len(x.Float32s))}
	for i, v := range x.Float32s {
		f64.Float64s[i] = float64(v)
	}
	arr[npX] = f64
	if d, err = loadNPZ(npzOf(t, arr), LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if diff := diffStructures(want, d); diff != "" && diff != "Name" {
		t.Errorf("float64 x: differs from the text layout in %s", diff)
	}
	delete(arr, npX)
	if _, err := loadNPZ(npzOf(t, arr), LoadOptions{}); !errors.Is(err, ErrNoFeatures) {
		t.Errorf("no features: %v, want ErrNoFeatures", err)
	}
	if d, err := loadNPZ(npzOf(t, arr), LoadOptions{AllowMissingFeatures: true}); err != nil || d.Features.Present() {
		t.Errorf("no features, allowed: %v", err)
	}
}

func TestNumPyMalformed(t *testing.T) {
	f32 := func(shape []int, v ...float32) *npy.Array {
		return &npy.Array{DType: npy.Float32, Shape: shape, Float32s: v}
	}
	bools := func(v ...bool) *npy.Array { return &npy.Array{DType: npy.Bool, Shape: []int{len(v)}, Bools: v} }
	csr := map[string]*npy.Array{npXShape: ints32([]int{2}, 5, 4), npXIndptr: ints32([]int{6}, 0, 1, 1, 1, 1, 2), npXIndices: ints32([]int{2}, 0, 3)}
	for _, c := range []struct {
		name   string
		set    map[string]*npy.Array
		delete []string
		want   string
	}{
		{"no y", nil, []string{npY}, "t.npz: array y: missing"},
		{"y float", map[string]*npy.Array{npY: f32([]int{5}, 0, 1, 0, 0, 1)}, nil, "t.npz: array y: dtype <f4, want <i4 or <i8"},
		{"y 5x2", map[string]*npy.Array{npY: ints32([]int{5, 2}, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1)}, nil, "t.npz: array y: shape [5 2], want (N,) or (N, 1)"},
		{"y -2", map[string]*npy.Array{npY: ints32([]int{5}, 0, 1, -2, 0, 1)}, nil, "t.npz: array y[2]: label -2 outside [-1, 1048576)"},
		{"no edges", nil, []string{npEdgeIndex}, "t.npz: array edge_index: missing"},
		{"edges E×2", map[string]*npy.Array{npEdgeIndex: ints32([]int{3, 2}, 0, 1, 1, 2, 2, 0)}, nil, "array edge_index: shape [3 2], want (2, E): a source row and a target row (transpose"},
		{"edges 1-d", map[string]*npy.Array{npEdgeIndex: ints32([]int{2}, 0, 1)}, nil, "array edge_index: shape [2] has 1 dimensions, want [2]"},
		{"edges float", map[string]*npy.Array{npEdgeIndex: f32([]int{2, 1}, 0, 1)}, nil, "array edge_index: dtype <f4, want <i4 or <i8"},
		{"src out of range", map[string]*npy.Array{npEdgeIndex: ints32([]int{2, 2}, 0, 7, 1, 2)}, nil, "t.npz: array edge_index[0, 1]: node id 7 out of range [0, 5) (N, the length of y)"},
		{"dst negative", map[string]*npy.Array{npEdgeIndex: ints32([]int{2, 2}, 0, 1, 1, -1)}, nil, "t.npz: array edge_index[1, 1]: node id -1 out of range [0, 5)"},
		{"x rows", map[string]*npy.Array{npX: f32([]int{4, 1}, 1, 2, 3, 4)}, nil, "t.npz: array x: shape [4 1], want (5, F): a row for each node of y"},
		{"x int", map[string]*npy.Array{npX: ints32([]int{5, 1}, 1, 2, 3, 4, 5)}, nil, "t.npz: array x: dtype <i4, want <f4 or <f8"},
		{"x NaN", map[string]*npy.Array{npX: f32([]int{5, 2}, 1, 2, 3, 4, 5, float32(math.NaN()), 7, 8, 9, 10)}, nil, "t.npz: array x[2, 1]: value NaN is not a finite float32"},
		{"x overflows float32", map[string]*npy.Array{npX: {DType: npy.Float64, Shape: []int{5, 1}, Float64s: []float64{1, 2, 1e300, 4, 5}}}, nil, "t.npz: array x[2, 0]: value 1e+300 is not a finite float32"},
		{"x and csr", csr, nil, "t.npz: array x: both x and the sparse x_indptr are present; keep one"},
		{"csr no shape", map[string]*npy.Array{npXIndptr: csr[npXIndptr], npXIndices: csr[npXIndices]}, []string{npX}, "t.npz: array x_shape: missing"},
		{"csr shape", map[string]*npy.Array{npXShape: ints32([]int{2}, 4, 4), npXIndptr: csr[npXIndptr], npXIndices: csr[npXIndices]}, []string{npX}, "t.npz: array x_shape: [4 4], want (5, F)"},
		{"csr indptr", map[string]*npy.Array{npXShape: csr[npXShape], npXIndptr: ints32([]int{6}, 0, 2, 1, 1, 1, 2), npXIndices: csr[npXIndices]}, []string{npX}, "t.npz: array x_indptr[2]: 1 after 2: offsets must not decrease"},
		{"csr indptr end", map[string]*npy.Array{npXShape: csr[npXShape], npXIndptr: ints32([]int{6}, 0, 1, 1, 1, 1, 1), npXIndices: csr[npXIndices]}, []string{npX}, "t.npz: array x_indptr[5]: 1, want the 2 entries of x_indices"},
		{"csr column", map[string]*npy.Array{npXShape: csr[npXShape], npXIndptr: csr[npXIndptr], npXIndices: ints32([]int{2}, 0, 4)}, []string{npX}, "t.npz: array x_indices[1]: column 4 of row 4 out of range [0, 4)"},
		{"csr order", map[string]*npy.Array{npXShape: csr[npXShape], npXIndptr: ints32([]int{6}, 0, 2, 2, 2, 2, 2), npXIndices: ints32([]int{2}, 3, 3)}, []string{npX}, "t.npz: array x_indices[1]: column 3 of row 0 not greater than the previous 3 (sort_indices and sum_duplicates"},
		{"csr data", map[string]*npy.Array{npXShape: csr[npXShape], npXIndptr: csr[npXIndptr], npXIndices: csr[npXIndices], npXData: f32([]int{3}, 1, 2, 3)}, []string{npX}, "t.npz: array x_data: 3 values for the 2 entries of x_indices"},
		{"no test split", nil, []string{"test_mask"}, "t.npz: array test_mask: missing (and no test_idx either)"},
		{"mask and idx", map[string]*npy.Array{"val_idx": ints32([]int{1}, 1)}, nil, "t.npz: array val_mask: both val_mask and val_idx are present; keep one"},
		{"mask length", map[string]*npy.Array{"val_mask": bools(false, true)}, nil, "t.npz: array val_mask: 2 elements for the 5 nodes of y"},
		{"mask int", map[string]*npy.Array{"val_mask": ints32([]int{5}, 0, 1, 0, 0, 0)}, nil, "t.npz: array val_mask: dtype <i4, want |b1"},
		{"masks overlap", map[string]*npy.Array{"test_mask": bools(false, true, true, false, true)}, nil, "t.npz: array test_mask[1]: node 1 is also in the val split (val_mask)"},
		{"unlabelled in split", map[string]*npy.Array{"test_mask": bools(false, false, true, true, true)}, nil, "t.npz: array test_mask[3]: node 3 is unlabelled (-1 in y)"},
		{"idx out of range", map[string]*npy.Array{"test_idx": ints32([]int{2}, 2, 5)}, []string{"test_mask"}, "t.npz: array test_idx[1]: node id 5 out of range [0, 5)"},
		{"idx twice", map[string]*npy.Array{"test_idx": ints32([]int{3}, 2, 4, 2)}, []string{"test_mask"}, "t.npz: array test_idx[2]: node 2 listed twice"},
		{"idx overlap", map[string]*npy.Array{"test_idx": ints32([]int{2}, 4, 0)}, []string{"test_mask"}, "t.npz: array test_idx[1]: node 0 is also in the train split (train_mask)"},
	} {
		arr := npTiny(t)
		maps.Copy(arr, c.set)
		for _, k := range c.delete {
			delete(arr, k)
		}
		d, err := loadNPZ(npzOf(t, arr), LoadOptions{})
		var ae *ArrayError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ae) || !errors.Is(err, ErrMalformed) || d != nil {
			t.Errorf("%s: %v, want an *ArrayError containing %q and no dataset", c.name, err, c.want)
		}
	}
	if _, err := loadNPZ([]byte("not a zip"), LoadOptions{}); err == nil || !strings.Contains(err.Error(), "graph: load t.npz: not a NumPy .npz archive: npy: malformed file") {
		t.Errorf("not a zip: %v", err)
	}
	// A directory of .npy files names the file of each array.
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := WriteNumPy(dir, loadTiny(t)); err != nil {
		t.Fatal(err)
	}
	b, _ := npy.EncodeInt32([]int{5}, []int32{0, 1, -5, 0, 1})
	if err := os.WriteFile(filepath.Join(dir, "y.npy"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "graph: load "+filepath.Join(dir, "y.npy")+": array y[2]: label -5 outside") {
		t.Errorf("y of -5 in a directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "y.npy"), b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "graph: load "+filepath.Join(dir, "y.npy")+": array y: unreadable: npy: malformed file: shape [5] of <i4 takes 20 bytes") {
		t.Errorf("truncated y.npy: %v", err)
	}
}
