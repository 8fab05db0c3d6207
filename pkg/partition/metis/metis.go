// Package metis runs METIS's gpmetis (Debian package metis) on a graph, the yardstick the
// multilevel partitioner's cut is measured against (hack/bench/partition and pkg/partition's
// tests): the graph is written in METIS's format with vertex weights 1 + degree, the balance
// Multilevel keeps, and gpmetis's part of every vertex read back.
package metis

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// WriteGraph writes the symmetric adjacency adj (no self loops) to path in METIS's graph format
// with vertex weights 1 + degree (fmt 010).
func WriteGraph(path string, adj *tensor.CSR) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, "%d %d 010\n", adj.Rows, adj.NNZ()/2)
	buf := make([]byte, 0, 64)
	for v := range adj.Rows {
		buf = strconv.AppendInt(buf[:0], int64(adj.Degree(v))+1, 10)
		for _, c := range adj.ColIdx[adj.RowPtr[v]:adj.RowPtr[v+1]] {
			buf = append(buf, ' ')
			buf = strconv.AppendInt(buf, int64(c)+1, 10)
		}
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Run runs gpmetis on the graph file path (written by WriteGraph for a graph of n vertices) for
// k ≥ 2 parts, each at most ufactor/1000 above the mean weight (gpmetis -ufactor), and returns
// the part of every vertex and the CPU time (user + system) gpmetis took.
func Run(gpmetis, path string, n, k, ufactor int) ([]int32, time.Duration, error) {
	if k < 2 {
		return nil, 0, fmt.Errorf("metis: gpmetis needs at least 2 parts, not %d", k)
	}
	cmd := exec.Command(gpmetis, "-ufactor="+strconv.Itoa(ufactor), path, strconv.Itoa(k))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, 0, fmt.Errorf("metis: %s %s %d: %v\n%s", gpmetis, filepath.Base(path), k, err, out)
	}
	cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	partFile := fmt.Sprintf("%s.part.%d", path, k)
	defer os.Remove(partFile)
	data, err := os.ReadFile(partFile)
	if err != nil {
		return nil, 0, err
	}
	fields := strings.Fields(string(data))
	if len(fields) != n {
		return nil, 0, fmt.Errorf("metis: %s: %d lines for %d vertices", partFile, len(fields), n)
	}
	owner := make([]int32, n)
	for v, s := range fields {
		q, err := strconv.Atoi(s)
		if err != nil || q < 0 || q >= k {
			return nil, 0, fmt.Errorf("metis: %s line %d: %q is not a part of %d", partFile, v+1, s, k)
		}
		owner[v] = int32(q)
	}
	return owner, cpu, nil
}
