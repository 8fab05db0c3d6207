package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/runtime/paramserver"
)

// ParamServer is one parameter-server shard of a run: the run config and what its command
// line adds.
type ParamServer struct {
	Process
	// Run is the run config, validated (jobconfig.Load).
	Run *jobconfig.RunConfig
	// Shard is this shard's index among the run config's.
	Shard int
	// Stderr receives the log.
	Stderr io.Writer
}

// checkpoints returns where the run's checkpoints go, as a location checkpoint.Open takes,
// and how to reach an s3:// one; "" without checkpoints.
func checkpoints(cp *jobconfig.Checkpoint) (string, objstore.Config) {
	if cp == nil {
		return "", objstore.Config{}
	}
	if s := cp.S3; s != nil {
		return "s3://" + s.Bucket + "/" + s.Prefix, objstore.Config{Region: s.Region, Endpoint: s.Endpoint, CredentialsDir: s.CredentialsDir}
	}
	return cp.Path, objstore.Config{}
}

// RunParamServer serves shard p.Shard of the run's weights until ctx ends (or standard input
// closes, if asked): with checkpoints it resumes from the newest epoch every shard has
// (unless the run config says fresh), saves every intervalEpochs epochs, and saves once more
// when stopped.
func RunParamServer(ctx context.Context, p ParamServer) error {
	c := p.Run
	shards, port := c.ParameterServers.Replicas, c.ParameterServers.Port
	if p.Shard < 0 || p.Shard >= shards {
		return fmt.Errorf("--shard %d: the run config has shards 0..%d", p.Shard, shards-1)
	}
	sh, err := paramserver.New(p.Shard, shards)
	if err != nil {
		return err
	}
	defer sh.Close()
	if location, s3 := checkpoints(c.Checkpoint); location != "" {
		cp := c.Checkpoint
		pc := paramserver.Checkpointing{Every: cp.IntervalEpochs, Resume: !cp.Fresh, Log: p.Stderr}
		for i := range shards {
			st, err := checkpoint.Open(ctx, strings.TrimSuffix(location, "/")+fmt.Sprintf("/shard-%d", i), s3)
			if err != nil {
				return err
			}
			if i == p.Shard {
				pc.Checkpoints = checkpoint.Checkpoints{Store: st, Keep: cp.Keep, RunID: cp.RunID}
			} else {
				pc.Peers = append(pc.Peers, checkpoint.Checkpoints{Store: st, RunID: cp.RunID})
			}
		}
		if err := sh.EnableCheckpoints(pc); err != nil {
			return err
		}
	}
	addr, err := p.advertised(port)
	if err != nil {
		return err
	}
	if addr != "" {
		sh.Advertise(addr)
	}
	creds, err := tlsCredentials(c.Security)
	if err != nil {
		return err
	}
	lis, err := p.listener(port)
	if err != nil {
		return err
	}
	healthLis, err := p.healthListener()
	if err != nil {
		lis.Close()
		return err
	}
	ctx, cancel, preempted := p.context(ctx, c.Checkpoint != nil)
	defer cancel()
	go func() { // a preemption: serve until the graph servers drained, then stop and save
		select {
		case <-preempted:
		case <-ctx.Done():
			return
		}
		dctx, dcancel := context.WithTimeout(ctx, p.drain()+jobconfig.DrainExit)
		if err := sh.Preempt(dctx); err != nil {
			fmt.Fprintf(p.Stderr, "dorylus param-server: preempted: %v; saving the newest epoch boundary\n", err)
		}
		dcancel()
		cancel()
	}()
	reg, err := p.metrics(ctx, p.Stderr)
	if err != nil {
		return err
	}
	if reg != nil {
		reg.MustRegister(sh)
	}
	// The largest request is a Push of the shard's layers, which Init bounds by the shard's
	// message limit: rpc.MaxMessage, the server's too (the model's widths come only with Init).
	srv, h := rpc.NewServer(rpc.WithTLS(creds))
	rpc.RegisterParamServerServer(srv, sh)
	healthDone := make(chan error, 1)
	if healthLis != nil {
		go func() { healthDone <- rpc.ServeHealth(ctx, healthLis, h) }()
	} else {
		healthDone <- nil
	}
	err = rpc.Serve(ctx, lis, srv, h)
	cancel()
	err = errors.Join(err, <-healthDone)
	// Stopped (SIGTERM, or the launcher): keep the epochs done since the last checkpoint, up to
	// a preemption's drain.
	if cerr := sh.SaveCheckpoint(context.WithoutCancel(ctx)); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}
