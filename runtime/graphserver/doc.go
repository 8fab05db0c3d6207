// Package graphserver is the graph-server role of the data plane:
// it holds one partition and its ghost buffers, runs the graph-parallel tasks (GA, SC and their
// backward passes) with pkg/tensor, exchanges ghost rows with its peers over gRPC, hands the
// tensor tasks (AV, ∇AV) to a pkg/dispatch backend, computes the loss on the logits itself,
// pulls weights from and pushes gradients to the parameter servers, and drives its intervals
// through a pkg/pipeline Scheduler. Graph server 0 also coordinates: it sums the epochs' losses, runs evaluation
// passes, stops at the target accuracy or the epoch count, and writes the run's progress as
// JSON lines and, given a ProgressReporter (Config.Status), into the GNNTrainingJob's status.
//
// # Event loop
//
// One goroutine owns the scheduler and the run's bookkeeping (loop.go). Everything else — RPC
// handlers (service.go), task completions, version streams, evaluation passes — turns what
// happened into a typed event and posts it. step(event) in loop.go says, top to bottom, what the
// server does about each, and returns it as effects (effects.go): the tasks to start, the
// messages to send, the reports to write, as raft's Ready; it does no I/O and starts no
// goroutine, so a test steps it through an epoch by hand. The driver (drive.go) steps the loop on
// every event and carries the effects out, every goroutine in one errgroup, so Run returns only
// once all of them have ended. The files each hold one concern, and none uses a name of a file
// that uses one of its own: server.go builds and starts the server, drive.go carries out what
// the loop asks, reports.go writes graph server 0's progress, layout.go holds the partition, its
// buffers and the mixed-epoch reads of them, guard.go when a GCN's two slots may be written and
// read, rows.go the rows peers push, tasks.go the tasks common to both models, model.go the
// interface behind which gcn.go and gat.go differ, peers.go and shards.go the connections,
// weights.go and keep.go the weight versions in use, coord.go graph server 0's bookkeeping,
// eval.go the evaluation pass, export.go the writes of the export, and status.go the reports
// into the GNNTrainingJob's status.
//
// # Buffers
//
// P_l (owned rows, then ghost rows) and dZ_l are kept in R slots, epoch e in slot e mod R, so
// that a Gather can read each source interval at the epoch the scheduler names (Started.Reads)
// while its producer already writes a newer one: R = 1 in synchronous mode; 2 for an asynchronous
// GCN, whose writers wait until no Gather reads the epoch they overwrite and whose Gathers read
// the newer epoch instead of one being overwritten (guard.go); 2S+2 for a GAT with staleness S,
// whose backward pass reads the rows its forward pass read (a reader at epoch e reads no older
// than e-S-1, and no interval runs past e+S meanwhile). The backward pass uses the symmetry of Â.
// A GCN pulls gradients (pipeline.PullGradients): the loss and ∇AV_l ship the interval's new dZ
// rows to their ghost copies as SC ships P rows, so dZ_l has owned and ghost rows, and ∇GA_l is
// the forward Gather on dZ_l: dP_l = Â dZ_l. A GAT pushes them: ∇GA_l of an interval computes
// only the contributions of its rows to ghost rows (its transposed ghost block times its dZ_l
// rows), which ∇SC_l pushes to their owners; the owned part of Âᵀ dZ_l is gathered by ∇AV_l from
// the versioned dZ_l rows (owned rows only) of the local intervals, and the owners add the pushed
// contributions, each as of the epoch the scheduler names. Pulling sends each ghost's dZ row once
// an epoch, where pushing sends a row per remote interval that touches it, and keeps no
// contributions (R-MAT 1M/20M on 2 graph servers: 45 instead of 182 MiB an epoch backward).
//
// A GAT (Config.Heads > 0) runs through the same steps, with its edge tasks inside GA and ∇GA
// (gat.go).
//
// # Evaluation
//
// The coordinator asks every graph server for an evaluation pass (no dropout) at a weight
// version after an epoch (every EvalEvery epochs and after the last); it runs beside training
// with its own buffers and a layer-by-layer exchange, and yields the validation accuracy of the
// learning curve and the final accuracies.
package graphserver
