package main

import (
	"fmt"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/dorylus-gnn/dorylus/pkg/plan"
)

// serverBaseBytes is what a server process holds before its buffers: the Go runtime, the
// binary's text and gRPC's (an idle graph server of a tiny graph holds 20–30 MiB).
const serverBaseBytes = 24 << 20

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
// R-MAT 100k/1M/8 with --hidden 1024 and 2 to 5 layers); on graph servers, as pkg/plan's
// memory model predicts each (GraphServerBytes, which dorylus plan uses); and the largest
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
	n.total = float64(servers)*w.GraphServerBytes(c) + float64(servers+paramServers)*serverBaseBytes
	return n
}

// planModel returns the model of o as pkg/plan models it.
func (o trainOptions) planModel() plan.Model {
	m := plan.Model{Architecture: plan.GCN, Layers: o.layers, Hidden: o.hidden}
	if o.model == "gat" {
		m.Architecture, m.Heads = plan.GAT, o.heads
	}
	return m
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
	where := "in one process"
	if need.servers > 0 {
		where = fmt.Sprintf("on %d graph servers", need.servers)
	}
	return fmt.Errorf("%s on %s %s needs about %s (one layer's rows of every vertex: %s); this machine has %s: lower --hidden or --layers, or run it as a GNNTrainingJob on more nodes",
		sizes, dataset, where, memorySize(need.total), memorySize(need.rows), memorySize(float64(have)))
}
