package graph

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// OGBWriteSplit is the split directory WriteOGB writes (split/default).
const OGBWriteSplit = "default"

// WriteOGB writes d into directory dir (created if needed) in OGB's node-property-prediction
// layout, as LoadOGB reads it: each undirected edge once (src < dst), features dense (zeros
// written), nan for an unlabelled node, the split under split/OGBWriteSplit.
func WriteOGB(dir string, d *Dataset) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("graph: write OGB %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ogbSplitDir, OGBWriteSplit), 0o755); err != nil {
		return fmt.Errorf("graph: write OGB: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "raw"), 0o755); err != nil {
		return fmt.Errorf("graph: write OGB: %w", err)
	}
	file := func(name string, fill func(*bufio.Writer) error) error {
		return writeTextFile(filepath.Join(dir, filepath.FromSlash(name)), fill)
	}
	count := func(v int64) func(*bufio.Writer) error {
		return func(w *bufio.Writer) error { _, err := fmt.Fprintf(w, "%d\n", v); return err }
	}
	a := d.Adj
	err := file(ogbNumNodes, count(int64(d.NumNodes())))
	if err == nil {
		err = file(ogbNumEdges, count(int64(len(a.ColIdx))/2))
	}
	if err == nil {
		err = file(ogbEdges, func(w *bufio.Writer) error {
			var line []byte
			for u := range a.Rows {
				for _, v := range a.ColIdx[a.RowPtr[u]:a.RowPtr[u+1]] {
					if int(v) > u {
						line = strconv.AppendInt(line[:0], int64(u), 10)
						line = append(line, ',')
						line = append(strconv.AppendInt(line, int64(v), 10), '\n')
						if _, err := w.Write(line); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
	}
	if err == nil && d.Features.Present() {
		err = file(ogbFeatures, func(w *bufio.Writer) error { return writeDenseCSV(w, d.Features) })
	}
	if err == nil {
		err = file(ogbLabels, func(w *bufio.Writer) error {
			for _, l := range d.Labels {
				s := "nan\n"
				if l >= 0 {
					s = strconv.Itoa(int(l)) + "\n"
				}
				if _, err := w.WriteString(s); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for s, ids := range [][]int32{d.Train, d.Val, d.Test} {
		if err == nil {
			err = file(ogbSplitDir+"/"+OGBWriteSplit+"/"+ogbSplitFiles[s], func(w *bufio.Writer) error { return writeInts(w, ids) })
		}
	}
	if err != nil {
		return fmt.Errorf("graph: write OGB: %w", err)
	}
	return nil
}

// writeDenseCSV writes f as rows of comma-separated values, zeros included.
func writeDenseCSV(w *bufio.Writer, f Features) error {
	row := make([]float32, f.Cols())
	var line []byte
	for i := range f.Rows() {
		if x := f.Sparse; x != nil {
			clear(row)
			for k := x.RowPtr[i]; k < x.RowPtr[i+1]; k++ {
				row[x.ColIdx[k]] = 1
				if x.Val != nil {
					row[x.ColIdx[k]] = x.Val[k]
				}
			}
		} else {
			copy(row, f.Dense.Row(i))
		}
		line = line[:0]
		for c, v := range row {
			if c > 0 {
				line = append(line, ',')
			}
			line = appendValue(line, v)
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return nil
}
