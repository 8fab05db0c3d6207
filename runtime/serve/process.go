// Package serve assembles the server processes of a run from its run config (pkg/jobconfig):
// a graph server (GraphServer) and a parameter-server shard (ParamServer) each open what the
// config names — the tensor backend, the partition, the credentials, the checkpoints and the
// export — and what the command line adds (Process: the sockets, metrics, health and
// advertised address), then serve until ctx ends. Command dorylus parses the flags into these
// types and calls them; nothing here reads a flag.
package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// Process is how a server process serves, as the graph-server and param-server commands
// share it; everything about the run itself is in the run config. The errors name the flags
// the fields are set from.
type Process struct {
	// Listen is the address to serve gRPC on ("": the run config's port on every interface).
	Listen string
	// ListenFD, when not 0, is an inherited listening socket to serve on instead.
	ListenFD int
	// StopOnStdin stops the server when standard input closes.
	StopOnStdin bool
	// Metrics serves Prometheus metrics on GET /metrics at this address ("": none).
	Metrics string
	// Health serves the gRPC health service alone, in plaintext, at this address ("": none).
	Health string
	// Advertise is the host or host:port functions reach this server at on the pull data path
	// ("": the run config's address of the server).
	Advertise string
	// Drain bounds, in a run with checkpoints, how long SIGTERM (a preemption) waits for the
	// graph servers to drain to an epoch boundary, which the parameter servers then save
	// (0: jobconfig.DefaultDrainTimeout).
	Drain time.Duration
}

// MaxListenFD bounds ListenFD: a file descriptor is a non-negative C int.
const MaxListenFD = math.MaxInt32

// drain returns Drain, or jobconfig.DefaultDrainTimeout if 0.
func (p *Process) drain() time.Duration { return cmp.Or(p.Drain, jobconfig.DefaultDrainTimeout) }

// advertised returns Advertise, with port when it names a host alone; "" without it.
func (p *Process) advertised(port int) (string, error) {
	a := p.Advertise
	if a == "" {
		return "", nil
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		a = net.JoinHostPort(a, strconv.Itoa(port))
	}
	if host, pt, err := net.SplitHostPort(a); err != nil || host == "" || pt == "" || len(a) > dispatch.MaxAddress {
		return "", fmt.Errorf("--advertise-address %q: want a host or host:port of at most %d bytes", p.Advertise, dispatch.MaxAddress)
	}
	return a, nil
}

// healthListener returns the socket of Health; nil without it.
func (p *Process) healthListener() (net.Listener, error) {
	if p.Health == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", p.Health)
	if err != nil {
		return nil, fmt.Errorf("--health-address: %w", err)
	}
	return lis, nil
}

// functionIssuer returns the function issuer of the run config's credentials, with which the
// pull data path certifies functions' keys: none for an insecure run.
func functionIssuer(s jobconfig.Security) (*pki.Issuer, error) {
	if s.Insecure {
		return nil, nil
	}
	return pki.LoadIssuer(s.TLSDir)
}

// tlsCredentials returns the TLS credentials the run config's security section names: nil for
// an insecure run.
func tlsCredentials(s jobconfig.Security) (*pki.Credentials, error) {
	if s.Insecure {
		return nil, nil
	}
	return pki.Load(s.TLSDir)
}

// metrics starts serving the process's Prometheus series at Metrics until ctx ends and
// returns their registry, which holds the Go runtime's and the process's; nil without it.
func (p *Process) metrics(ctx context.Context, stderr io.Writer) (*prometheus.Registry, error) {
	if p.Metrics == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", p.Metrics)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go func() {
		if err := srv.Serve(lis); !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "dorylus: metrics at %s: %v\n", lis.Addr(), err)
		}
	}()
	return reg, nil
}

// listener returns the socket to serve on: the inherited one, Listen, or port on every
// interface.
func (p *Process) listener(port int) (net.Listener, error) {
	if p.ListenFD > 0 {
		file := os.NewFile(uintptr(p.ListenFD), "listener")
		defer file.Close()
		lis, err := net.FileListener(file)
		if err != nil {
			return nil, fmt.Errorf("--listen-fd %d: %w", p.ListenFD, err)
		}
		return lis, nil
	}
	addr := p.Listen
	if addr == "" {
		addr = fmt.Sprintf(":%d", port)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--listen: %w", err)
	}
	return lis, nil
}

// context returns ctx, cancelled also when standard input closes if asked. With preempt (a run
// with checkpoints) ctx's end — SIGTERM — does not cancel it but closes the returned channel:
// a preemption, which drains the run first.
func (p *Process) context(ctx context.Context, preempt bool) (context.Context, context.CancelFunc, <-chan struct{}) {
	var preempted <-chan struct{}
	if preempt {
		preempted, ctx = ctx.Done(), context.WithoutCancel(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	if p.StopOnStdin {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	return ctx, cancel, preempted
}
