// Package launcher runs the servers of one training run as processes of the dorylus binary
// on loopback: Launch writes their run config (pkg/jobconfig) and starts them, the run's
// Events are graph server 0's reports, decoded, until a server exits, and Stop stops them
// and says how much memory each held. It watches their memory as they run, so that a server
// the kernel killed is reported with what it held, and names the server whose exit ended a
// run, not a peer that exited because of it.
//
// `dorylus train --graph-servers`, `dorylus predict --graph-servers` and `dorylus plan
// calibrate` launch through it; the graph-server harness (runtime/graphserver/harness), which
// runs the servers in its own process, shares its loopback listeners and its decoder of the
// reports (Reports).
package launcher

import (
	"context"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/runtime/graphserver"
)

// Options say how to launch a run.
type Options struct {
	// Exe is the dorylus binary the servers run.
	Exe string
	// Work is the folder of the run's files: its run config, the usage file of every graph
	// server (UsagePath) and, with Trace, their timelines (TracePath).
	Work string
	// Trace has every graph server record its timeline (MergeTraces reads them).
	Trace bool
	// Log receives the servers' standard error, each line prefixed with the server's name.
	Log io.Writer
}

// Run is a launched run.
type Run struct {
	seed    uint64
	procs   []*Process
	exited  chan *Process
	reports *Reports
	sampled bool // the servers' memory was read at the first epoch
}

// Launch starts the servers of cfg, of which it needs the count of graph servers
// (GraphServers.Replicas) and of parameter-server shards (ParameterServers.Replicas; 0 in an
// inference): it gives each a loopback address (SetAddresses), issues the run's credentials
// into o.Work when cfg is secure and names none (a certificate of its own for each server,
// named by a copy of the config each), writes the config there and starts the servers, the
// parameter servers first. cfg itself is not changed. Stop the run whatever
// happens. Once ctx ends (the launcher's SIGTERM or SIGINT) it starts no more: it stops those
// it started and returns ctx's error.
func Launch(ctx context.Context, cfg *jobconfig.RunConfig, o Options) (*Run, error) {
	c := *cfg
	n, m := c.GraphServers.Replicas, c.ParameterServers.Replicas
	lis, err := Listen(n + m)
	if err != nil {
		return nil, err
	}
	defer CloseAll(lis) // the servers hold the sockets once started
	addrs := Addrs(lis)
	var own map[pki.Identity]string // each server's credentials, when the launcher issues them
	if !c.Security.Insecure && c.Security.TLSDir == "" {
		if c.Security.TLSDir, own, err = issueCredentials(o.Work, n, m); err != nil {
			return nil, err
		}
	}
	if err := SetAddresses(&c, addrs[:n], addrs[n:]); err != nil {
		return nil, err
	}
	seed := uint64(c.Training.Seed)
	path := filepath.Join(o.Work, fmt.Sprintf("run-%d.json", seed))
	if err := WriteConfig(path, &c); err != nil {
		return nil, err
	}
	// configOf is the run config of server id: the run's, or a copy naming its own credentials.
	configOf := func(id pki.Identity) (string, error) {
		dir, ok := own[id]
		if !ok {
			return path, nil
		}
		sc := c
		sc.Security.TLSDir = dir
		p := filepath.Join(o.Work, fmt.Sprintf("run-%d-%s-%d.json", seed, id.Role, id.Ordinal))
		return p, WriteConfig(p, &sc)
	}
	r := &Run{seed: seed, exited: make(chan *Process, n+m), reports: NewReports()}
	for s := range m {
		if err := r.stopped(ctx, fmt.Sprintf("param-server %d", s)); err != nil {
			return nil, err
		}
		cfgPath, err := configOf(pki.ParamServer(s))
		if err != nil {
			r.Stop()
			return nil, err
		}
		p, err := StartServer(o.Exe, fmt.Sprintf("param-server %d", s), lis[n+s], nil, o.Log, r.exited,
			"param-server", "--config", cfgPath, "--shard", strconv.Itoa(s), "--advertise-address", addrs[n+s])
		if err != nil {
			r.Stop()
			return nil, err
		}
		r.procs = append(r.procs, p)
	}
	for q := range n {
		var out io.Writer
		if q == 0 {
			out = r.reports.w
		}
		cfgPath, err := configOf(pki.GraphServer(q))
		if err != nil {
			r.Stop()
			return nil, err
		}
		args := []string{"graph-server", "--config", cfgPath, "--partition", strconv.Itoa(q),
			"--usage-file", UsagePath(o.Work, seed, q), "--advertise-address", addrs[q]}
		if o.Trace {
			args = append(args, "--trace", TracePath(o.Work, q))
		}
		if err := r.stopped(ctx, fmt.Sprintf("graph-server %d", q)); err != nil {
			return nil, err
		}
		p, err := StartServer(o.Exe, fmt.Sprintf("graph-server %d", q), lis[q], out, o.Log, r.exited, args...)
		if err != nil {
			r.Stop()
			return nil, err
		}
		r.procs = append(r.procs, p)
	}
	return r, nil
}

// stopped stops the servers started so far and returns an error once ctx has ended, before
// the server named next would start.
func (r *Run) stopped(ctx context.Context, next string) error {
	if ctx.Err() == nil {
		return nil
	}
	r.Stop()
	return fmt.Errorf("training stopped before %s started (seed %d): %w", next, r.seed, ctx.Err())
}

// issueCredentials makes a run's credentials, with an ephemeral CA, in a new folder of work
// (and so removed with it): the job's bundle, and in a folder <role>-<ordinal> below it for
// each of the graph servers and parameter servers the same with that server's own
// certificate (pki.Identity), with which no other server can speak as it. It returns the
// folder and the servers' folders by identity.
func issueCredentials(work string, graphServers, paramServers int) (string, map[pki.Identity]string, error) {
	ids := make([]pki.Identity, 0, graphServers+paramServers)
	for q := range graphServers {
		ids = append(ids, pki.GraphServer(q))
	}
	for s := range paramServers {
		ids = append(ids, pki.ParamServer(s))
	}
	b, err := pki.Issue(fmt.Sprintf("dorylus-%d", os.Getpid()), ids...)
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp(work, "credentials-*")
	if err != nil {
		return "", nil, err
	}
	if err := b.WriteDir(dir); err != nil {
		return "", nil, err
	}
	own := make(map[pki.Identity]string, len(ids))
	for _, id := range ids {
		sb, err := b.ForServer(id)
		if err != nil {
			return "", nil, err
		}
		own[id] = filepath.Join(dir, fmt.Sprintf("%s-%d", id.Role, id.Ordinal))
		if err := sb.WriteDir(own[id]); err != nil {
			return "", nil, err
		}
	}
	return dir, own, nil
}

// Events yields graph server 0's reports as it writes them, until the consumer stops or an
// error ends the run: a server exited (the one a signal killed, if any, named with its
// memory when last read and its last lines), a report could not be decoded, or ctx ended. It
// reads the servers' memory meanwhile.
func (r *Run) Events(ctx context.Context) iter.Seq2[graphserver.Event, error] {
	return func(yield func(graphserver.Event, error) bool) {
		tick := time.NewTicker(memorySample)
		defer tick.Stop()
		reports := r.reports.C
		for {
			select {
			case <-tick.C:
				r.sample()
			case rep, ok := <-reports:
				if !ok {
					reports = nil // graph server 0 exited: its exit comes
					continue
				}
				if rep.Err != nil {
					yield(graphserver.Event{}, rep.Err)
					return
				}
				if rep.Event.Event == graphserver.EventEpoch && !r.sampled {
					// The servers hold their buffers now: a first read, so that one killed
					// before the first tick (a short run) is reported with its memory too.
					r.sampled = true
					r.sample()
				}
				if !yield(rep.Event, nil) {
					return
				}
			case p := <-r.exited:
				p = exitCause(p, r.exited)
				yield(graphserver.Event{}, fmt.Errorf("%s exited before the run finished (%s)%s", p.Name, p.died(), p.Tail()))
				return
			case <-ctx.Done():
				yield(graphserver.Event{}, fmt.Errorf("training stopped (seed %d): %w", r.seed, ctx.Err()))
				return
			}
		}
	}
}

// Preempt preempts the run (the launcher's SIGTERM, in a run with checkpoints): it sends every
// server SIGTERM, on which the graph servers drain to an epoch boundary and the parameter
// servers save it before they exit, and waits up to timeout for all to exit, reading graph
// server 0's reports meanwhile. It returns graph server 0's report of the drain's end
// (graphserver.EventPreempted), ok false if none came. Stop the run after it.
func (r *Run) Preempt(timeout time.Duration) (drained graphserver.Event, ok bool) {
	for _, p := range r.procs {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM) // it may have exited
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	reports := r.reports.C
	for _, p := range r.procs {
		for waiting := true; waiting; {
			select {
			case rep, open := <-reports:
				if !open {
					reports = nil
				} else if rep.Err == nil && rep.Event.Event == graphserver.EventPreempted {
					drained, ok = rep.Event, true
				}
			case <-p.done:
				waiting = false
			case <-t.C:
				return drained, ok
			}
		}
	}
	return drained, ok
}

func (r *Run) sample() {
	for _, p := range r.procs {
		p.sample()
	}
}

// Stop stops every server and returns once all have exited, with the peak resident memory
// of each as last read, by name ("graph-server 0", "param-server 1").
func (r *Run) Stop() map[string]int64 {
	peak := map[string]int64{}
	r.sample()
	for _, p := range r.procs {
		peak[p.Name] = p.mem.Peak
	}
	r.reports.Close()
	StopAll(r.procs)
	return peak
}
