// Package cpu is the goroutine-pool tensor backend: it runs tensor tasks inside the graph
// server with dispatch.Execute, at most Workers at a time, optionally after an injected
// latency that stands in for a remote function call, so the pipeline's latency hiding can be
// studied on one machine.
package cpu

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/model"
)

// Options configures a Backend.
type Options struct {
	// Workers is how many tasks run at once (GOMAXPROCS when 0). The tasks' kernels share the
	// process's kernel pool, so more workers than cores only overlap waiting.
	Workers int
	// Latency is added to every task, inside its worker slot, as a remote call would add it.
	Latency time.Duration
	// Wire sends every request and result through the wire encoding (dispatch.EncodeRequest,
	// EncodeResult), as a remote backend must, to exercise and measure that path.
	Wire bool
	// Placement, when set with a Latency, runs the kinds of task it places locally without
	// the Latency and the Wire: Latency and Wire stand for a remote call, which those skip.
	Placement *dispatch.Placement
}

// Backend is the goroutine-pool backend; it implements dispatch.Backend,
// dispatch.StatsReporter and dispatch.Placer.
type Backend struct {
	opts    Options
	workers chan struct{} // a token per running task: at most Workers, waits included
	// acts holds the free scratch activations (dispatch.Execute: where a task that brings none
	// computes sparse features' activation; a dense one is computed a block of rows at a time),
	// one per core, or per worker if fewer: a task holds one while it computes, not while it
	// waits, so computing tasks are as many as cores.
	acts  chan *model.Activation
	calls atomic.Int64
	busy  atomic.Int64 // nanoseconds
}

// New returns a backend with the given options.
func New(o Options) (*Backend, error) {
	if o.Workers < 0 || o.Latency < 0 {
		return nil, fmt.Errorf("cpu backend: %d workers, latency %v: want non-negative values", o.Workers, o.Latency)
	}
	if o.Workers == 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	n := min(o.Workers, runtime.GOMAXPROCS(0))
	b := &Backend{opts: o, workers: make(chan struct{}, o.Workers), acts: make(chan *model.Activation, n)}
	for range n {
		b.acts <- &model.Activation{}
	}
	return b, nil
}

// Concurrency returns the number of workers.
func (b *Backend) Concurrency() int { return b.opts.Workers }

// Stats returns the tasks run and their summed time (latency included).
func (b *Backend) Stats() dispatch.Stats {
	return dispatch.Stats{Calls: b.calls.Load(), Busy: time.Duration(b.busy.Load())}
}

// Placement returns the placement of the backend's tasks (nil: every task takes the latency).
func (b *Backend) Placement() *dispatch.Placement { return b.opts.Placement }

// StandsForCalls reports whether the backend's tasks stand for remote calls: it adds a latency
// or sends them through the wire encoding. Else every task simply runs in the graph server.
func (b *Backend) StandsForCalls() bool { return b.opts.Latency > 0 || b.opts.Wire }

// Run runs the task once a worker is free.
func (b *Backend) Run(ctx context.Context, req dispatch.TaskRequest) (dispatch.TaskResult, error) {
	select {
	case b.workers <- struct{}{}:
	case <-ctx.Done():
		return dispatch.TaskResult{}, ctx.Err()
	}
	defer func() { <-b.workers }()
	start := time.Now()
	defer func() { b.calls.Add(1); b.busy.Add(int64(time.Since(start))) }()
	called := !b.opts.Placement.Local(&req)
	if called && b.opts.Latency > 0 {
		t := time.NewTimer(b.opts.Latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		if err := ctx.Err(); err != nil { // also when both were ready: select picks either
			return dispatch.TaskResult{}, err
		}
	}
	var act *model.Activation
	select {
	case act = <-b.acts:
	case <-ctx.Done():
		return dispatch.TaskResult{}, ctx.Err()
	}
	defer func() { b.acts <- act }()
	if !called || !b.opts.Wire {
		return dispatch.Execute(&req, act)
	}
	if err := req.Validate(); err != nil {
		return dispatch.TaskResult{}, err
	}
	remote, err := dispatch.DecodeRequest(dispatch.EncodeRequest(&req))
	if err != nil {
		return dispatch.TaskResult{}, err
	}
	res, err := dispatch.Execute(&remote, act)
	if err != nil {
		return dispatch.TaskResult{}, err
	}
	return dispatch.DecodeResult(dispatch.EncodeResult(req.Op, res), req.Op, req.Destinations())
}
