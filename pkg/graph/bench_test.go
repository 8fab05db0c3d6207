package graph

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTmp != "" {
		os.RemoveAll(benchTmp)
	}
	os.Exit(code)
}

// benchTmp holds the benchmark inputs generated once per test binary.
var (
	benchTmp  string
	benchOnce = map[string]*sync.Once{"coauthor_cs": {}, "rmat": {}}
	benchErr  error
)

// benchRMAT is the R-MAT graph of the load benchmarks: 10⁷ directed edges.
var benchRMAT = RMATParams{Nodes: 1_000_000, Edges: 10_000_000, Features: 16, Classes: 16, Seed: 1}

// benchInputs returns the text directory and the prepared file of the named benchmark graph,
// generating them on first use.
func benchInputs(b *testing.B, which string) (textDir, prepared string) {
	b.Helper()
	benchOnce[which].Do(func() {
		if benchTmp == "" {
			if benchTmp, benchErr = os.MkdirTemp("", "graph-bench-"); benchErr != nil {
				return
			}
		}
		textDir, prepared = benchPaths(which)
		var d *Dataset
		if which == "rmat" {
			if d, benchErr = RMAT(benchRMAT); benchErr == nil {
				benchErr = WriteText(textDir, d)
			}
		} else {
			d, benchErr = LoadTextWith(os.DirFS(textDir), ".", LoadOptions{})
		}
		if benchErr == nil {
			benchErr = WritePreparedFile(prepared, d)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchPaths(which)
}

// benchPaths names the inputs of a benchmark graph: the shipped text dataset or the generated
// one, and the prepared file.
func benchPaths(which string) (textDir, prepared string) {
	textDir = filepath.Join(shippedDir, which)
	if which == "rmat" {
		textDir = filepath.Join(benchTmp, which)
	}
	return textDir, filepath.Join(benchTmp, which+".dorylus")
}

// dirBytes returns the total size of the files in dir.
func dirBytes(b *testing.B, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

func benchLoadText(b *testing.B, which string) {
	dir, _ := benchInputs(b, which)
	b.SetBytes(dirBytes(b, dir)) // stored (partly gzipped) bytes
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadTextWith(os.DirFS(dir), ".", LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchLoadPrepared(b *testing.B, which string) {
	_, path := benchInputs(b, which)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadPrepared(path); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoadTextCoauthorCS(b *testing.B)     { benchLoadText(b, "coauthor_cs") }
func BenchmarkLoadPreparedCoauthorCS(b *testing.B) { benchLoadPrepared(b, "coauthor_cs") }
func BenchmarkLoadTextRMAT10M(b *testing.B)        { benchLoadText(b, "rmat") }
func BenchmarkLoadPreparedRMAT10M(b *testing.B)    { benchLoadPrepared(b, "rmat") }

// BenchmarkRMAT generates the 100k-node, 2M-edge graph of the PyTorch comparison (16 features).
func BenchmarkRMAT(b *testing.B) {
	p := RMATParams{Nodes: 100_000, Edges: 2_000_000, Features: 16, Classes: 16, Seed: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RMAT(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(p.Edges)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Medges/s")
}

func BenchmarkNormalizedAdjacency(b *testing.B) {
	d, err := RMAT(RMATParams{Nodes: 100_000, Edges: 2_000_000, Classes: 1, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(d.Adj.NNZ() * 4)
	for b.Loop() {
		NormalizedAdjacency(d.Adj)
	}
}
