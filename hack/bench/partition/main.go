// Command partition compares the edge cut of the multilevel partitioner (pkg/partition) with
// METIS's gpmetis, side by side, on the same graphs, part counts and balance: vertex weights
// 1 + degree (edges + vertices), at most 5% above the mean (gpmetis -ufactor=50). gpmetis is
// run when it is on PATH (Debian package metis); it is a yardstick, not a dependency.
//
//	go run ./hack/bench/partition [-k 2,4,8] [-permute SEED] GRAPH...
//
// A GRAPH is anything --dataset takes (a builtin name, a directory, a prepared file, whose
// adjacency is streamed, or an rmat: spec: give features=0 to save memory) or a shape of
// pkg/partition/shapes: skew:scale=S,edges=M,a=A,b=B,c=C[,seed=N] (R-MAT of 2^S vertices from
// M edges drawn with quadrant probabilities A, B, C), grid:w=W,h=H[,seed=N] or
// regular:n=N,d=D[,seed=N]. -permute renumbers every graph's vertices at random first.
//
// Each row gives both cuts (adjacency entries cut, and ours over METIS's), the balances, the
// wall and CPU seconds (user + system) of each partitioner, and our peak resident memory: the
// process's peak while Multilevel runs, the graph it holds included. (gpmetis's peak is not
// given: a child's peak RSS counts its parent's, on Linux.)
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/partition/metis"
	"github.com/dorylus-gnn/dorylus/pkg/partition/shapes"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

func main() {
	ks := flag.String("k", "2,4,8", "comma-separated part counts")
	seed := flag.Uint64("seed", partition.DefaultSeed, "seed of the multilevel partitioner")
	permute := flag.Uint64("permute", 0, "renumber each graph's vertices at random with this seed first (0: keep them)")
	useMetis := flag.Bool("metis", true, "run gpmetis beside ours when it is on PATH")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: partition [-k 2,4,8] [-seed S] [-permute SEED] GRAPH...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var parts []int
	for _, s := range strings.Split(*ks, ",") {
		k, err := strconv.Atoi(s)
		if err != nil || k < 1 {
			fail(fmt.Errorf("-k %q: want positive part counts", *ks))
		}
		parts = append(parts, k)
	}
	gpmetis := ""
	if *useMetis {
		gpmetis, _ = exec.LookPath("gpmetis")
	}
	tmp, err := os.MkdirTemp("", "partition-bench-*")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(tmp)
	fmt.Println("graph\tk\tours_cut\tmetis_cut\tours/metis\tours_balance\tmetis_balance\tours_s\tours_cpu_s\tmetis_s\tmetis_cpu_s\tours_peak_mib")
	for _, spec := range flag.Args() {
		adj, name, err := load(spec)
		if err != nil {
			fail(err)
		}
		if *permute != 0 {
			adj, name = shapes.Permuted(adj, *permute), fmt.Sprintf("%s-permuted%d", name, *permute)
		}
		metisGraph := ""
		if gpmetis != "" {
			metisGraph = filepath.Join(tmp, "graph")
			if err := metis.WriteGraph(metisGraph, adj); err != nil {
				fail(err)
			}
		}
		for _, k := range parts {
			runtime.GC()
			debug.FreeOSMemory()
			resetPeak()
			cpu0, start := cpuTime(), time.Now()
			plan, err := partition.Multilevel(adj, k, partition.Options{Seed: *seed})
			if err != nil {
				fail(err)
			}
			secs, cpu := time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds()
			peak := peakRSS()
			ours := partition.Measure(adj, plan)
			if metisGraph == "" {
				fmt.Printf("%s\t%d\t%d\t-\t-\t%.4f\t-\t%.2f\t%.2f\t-\t-\t%.0f\n", name, k, ours.Cut, ours.Balance, secs, cpu, mib(peak))
				continue
			}
			m, msecs, mcpu, err := runMetis(gpmetis, metisGraph, adj, k)
			if err != nil {
				fail(err)
			}
			fmt.Printf("%s\t%d\t%d\t%d\t%.3f\t%.4f\t%.4f\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\n", name, k, ours.Cut, m.Cut,
				float64(ours.Cut)/float64(m.Cut), ours.Balance, m.Balance, secs, cpu, msecs, mcpu.Seconds(), mib(peak))
		}
	}
	if gpmetis == "" && *useMetis {
		fmt.Fprintln(os.Stderr, "gpmetis not found on PATH: METIS columns left empty (apt-get install metis)")
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "partition bench:", err)
	os.Exit(1)
}

// load returns the adjacency of spec and a short name.
func load(spec string) (*tensor.CSR, string, error) {
	if kind, params, ok := strings.Cut(spec, ":"); ok && (kind == "skew" || kind == "grid" || kind == "regular") {
		return shape(kind, params)
	}
	if graph.IsPreparedFile(spec) || graph.IsPreparedFile(filepath.Join(spec, graph.PreparedFileName)) {
		adj, err := partition.ReadAdjacency(spec)
		return adj, filepath.Base(spec), err
	}
	d, err := graph.Load(spec, graph.LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		return nil, "", err
	}
	return d.Adj, d.Name, nil
}

// shape builds the shapes graph of kind from its key=value parameters.
func shape(kind, params string) (*tensor.CSR, string, error) {
	vals := map[string]float64{"seed": 1}
	for _, kv := range strings.Split(params, ",") {
		k, v, _ := strings.Cut(kv, "=")
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, "", fmt.Errorf("%s:%s: %q: want key=number", kind, params, kv)
		}
		vals[k] = x
	}
	need := map[string][]string{"skew": {"scale", "edges", "a", "b", "c"}, "grid": {"w", "h"}, "regular": {"n", "d"}}[kind]
	for _, k := range need {
		if _, ok := vals[k]; !ok {
			return nil, "", fmt.Errorf("%s:%s: no %s (want %s)", kind, params, k, strings.Join(need, ", "))
		}
	}
	i, s := func(k string) int { return int(vals[k]) }, uint64(vals["seed"])
	name := kind + ":" + params
	switch kind {
	case "skew":
		if a, b, c := vals["a"], vals["b"], vals["c"]; a < 0 || b < 0 || c < 0 || a+b+c > 1 || i("scale") < 1 || i("scale") > 30 {
			return nil, "", fmt.Errorf("%s: want 1 ≤ scale ≤ 30 and probabilities a, b, c ≥ 0 of sum ≤ 1", name)
		}
		return shapes.RMAT(i("scale"), i("edges"), vals["a"], vals["b"], vals["c"], s), name, nil
	case "grid":
		if i("w") < 1 || i("h") < 1 {
			return nil, "", fmt.Errorf("%s: want w, h ≥ 1", name)
		}
		return shapes.Grid(i("w"), i("h"), s), name, nil
	default:
		if i("n") < 1 || i("d") < 1 || i("d") >= i("n") {
			return nil, "", fmt.Errorf("%s: want 1 ≤ d < n", name)
		}
		return shapes.Regular(i("n"), i("d"), s), name, nil
	}
}

// runMetis runs gpmetis on the graph file for k parts and measures its cut on adj.
func runMetis(gpmetis, path string, adj *tensor.CSR, k int) (partition.Quality, float64, time.Duration, error) {
	start := time.Now()
	owner, cpu, err := metis.Run(gpmetis, path, adj.Rows, k, 50)
	secs := time.Since(start).Seconds()
	if err != nil {
		return partition.Quality{}, 0, 0, err
	}
	plan, err := partition.FromOwners(owner, k)
	if err != nil {
		return partition.Quality{}, 0, 0, err
	}
	return partition.Measure(adj, plan), secs, cpu, nil
}

// cpuTime returns the user + system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeak resets the process's peak resident set size to the present one (Linux's
// /proc/self/clear_refs), so that peakRSS reports the peak since.
func resetPeak() {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		fail(fmt.Errorf("resetting the peak RSS: %w", err))
	}
}

// peakRSS returns the process's peak resident set size in bytes (VmHWM).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		fail(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				fail(fmt.Errorf("/proc/self/status: %q: %w", sc.Text(), err))
			}
			return kib << 10
		}
	}
	fail(fmt.Errorf("/proc/self/status has no VmHWM"))
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
