package graph

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"math"
	"reflect"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// The tiny dataset: 5 nodes, a triangle 0-1-2 and an edge 3-4, node 3 unlabelled.
const (
	tinyMeta = `{
  "name": "tiny",
  "num_nodes": 5,
  "num_edges": 8,
  "num_undirected_edges": 4,
  "num_features": 4,
  "num_classes": 2,
  "num_feature_nonzeros": 8,
  "features_available": true,
  "edge_file": "edges.txt",
  "isolated_nodes": 0,
  "class_counts": [2, 2],
  "split_sizes": {"train": 1, "val": 1, "test": 2}
}
`
	tinyEdges    = "0 1\n0 2\n1 0\n1 2\n2 0\n2 1\n3 4\n4 3\n"
	tinyFeatures = "0:1 2:0.5\n\n1:3\n3:-2.25\n0:1 1:1 2:1 3:1\n"
	tinyLabels   = "0\n1\n0\n-1\n1\n"
	tinyTrain    = "0\n"
	tinyVal      = "1\n"
	tinyTest     = "2\n4\n"
)

func gz(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tinyFS returns the tiny dataset as directory "tiny" of a MapFS.
func tinyFS(t testing.TB) fstest.MapFS {
	files := map[string][]byte{
		"meta.json":       []byte(tinyMeta),
		"edges.txt":       []byte(tinyEdges),
		"features.txt.gz": gz(t, tinyFeatures),
		"labels.txt":      []byte(tinyLabels),
		"train.txt":       []byte(tinyTrain),
		"val.txt":         []byte(tinyVal),
		"test.txt":        []byte(tinyTest),
	}
	fsys := fstest.MapFS{}
	for name, data := range files {
		fsys["tiny/"+name] = &fstest.MapFile{Data: data}
	}
	return fsys
}

func loadTiny(t testing.TB) *Dataset {
	t.Helper()
	d, err := LoadText(tinyFS(t), "tiny")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// diffDatasets returns "" when a and b hold the same data (nil and empty slices count as equal),
// else a description of the first difference.
func diffDatasets(a, b *Dataset) string {
	switch {
	case a.Name != b.Name:
		return "Name"
	case a.NumClasses != b.NumClasses:
		return "NumClasses"
	case !a.Adj.Equal(b.Adj):
		return "Adj"
	case (a.Features.Sparse == nil) != (b.Features.Sparse == nil) || (a.Features.Dense == nil) != (b.Features.Dense == nil):
		return "Features kind"
	case a.Features.Sparse != nil && !a.Features.Sparse.Equal(b.Features.Sparse):
		return "Features.Sparse"
	case a.Features.Dense != nil && (a.Features.Dense.Rows != b.Features.Dense.Rows || a.Features.Dense.Cols != b.Features.Dense.Cols ||
		!slices.Equal(a.Features.Dense.Data, b.Features.Dense.Data)):
		return "Features.Dense"
	case !slices.Equal(a.Labels, b.Labels):
		return "Labels"
	case !slices.Equal(a.Train, b.Train) || !slices.Equal(a.Val, b.Val) || !slices.Equal(a.Test, b.Test):
		return "splits"
	case !reflect.DeepEqual(a.Meta, b.Meta):
		return "Meta"
	}
	return ""
}

// preparedBytes returns d in the prepared format.
func preparedBytes(t testing.TB, d *Dataset) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WritePrepared(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fixChecksums recomputes, where the header and table are in bounds, every section checksum
// and the header checksum of a prepared file in place, so that tests and fuzzing reach the
// checks behind the checksums.
func fixChecksums(b []byte) {
	if len(b) < headerSize {
		return
	}
	le := binary.LittleEndian
	ns := uint64(le.Uint32(b[12:]))
	if ns > maxSections || headerSize+ns*sectionEntrySize > uint64(len(b)) {
		return
	}
	for i := range ns {
		t := b[headerSize+i*sectionEntrySize:]
		off, n := le.Uint64(t[8:]), le.Uint64(t[16:])
		if off <= uint64(len(b)) && n <= uint64(len(b))-off {
			le.PutUint32(t[24:], crc32.Checksum(b[off:off+n], castagnoli))
		}
	}
	le.PutUint32(b[60:], headerChecksum(b[:headerSize+ns*sectionEntrySize]))
}

func nan() float64 { return math.NaN() }

func newDense(r, c int) *tensor.Dense { return tensor.NewDense(r, c) }
