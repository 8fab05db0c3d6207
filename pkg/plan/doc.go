// Package plan predicts the epoch time and the cost of a training run for each configuration
// of backend (cpu, lambda, knative), graph servers, intervals, function concurrency and
// function memory, and picks the one of best value (epochs per dollar) that meets a deadline
// or a budget.
//
// # The model of one epoch
//
// Every graph server holds one part of an edge cut (Workload.Parts gives the heaviest part's
// vertices, Â entries and ghosts). For layer l of widths w[l-1] → w[l] an epoch runs, on
// each of a server's I intervals, the tasks of pkg/model (TaskKind): GA (one multiply-add
// per Â entry and input column), AV (2·V·w[l-1]·w[l] flops), SC (the ghosts' new rows), and
// backward ∇AV (dW, and dZ above the first layer), the gradient rows back to the ghosts' owners
// (a GCN ships dZ, a GAT's ∇SC its contributions) and ∇GA (above the first layer).
// A GraphSAGE (mean aggregator) runs a GCN's tasks, its AV and ∇AV once per half of
// [W_self; W_neigh]: two calls each on a function backend.
// An epoch takes the largest of four bounds, plus a fixed time per epoch:
//
//   - work: the core-seconds of the server's kernels (multiply-adds and flops at their
//     measured costs), of its element-wise work, of each task (scheduling, RPCs), of each
//     scatter message and of each weight element fetched and updated, spread over its cores,
//     plus the ghost bytes at the network's rate. On one shared machine
//     (Machine.SharedCores) every server's and every function's work shares its cores, the
//     calls' overhead (per call and per byte of payload) included.
//   - parameter servers: every graph server's updates, on their own cores.
//   - calls: the calls of one server, each its latency, overhead and compute, Concurrency at
//     a time. On one shared machine a call's overhead and compute wait for cores the work
//     keeps busy a fraction ρ of the epoch: they take 1/(1−ρᵐ) as long on m cores, the
//     response time of an M/M/m queue (exact for m ≤ 2), at the epoch this bound sets.
//   - chain: one interval's latencies — its round trips (weight pull, gradient push, SC and
//     the gradient rows back), each a fixed latency plus one per byte carried, and its calls'
//     latency — in series with the server's work, for the epoch gate keeps the intervals in
//     step (each stage of one waits for the cores to run that stage of all); with staleness S,
//     S+1 epochs of it are in flight, so an epoch waits for 1/(S+1) of it.
//
// Latency is not core-seconds: the intervals wait out their round trips and calls at the
// same time, so it does not grow with the intervals, and it is hidden once the work
// outlasts it S times over. The synchronous mode (a barrier after every Scatter) is not
// modelled.
//
// # Calibration
//
// The coefficients (Calibration) come from short measurements on the machine: kernel
// micro-benchmarks, a loopback transfer, and real training runs (dorylus plan calibrate): on
// the cpu backend, and through function emulators, whose epoch times Fit fits by least
// squares with no negative coefficient, each run by the bound that sets it. Default is the
// calibration shipped in calibration.json.
package plan
