// Package plan predicts the epoch time and the cost of a training run for each configuration
// of backend (cpu, lambda, knative), graph servers, intervals, function concurrency and
// function memory, and picks the one of best value (epochs per dollar) that meets a deadline
// or a budget.
//
// # The model of one epoch
//
// Every graph server holds one part of an edge cut (Workload.Parts gives the heaviest part's
// vertices, Â entries and ghosts). For layer l of widths w[l-1] → w[l] an epoch runs, on
// each of a server's I intervals, the tasks of DESIGN.md section 4: GA (one multiply-add
// per Â entry and input column), AV (2·V·w[l-1]·w[l] flops), SC (the ghosts' new rows), and
// backward ∇AV (dW, and dZ above the first layer), ∇SC and ∇GA (above the first layer).
// Three bounds limit an epoch; it takes the largest, plus a fixed per-epoch time:
//
//   - work: the core-seconds of the server's kernels (multiply-adds and flops at their
//     measured costs), of its element-wise work, of each task (scheduling, RPCs), of each
//     scatter message and of each weight element fetched and updated, spread over its cores,
//     plus the ghost bytes at the network's rate; the parameter servers apply every graph
//     server's updates on their own cores. On one shared machine
//     (Machine.SharedCores) every server's and every function's work shares its cores, the
//     calls' overhead included.
//   - functions: the calls of one server (AV, the loss and ∇AV of every interval), each a call
//     latency plus its payload's transfer plus its compute on the function's cores, Concurrency
//     at a time.
//   - chain: one interval's own tasks run in order (2L+1 calls and its share of the graph
//     work), but with staleness S it has up to S+1 epochs in flight, so an epoch waits for
//     1/(S+1) of its chain.
//
// The pipeline's overlap is what the max expresses: graph work, calls and transfers of
// different intervals (and epochs) overlap, so the slowest resource sets the pace. The
// synchronous mode (a barrier after every Scatter) is not modelled.
//
// # Calibration
//
// The coefficients (Calibration) come from short measurements on the machine: kernel
// micro-benchmarks, a loopback transfer, and real training runs whose epoch times fit the
// element, task, message, weight and epoch costs by least squares with no negative one, and a
// run through function emulators the call latency (see dorylus plan calibrate). Default is the
// calibration shipped in calibration.json.
package plan
