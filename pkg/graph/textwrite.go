package graph

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// gzipThreshold is the plain size above which the format stores the edge list gzipped.
const gzipThreshold = 1 << 20

// decimalLen returns the number of decimal digits of v ≥ 0.
func decimalLen(v int64) int64 {
	n := int64(1)
	for v >= 10 {
		v /= 10
		n++
	}
	return n
}

// edgeFileName returns the edge file the format prescribes for adj: edges.txt, or edges.txt.gz
// when the plain text would be over 1 MiB.
func edgeFileName(adj *tensor.CSR) string {
	var size int64
	for u := 0; u < adj.Rows && size <= gzipThreshold; u++ {
		lo, hi := adj.RowPtr[u], adj.RowPtr[u+1]
		size += (hi - lo) * (decimalLen(int64(u)) + 2) // "u" + " " + "\n"
		for _, v := range adj.ColIdx[lo:hi] {
			size += decimalLen(int64(v))
		}
	}
	if size > gzipThreshold {
		return edgesGzip
	}
	return edgesPlain
}

// appendValue appends a feature value as the format writes it: integers without a decimal
// point, anything else as the shortest decimal that parses back to the same float32.
func appendValue(b []byte, v float32) []byte {
	if v > -(1<<24) && v < 1<<24 && v == float32(int32(v)) {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
}

// WriteText writes d into directory dir (created if needed) in the plain-text format of
// datasets/FORMAT.md. Features are written in the sparse col:value form, explicit zeros
// dropped, so LoadText returns them as a sparse matrix; meta.json's edge_file and
// num_feature_nonzeros are set to what is written.
func WriteText(dir string, d *Dataset) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("graph: write text %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("graph: write text: %w", err)
	}
	m := d.Meta
	m.EdgeFile = edgeFileName(d.Adj)
	if d.Features.Present() {
		nz := d.Features.Nonzeros()
		m.NumFeatureNonzeros = &nz
	}
	meta, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("graph: write text %s: meta: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, metaFile), append(meta, '\n'), 0o644); err != nil {
		return fmt.Errorf("graph: write text: %w", err)
	}
	var featErr error
	var wg sync.WaitGroup
	if d.Features.Present() {
		wg.Go(func() {
			featErr = writeTextFile(filepath.Join(dir, featuresFile), func(w *bufio.Writer) error { return writeFeatures(w, d.Features) })
		})
	}
	err = writeTextFile(filepath.Join(dir, m.EdgeFile), func(w *bufio.Writer) error { return writeEdges(w, d.Adj) })
	for s, ids := range [][]int32{d.Train, d.Val, d.Test} {
		if err != nil {
			break
		}
		err = writeTextFile(filepath.Join(dir, splitNames[s]+".txt"), func(w *bufio.Writer) error { return writeInts(w, ids) })
	}
	if err == nil {
		err = writeTextFile(filepath.Join(dir, labelsFile), func(w *bufio.Writer) error { return writeInts(w, d.Labels) })
	}
	wg.Wait()
	if err == nil {
		err = featErr
	}
	if err != nil {
		return fmt.Errorf("graph: write text: %w", err)
	}
	return nil
}

// writeTextFile creates path and fills it through fill, gzipped when the name ends in .gz.
func writeTextFile(path string, fill func(*bufio.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	var out io.Writer = f
	var zw *gzip.Writer
	if filepath.Ext(path) == ".gz" {
		zw, _ = gzip.NewWriterLevel(f, gzip.BestSpeed)
		out = zw
	}
	w := bufio.NewWriterSize(out, 256<<10)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeEdges(w *bufio.Writer, adj *tensor.CSR) error {
	var line []byte
	for u := 0; u < adj.Rows; u++ {
		for _, v := range adj.ColIdx[adj.RowPtr[u]:adj.RowPtr[u+1]] {
			line = strconv.AppendInt(line[:0], int64(u), 10)
			line = append(line, ' ')
			line = strconv.AppendInt(line, int64(v), 10)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeInts(w *bufio.Writer, v []int32) error {
	var line []byte
	for _, x := range v {
		line = strconv.AppendInt(line[:0], int64(x), 10)
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

func writeFeatures(w *bufio.Writer, f Features) error {
	var line []byte
	token := func(c int, v float32) {
		if v == 0 {
			return
		}
		if len(line) > 0 {
			line = append(line, ' ')
		}
		line = strconv.AppendInt(line, int64(c), 10)
		line = append(line, ':')
		line = appendValue(line, v)
	}
	for i := range f.Rows() {
		line = line[:0]
		if x := f.Sparse; x != nil {
			for k := x.RowPtr[i]; k < x.RowPtr[i+1]; k++ {
				v := float32(1)
				if x.Val != nil {
					v = x.Val[k]
				}
				token(int(x.ColIdx[k]), v)
			}
		} else {
			for c, v := range f.Dense.Row(i) {
				token(c, v)
			}
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	return nil
}
