package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// Features is a node-feature matrix: exactly one of Sparse or Dense is set.
type Features struct {
	Sparse *tensor.CSR   // N×F sparse features (what the text format yields)
	Dense  *tensor.Dense // N×F dense features (what R-MAT generates)
}

// Present reports whether a feature matrix is set.
func (f Features) Present() bool { return f.Sparse != nil || f.Dense != nil }

// Rows returns the number of rows of the feature matrix (0 when absent).
func (f Features) Rows() int {
	switch {
	case f.Sparse != nil:
		return f.Sparse.Rows
	case f.Dense != nil:
		return f.Dense.Rows
	}
	return 0
}

// Cols returns the number of feature columns (0 when absent).
func (f Features) Cols() int {
	switch {
	case f.Sparse != nil:
		return f.Sparse.Cols
	case f.Dense != nil:
		return f.Dense.Cols
	}
	return 0
}

// Nonzeros counts the nonzero feature values.
func (f Features) Nonzeros() int64 {
	switch {
	case f.Sparse != nil && f.Sparse.Val == nil:
		return int64(len(f.Sparse.ColIdx))
	case f.Sparse != nil:
		_, nz := scanValues(f.Sparse.Val)
		return nz
	case f.Dense != nil:
		_, nz := scanValues(f.Dense.Data)
		return nz
	}
	return 0
}

// scanValues returns the index of the first NaN or infinite value (-1 if none) and the number
// of nonzero values. The main loop has no data-dependent branch.
func scanValues(v []float32) (firstBad int, nonzeros int64) {
	const expMask = 0x7f800000 // all ones: Inf or NaN
	var bad uint32
	for _, x := range v {
		b := math.Float32bits(x)
		bad |= b&expMask + 0x00800000 // bit 31 set only when the exponent is all ones
		m := b << 1                   // 0 only for ±0
		nonzeros += int64((m | -m) >> 31)
	}
	if bad>>31 == 0 {
		return -1, nonzeros
	}
	for i, x := range v {
		if math.Float32bits(x)&expMask == expMask {
			return i, nonzeros
		}
	}
	return -1, nonzeros // not reached
}

// SplitSizes is meta.json's split_sizes object.
type SplitSizes struct {
	Train int `json:"train"` // nodes in train.txt
	Val   int `json:"val"`   // nodes in val.txt
	Test  int `json:"test"`  // nodes in test.txt
}

// Meta is the parsed meta.json of a dataset: the fields of datasets/FORMAT.md.
type Meta struct {
	Name               string     `json:"name"`                          // dataset name
	NumNodes           int        `json:"num_nodes"`                     // nodes N
	NumEdges           int64      `json:"num_edges"`                     // directed edges (lines of the edge file)
	NumUndirectedEdges int64      `json:"num_undirected_edges"`          // NumEdges / 2
	NumFeatures        int        `json:"num_features"`                  // feature columns, even when the features are missing
	NumClasses         int        `json:"num_classes"`                   // label classes
	NumFeatureNonzeros *int64     `json:"num_feature_nonzeros"`          // nonzero feature values; nil when unknown (PubMed: null)
	FeaturesAvailable  bool       `json:"features_available"`            // false when no feature file ships (PubMed)
	FeatureType        string     `json:"feature_type,omitempty"`        // what the features are
	EdgeFile           string     `json:"edge_file,omitempty"`           // edges.txt or edges.txt.gz
	SelfLoopsRemoved   int64      `json:"self_loops_removed"`            // self loops the source had and the conversion dropped
	IsolatedNodes      int64      `json:"isolated_nodes"`                // nodes with no edge
	ClassCounts        []int64    `json:"class_counts,omitempty"`        // labelled nodes per class
	SplitSizes         SplitSizes `json:"split_sizes"`                   // sizes of train, val, test
	Split              string     `json:"split,omitempty"`               // how the split was made
	SplitSeed          *int64     `json:"split_seed,omitempty"`          // seed of a random split
	Source             string     `json:"source,omitempty"`              // where the data comes from
	LicenseNote        string     `json:"license_note,omitempty"`        // licence of the data
	Citation           string     `json:"citation,omitempty"`            // what to cite
	ClassNames         []string   `json:"class_names,omitempty"`         // names of the classes
	RawAdjacencyPairs  *int64     `json:"raw_adjacency_pairs,omitempty"` // Planetoid: adjacency entries before symmetrising; OGB, NumPy: pairs of the edge list
	Conversion         string     `json:"conversion,omitempty"`          // what the loader of an OGB or NumPy layout did to the edge list
	UnlabeledNodes     []int32    `json:"unlabeled_nodes,omitempty"`     // nodes with label -1 (CiteSeer)
	UnlabeledNote      string     `json:"unlabeled_note,omitempty"`      // why they are unlabelled
	Incomplete         bool       `json:"incomplete,omitempty"`          // true when a file is missing (PubMed)
	Missing            string     `json:"missing,omitempty"`             // what is missing and why (PubMed's features)
}

// Dataset is a node-classification graph with features, labels and a train/val/test split.
type Dataset struct {
	Name             string      // the dataset's name (Meta.Name)
	NumClasses       int         // label classes C
	Adj              *tensor.CSR // N×N adjacency, both directions of every undirected edge, no self loops, Val nil
	Features         Features    // zero value when the dataset ships no features (PubMed)
	Labels           []int32     // -1 = unlabelled
	Train, Val, Test []int32     // sorted node ids
	Meta             Meta        // the parsed meta.json (or the generator's equivalent)
}

// NumNodes returns the number of nodes N.
func (d *Dataset) NumNodes() int {
	if d.Adj == nil {
		return 0
	}
	return d.Adj.Rows
}

// NumFeatures returns the number of feature columns, 0 when the dataset has no features.
func (d *Dataset) NumFeatures() int { return d.Features.Cols() }

// RequireFeatures returns an error wrapping ErrNoFeatures, with meta.json's missing note, when
// the dataset has no feature matrix; training calls it to refuse graph-only datasets.
func (d *Dataset) RequireFeatures() error {
	if d.Features.Present() {
		return nil
	}
	note := d.Meta.Missing
	if note == "" {
		note = "its meta.json says features_available=false"
	}
	return fmt.Errorf("graph: dataset %s: %w (load it only for graph work): %s", d.Name, ErrNoFeatures, note)
}

// Validate checks every invariant of a Dataset and returns an error wrapping ErrInvalid for the
// first one broken: the adjacency is a valid square CSR with no values, no self loops and both
// directions of every edge; the features (when present) have one row per node and finite values;
// labels lie in [-1, NumClasses); the splits are strictly increasing, disjoint and labelled; and
// the counts in Meta agree with the data.
func (d *Dataset) Validate() error {
	if d == nil {
		return invalidf("nil dataset")
	}
	// The adjacency and the features are the bulk of the work: check them concurrently.
	var nz int64
	var featErr error
	var wg sync.WaitGroup
	wg.Go(func() { nz, featErr = validateFeatures(d.Features, d.NumNodes()) })
	n, err := validateAdjacency(d.Adj)
	wg.Wait()
	if err == nil {
		err = featErr
	}
	if err != nil {
		return fmt.Errorf("%w (dataset %s)", err, d.Name)
	}
	if d.NumClasses < 0 || d.NumClasses > maxClasses {
		return invalidf("dataset %s: num_classes %d outside [0, %d]", d.Name, d.NumClasses, maxClasses)
	}
	if len(d.Labels) != n {
		return invalidf("dataset %s: %d labels for %d nodes", d.Name, len(d.Labels), n)
	}
	for i, l := range d.Labels {
		if l < -1 || int(l) >= d.NumClasses {
			return invalidf("dataset %s: node %d has label %d outside [-1, %d)", d.Name, i, l, d.NumClasses)
		}
	}
	if err := d.validateSplits(n); err != nil {
		return err
	}
	return d.validateMeta(n, nz)
}

// validateAdjacency checks the adjacency invariants and returns N.
func validateAdjacency(a *tensor.CSR) (int, error) {
	if a == nil {
		return 0, invalidf("no adjacency matrix")
	}
	if a.Rows != a.Cols || a.Rows < 0 || a.Rows > math.MaxInt32 {
		return 0, invalidf("adjacency is %d×%d, want square with at most %d rows", a.Rows, a.Cols, math.MaxInt32)
	}
	if a.Val != nil {
		return 0, invalidf("adjacency has values; an unweighted graph has Val nil")
	}
	if err := validateCSR(a); err != nil {
		return 0, invalidf("adjacency: %v", err)
	}
	if k := asymmetricEntry(a); k >= 0 {
		u, v := entryAt(a, k)
		if u == v {
			return 0, invalidf("adjacency: self loop at node %d", u)
		}
		return 0, invalidf("adjacency: edge (%d, %d) has no reverse (%d, %d)", u, v, v, u)
	}
	return a.Rows, nil
}

// validateCSR checks the structural invariants of a CSR, like tensor.CSR.Validate but in one
// pass and without panicking on any content (tensor's version slices by offsets it has not yet
// checked): offsets start at 0, never decrease and end at the number of entries, and the
// columns of each row strictly increase within [0, Cols).
func validateCSR(m *tensor.CSR) error {
	if m.Rows < 0 || m.Cols < 0 || m.Cols > math.MaxInt32+1 {
		return fmt.Errorf("bad shape %d×%d", m.Rows, m.Cols)
	}
	if len(m.RowPtr) != m.Rows+1 || m.RowPtr[0] != 0 {
		return fmt.Errorf("%d row offsets for %d rows", len(m.RowPtr), m.Rows)
	}
	nnz := int64(len(m.ColIdx))
	if m.RowPtr[m.Rows] != nnz {
		return fmt.Errorf("%d column indices, offsets say %d", nnz, m.RowPtr[m.Rows])
	}
	if m.Val != nil && len(m.Val) != len(m.ColIdx) {
		return fmt.Errorf("%d values for %d entries", len(m.Val), len(m.ColIdx))
	}
	lo := int64(0)
	for i, hi := range m.RowPtr[1:] {
		if hi < lo || hi > nnz {
			return fmt.Errorf("row %d offsets %d..%d not monotone within [0, %d]", i, lo, hi, nnz)
		}
		row := m.ColIdx[lo:hi]
		lo = hi
		if len(row) == 0 {
			continue
		}
		// Strictly increasing columns lie in range when the first and the last do.
		var dec int64
		for k := 1; k < len(row); k++ {
			dec |= int64(row[k]) - int64(row[k-1]) - 1 // negative when row[k] <= row[k-1]
		}
		if dec < 0 || row[0] < 0 || int(row[len(row)-1]) >= m.Cols {
			return fmt.Errorf("row %d: columns %v not strictly increasing within [0, %d)", i, shortList(row), m.Cols)
		}
	}
	return nil
}

// shortList returns at most the first 8 elements of v, for error messages.
func shortList(v []int32) []int32 { return v[:min(len(v), 8)] }

// asymmetricEntry returns the index of a self loop or of an entry without its reverse in the
// row-sorted, duplicate-free matrix a, or -1 when a is symmetric with an empty diagonal. A
// streaming fingerprint (likelySymmetric) clears the common case; firstAsymmetric locates the
// entry when it fails.
func asymmetricEntry(a *tensor.CSR) int64 {
	if likelySymmetric(a) {
		return -1
	}
	return firstAsymmetric(a)
}

// symmetryKey keys the fingerprint of likelySymmetric; it is random per process, so that no
// input can be crafted to collide.
var symmetryKey = rand.Uint64()

// likelySymmetric reports false when a (row-sorted, duplicate-free) has a self loop or is not
// symmetric, and true otherwise except with probability about 2^-64: the entries above the
// diagonal and the transposed entries below it are the same set exactly when a is symmetric,
// and it compares the two sets by the wrapping sums of a keyed 64-bit hash of their members.
// It streams through a once, in parallel, where firstAsymmetric jumps between rows.
func likelySymmetric(a *tensor.CSR) bool {
	var upper, lower, nUpper, nLower, loops atomic.Uint64
	parallelRanges(a.Rows, rowGrain, func(lo, hi int) {
		var up, down, cu, cd, sl uint64
		for u := lo; u < hi; u++ {
			uu := uint64(u)
			for _, c := range a.ColIdx[a.RowPtr[u]:a.RowPtr[u+1]] {
				v := uint64(c)
				switch {
				case v > uu:
					up += splitmix64(uu<<32 | v ^ symmetryKey)
					cu++
				case v < uu:
					down += splitmix64(v<<32 | uu ^ symmetryKey)
					cd++
				default:
					sl++
				}
			}
		}
		upper.Add(up)
		lower.Add(down)
		nUpper.Add(cu)
		nLower.Add(cd)
		loops.Add(sl)
	})
	return loops.Load() == 0 && nUpper.Load() == nLower.Load() && upper.Load() == lower.Load()
}

// firstAsymmetric returns the index of a stored entry (u, v) that is a self loop or whose reverse
// (v, u) is missing, or -1 when the (row-sorted) matrix is symmetric with an empty diagonal. It
// runs in O(N + nnz): visiting rows in increasing order, the entries of row v that point back to
// already-visited rows must appear exactly in that order, so one cursor per row suffices.
func firstAsymmetric(a *tensor.CSR) int64 {
	n := a.Rows
	cur := make([]int64, n)
	copy(cur, a.RowPtr[:n])
	for u := 0; u < n; u++ {
		for k := a.RowPtr[u]; k < a.RowPtr[u+1]; k++ {
			v := a.ColIdx[k]
			if int(v) == u {
				return k
			}
			c := cur[v]
			switch {
			case c < a.RowPtr[v+1] && int(a.ColIdx[c]) == u:
				cur[v]++
			case c < a.RowPtr[v+1] && int(a.ColIdx[c]) < u:
				return c // (v, w) with w < u: row w was visited and did not contain v
			default:
				return k // row v has no entry u
			}
		}
	}
	for v := 0; v < n; v++ {
		if cur[v] != a.RowPtr[v+1] {
			return cur[v]
		}
	}
	return -1
}

// entryAt returns the (row, column) of stored entry k.
func entryAt(a *tensor.CSR, k int64) (int, int) {
	row, _ := slices.BinarySearchFunc(a.RowPtr[1:], k, func(p, t int64) int {
		if p <= t {
			return -1
		}
		return 1
	})
	return row, int(a.ColIdx[k])
}

// validateFeatures checks the feature matrix and returns its number of nonzero values.
func validateFeatures(f Features, n int) (int64, error) {
	switch {
	case f.Sparse != nil && f.Dense != nil:
		return 0, invalidf("features: both Sparse and Dense set")
	case f.Sparse != nil:
		x := f.Sparse
		if x.Rows != n {
			return 0, invalidf("features: %d rows for %d nodes", x.Rows, n)
		}
		// The structure and the values are independent: check them concurrently.
		i, nz := -1, int64(len(x.ColIdx))
		var wg sync.WaitGroup
		if x.Val != nil {
			wg.Go(func() { i, nz = scanValues(x.Val) })
		}
		err := validateCSR(x)
		wg.Wait()
		if err != nil {
			return 0, invalidf("sparse features: %v", err)
		}
		if i >= 0 {
			row, col := entryAt(x, int64(i))
			return 0, invalidf("features: node %d column %d is %v", row, col, x.Val[i])
		}
		return nz, nil
	case f.Dense != nil:
		x := f.Dense
		if x.Rows != n || x.Cols < 0 || x.Cols > math.MaxInt32 || int64(len(x.Data)) != int64(x.Rows)*int64(x.Cols) {
			return 0, invalidf("dense features: %d×%d with %d values for %d nodes", x.Rows, x.Cols, len(x.Data), n)
		}
		i, nz := scanValues(x.Data)
		if i >= 0 {
			return 0, invalidf("features: node %d column %d is %v", i/x.Cols, i%x.Cols, x.Data[i])
		}
		return nz, nil
	}
	return 0, nil
}

func (d *Dataset) validateSplits(n int) error {
	owner := make([]uint8, n)
	for s, ids := range [][]int32{d.Train, d.Val, d.Test} {
		name := splitNames[s]
		prev := int32(-1)
		for _, id := range ids {
			if id <= prev || int(id) >= n {
				return invalidf("dataset %s: %s split: id %d after %d is out of order or outside [0, %d)", d.Name, name, id, prev, n)
			}
			prev = id
			if o := owner[id]; o != 0 {
				return invalidf("dataset %s: node %d is in both the %s and the %s split", d.Name, id, splitNames[o-1], name)
			}
			owner[id] = uint8(s + 1)
			if d.Labels[id] < 0 {
				return invalidf("dataset %s: %s split: node %d is unlabelled", d.Name, name, id)
			}
		}
	}
	return nil
}

var splitNames = [3]string{"train", "val", "test"}

// validateMeta checks that the counts in Meta agree with the data; nz is the number of nonzero
// feature values.
func (d *Dataset) validateMeta(n int, nz int64) error {
	m := &d.Meta
	nnz := int64(len(d.Adj.ColIdx))
	bad := func(field string, got, want any) error {
		return invalidf("dataset %s: meta %s is %v, the data says %v", d.Name, field, got, want)
	}
	switch {
	case m.Name != d.Name:
		return bad("name", m.Name, d.Name)
	case m.NumNodes != n:
		return bad("num_nodes", m.NumNodes, n)
	case m.NumEdges != nnz:
		return bad("num_edges", m.NumEdges, nnz)
	case m.NumUndirectedEdges != nnz/2:
		return bad("num_undirected_edges", m.NumUndirectedEdges, nnz/2)
	case m.NumClasses != d.NumClasses:
		return bad("num_classes", m.NumClasses, d.NumClasses)
	case m.FeaturesAvailable != d.Features.Present():
		return bad("features_available", m.FeaturesAvailable, d.Features.Present())
	case d.Features.Present() && m.NumFeatures != d.NumFeatures():
		return bad("num_features", m.NumFeatures, d.NumFeatures())
	case m.NumFeatures < 0:
		return bad("num_features", m.NumFeatures, "a count ≥ 0")
	case m.SplitSizes != SplitSizes{len(d.Train), len(d.Val), len(d.Test)}:
		return bad("split_sizes", m.SplitSizes, SplitSizes{len(d.Train), len(d.Val), len(d.Test)})
	}
	if m.NumFeatureNonzeros != nil && d.Features.Present() && *m.NumFeatureNonzeros != nz {
		return bad("num_feature_nonzeros", *m.NumFeatureNonzeros, nz)
	}
	if iso := isolatedNodes(d.Adj); m.IsolatedNodes != iso {
		return bad("isolated_nodes", m.IsolatedNodes, iso)
	}
	if m.ClassCounts != nil {
		counts := classCounts(d.Labels, d.NumClasses)
		if !slices.Equal(m.ClassCounts, counts) {
			return bad("class_counts", m.ClassCounts, counts)
		}
	}
	if m.UnlabeledNodes != nil {
		var unl []int32
		for i, l := range d.Labels {
			if l < 0 {
				unl = append(unl, int32(i))
			}
		}
		if !slices.Equal(m.UnlabeledNodes, unl) {
			return bad("unlabeled_nodes", m.UnlabeledNodes, unl)
		}
	}
	return nil
}

// isolatedNodes counts the rows of a with no entry.
func isolatedNodes(a *tensor.CSR) int64 {
	var iso int64
	for i := 0; i < a.Rows; i++ {
		if a.RowPtr[i+1] == a.RowPtr[i] {
			iso++
		}
	}
	return iso
}

// classCounts counts the labelled nodes of each class; labels must lie in [-1, c).
func classCounts(labels []int32, c int) []int64 {
	counts := make([]int64, c)
	for _, l := range labels {
		if l >= 0 {
			counts[l]++
		}
	}
	return counts
}
