package main

import (
	"fmt"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// machineMemory returns the memory this process and those it starts may use: the machine's,
// or its cgroup's limit when that is lower; 0 when neither can be read.
func machineMemory() uint64 {
	m, err := memlimit.FromSystem()
	if err != nil {
		m = 0
	}
	if c, err := memlimit.FromCgroup(); err == nil && c > 0 && (m == 0 || c < m) {
		m = c
	}
	return m
}

// memoryNeed is what a run needs: in one process (servers 0), at least three rows of every
// vertex per hidden layer (its output, activation and gradient: dorylus train measured 3.2,
// R-MAT 100k/1M/8 with --hidden 1024 and 2 to 5 layers); on graph servers, as the graph
// server predicts its own (GraphServerBytes: graphserver.Footprint, its fixed bytes included,
// which dorylus plan uses too), and the parameter servers' (ParamServersBytes); and the largest
// block, one layer's rows of every vertex at the widest width, to say where the size comes from.
type memoryNeed struct {
	total, rows float64
	servers     int
}

// rowsPerLayer is what the trainer of one process holds per hidden layer, in rows of every vertex.
const rowsPerLayer = 3

// needOf returns the memory need of w trained in one process (servers 0) or on servers graph
// servers and paramServers parameter servers of c on one machine.
func needOf(w plan.Workload, c plan.Config, servers, paramServers int) memoryNeed {
	widest := w.Model.Hidden
	if w.Model.Architecture == plan.GAT {
		widest *= w.Model.Heads
	}
	n := memoryNeed{rows: 4 * float64(w.Vertices) * float64(widest), servers: servers}
	if servers == 0 {
		n.total = rowsPerLayer * float64(w.Model.Layers-1) * n.rows
		return n
	}
	c.GraphServers = servers
	n.total = float64(servers)*w.GraphServerBytes(c) + w.ParamServersBytes(c, paramServers)
	return n
}

// planModel returns the model of o as pkg/plan models it.
func (o trainOptions) planModel() plan.Model {
	m := plan.Model{Architecture: plan.GCN, Layers: o.layers, Hidden: o.hidden}
	switch o.model {
	case "gat":
		m.Architecture, m.Heads = plan.GAT, o.heads
	case "sage":
		m.Architecture = plan.SAGE
	}
	return m
}

// checkLocalMemory is checkMemory of the model of o trained or run in this process on d.
func checkLocalMemory(d *graph.Dataset, o trainOptions) error {
	w := plan.Workload{Vertices: int64(d.NumNodes()), Entries: d.Adj.NNZ(), Features: d.NumFeatures(), Classes: d.NumClasses, Model: o.planModel()}
	if d.Features.Sparse != nil {
		w.FeatureEntries = d.Features.Sparse.NNZ()
	}
	return checkMemory(needOf(w, plan.Config{Backend: plan.CPU, Intervals: 1, Staleness: jobconfig.Sync}, 0, 0), machineMemory(), o, d.Name)
}

// checkServersMemory is checkMemory of the model of o trained or run on the graph and
// parameter servers of d, over the partitions m describes.
func checkServersMemory(m *partition.Manifest, o trainOptions, d distOptions) error {
	w := plan.Workload{Vertices: int64(m.Nodes), Entries: m.Edges, Features: m.Features, Classes: m.Classes, Model: o.planModel(),
		Cuts: map[int]plan.Part{d.graphServers: heaviestPart(m.Quality, int64(m.Nodes))}}
	c := plan.Config{Backend: plan.CPU, GraphServers: d.graphServers, Intervals: d.intervals, Staleness: d.staleness}
	return checkMemory(needOf(w, c, d.graphServers, d.paramServers), machineMemory(), o, m.Dataset)
}

// checkMemory refuses, before the run allocates its model, a run whose need exceeds the
// memory of this machine (have, from machineMemory; 0: unknown, not checked), naming the
// sizes that multiply into it.
func checkMemory(need memoryNeed, have uint64, o trainOptions, dataset string) error {
	if have == 0 || need.total <= float64(have) {
		return nil
	}
	sizes := fmt.Sprintf("--hidden %d with --layers %d", o.hidden, o.layers)
	if o.model == "gat" {
		sizes = fmt.Sprintf("--hidden %d × --heads %d with --layers %d", o.hidden, o.heads, o.layers)
	}
	remedy := "lower --hidden or --layers, or run it as a GNNTrainingJob on more nodes"
	if o.inference != "" { // predict: the sizes are the model's, not flags
		sizes = fmt.Sprintf("the model in %s (%s)", o.inference, strings.ReplaceAll(sizes, "--", ""))
		remedy = "predict on a smaller graph, or as a GNNTrainingJob on more nodes"
	}
	where := "in one process"
	if need.servers > 0 {
		where = fmt.Sprintf("on %d graph servers", need.servers)
	}
	return fmt.Errorf("%s on %s %s needs about %s (one layer's rows of every vertex: %s); this machine has %s: %s",
		sizes, dataset, where, memorySize(need.total), memorySize(need.rows), memorySize(float64(have)), remedy)
}
