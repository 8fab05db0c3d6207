// Package paramserver is the parameter-server role of the data plane: one shard of the model's
// weights, sharded by layer (layer l lives on shard l mod M; a GAT's parameter tensors — W,
// a_dst, a_src, bias of every layer — count as layers 4l..4l+3), its Adam state, and the weight
// versions graph servers still read (weight stashing: an interval's backward pass uses the
// version its forward pass read).
//
// Every graph server sends Init with the model's shape and optimiser settings; the first one
// initialises the weights (Glorot, from the seed, exactly as pkg/model's single-process trainer
// does) and later ones must agree. Versions count updates: version 0 is the initial weights.
//
// In synchronous mode a shard applies one update per epoch: it waits for the gradients of
// every interval of every graph server (Init's contributions), sums them in the order of
// (partition, interval) and takes one Adam step, so a run equals the single-process trainer up
// to float summation order. In asynchronous mode each pushed gradient is applied as it
// arrives, to the newest weights; since a pushed gradient is an interval's share of the loss
// gradient and Adam normalises step sizes, the learning rate and the weight decay are divided
// by the number of contributions per epoch, so that an epoch's updates move the weights about
// as far as one synchronous step.
//
// A shard keeps the newest version and every version some graph server may still read: its
// Keep report (carried by Pull and Push) lists the versions it pinned and the newest version it
// knows, and it will only ever pin that one or newer. Until every graph server has reported,
// nothing is dropped. A version never changes once made: Pull replies share its buffers, and a
// dropped one is left to the garbage collector.
//
// Restarts (with checkpoints, in either mode): a shard saves its weights and Adam state every
// few epochs at an epoch boundary — in asynchronous mode where the graph servers drain the
// pipeline (pipeline.Config.DrainEvery): every gradient of the epochs before it applied and
// none of a later one — and, restarted, resumes from the newest epoch every shard has a valid
// checkpoint of. Versions count updates in both modes, so the checkpoint of epoch e holds
// version e in synchronous mode and e·contributions in asynchronous mode. Graph servers restart
// together (one lost stops the others): a second Init from a graph server begins a new start,
// the graph servers that have not sent Init since are refused (codes.Aborted) until they
// restart too, and the shard goes on from the newest epoch boundary it holds — in synchronous
// mode its newest version, in asynchronous mode its weights if they are at one, else its
// newest checkpoint. Init's rewind_to takes a shard that kept running back to the epoch
// another resumed from. An asynchronous run without checkpoints cannot resume: a restarted
// graph server ends it. A checkpoint that cannot be written or read breaks the shard: every
// call then fails with codes.DataLoss, since the run cannot go on.
//
// A shard is an event loop (loop.go): one goroutine owns its state (state.go), and the gRPC
// calls only turn requests into events and wait for the loop's answers. The two modes are
// two aggregations behind one interface (aggregate.go); the weight versions and their keeping
// are their own type (versions.go). A checkpoint is written outside the loop, from a snapshot
// the loop takes, so that a slow store delays no call but the Push whose update it holds; a
// checkpoint that falls due while the one before is still being written is skipped.
package paramserver
