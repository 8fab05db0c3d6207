// Command partition compares the edge cut of the multilevel partitioner (pkg/partition) with
// METIS's gpmetis, side by side, on the same graphs, part counts and balance: vertex weights
// 1 + degree (edges + vertices), at most 5% above the mean (gpmetis -ufactor=50). gpmetis is
// run when it is on PATH (Debian package metis); it is a yardstick, not a dependency.
//
//	go run ./hack/bench/partition [-k 2,4,8] DATASET...
//
// A DATASET is anything --dataset takes: a builtin name, a directory, a prepared file (its
// adjacency is streamed) or an rmat: spec (give features=0 to save memory).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/partition/metis"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

func main() {
	ks := flag.String("k", "2,4,8", "comma-separated part counts")
	seed := flag.Uint64("seed", partition.DefaultSeed, "seed of the multilevel partitioner")
	useMetis := flag.Bool("metis", true, "run gpmetis beside ours when it is on PATH")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: partition [-k 2,4,8] [-seed S] DATASET...")
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
	fmt.Println("dataset\tk\tours_cut\tours_balance\tours_s\tmetis_cut\tmetis_balance\tmetis_s\tours/metis")
	for _, spec := range flag.Args() {
		adj, name, err := load(spec)
		if err != nil {
			fail(err)
		}
		metisGraph := ""
		if gpmetis != "" {
			metisGraph = filepath.Join(tmp, "graph")
			if err := metis.WriteGraph(metisGraph, adj); err != nil {
				fail(err)
			}
		}
		for _, k := range parts {
			start := time.Now()
			plan, err := partition.Multilevel(adj, k, partition.Options{Seed: *seed})
			if err != nil {
				fail(err)
			}
			secs := time.Since(start).Seconds()
			ours := partition.Measure(adj, plan)
			line := fmt.Sprintf("%s\t%d\t%.4f\t%.4f\t%.2f", name, k, ours.CutRatio, ours.Balance, secs)
			if metisGraph != "" {
				m, msecs, err := runMetis(gpmetis, metisGraph, adj, k)
				if err != nil {
					fail(err)
				}
				line += fmt.Sprintf("\t%.4f\t%.4f\t%.2f\t%.3f", m.CutRatio, m.Balance, msecs, ours.CutRatio/m.CutRatio)
			} else {
				line += "\t-\t-\t-\t-"
			}
			fmt.Println(line)
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

// runMetis runs gpmetis on the graph file for k parts and measures its cut on adj.
func runMetis(gpmetis, path string, adj *tensor.CSR, k int) (partition.Quality, float64, error) {
	start := time.Now()
	owner, err := metis.Run(gpmetis, path, adj.Rows, k, 50)
	secs := time.Since(start).Seconds()
	if err != nil {
		return partition.Quality{}, 0, err
	}
	plan, err := partition.FromOwners(owner, k)
	if err != nil {
		return partition.Quality{}, 0, err
	}
	return partition.Measure(adj, plan), secs, nil
}
