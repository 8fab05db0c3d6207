package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/internal/gctune"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/runtime/paramserver"
)

// paramServerOptions are the flags of `dorylus param-server` and what it takes from the run
// config (fromConfig).
type paramServerOptions struct {
	serverFlags
	shard, shards int
	port          int
	checkpoint    checkpointOptions
	s3            objstore.Config // how to reach an s3:// checkpoint location
	security      jobconfig.Security
}

func newParamServerCommand() *cobra.Command {
	o := paramServerOptions{}
	cmd := &cobra.Command{
		Use:   "param-server",
		Short: "Serve one shard of the model's weights as a parameter server",
		Long: `Param-server holds the layers l with l mod SHARDS = SHARD of the model, applies Adam to the
gradients the graph servers push, and keeps the weight versions they still read. The shards
and the checkpoints come from the run config (pkg/jobconfig); the model is described by the
graph servers when they connect. With checkpoints it saves this shard's weights and Adam state
in subfolder shard-N of the destination every intervalEpochs epochs and when stopped, and
resumes from the newest epoch every shard has (unless the config says fresh).`,
		Example: `  dorylus param-server --config /etc/dorylus/run.json --shard 0`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			gctune.LimitHeap(cmd.ErrOrStderr())
			if err := o.fromConfig(o.config); err != nil {
				return err
			}
			return runParamServer(cmd.Context(), o)
		},
	}
	o.add(cmd.Flags())
	cmd.Flags().IntVar(&o.shard, "shard", 0, "this shard's index, its ordinal")
	return cmd
}

// validate checks the numeric flags before the run config loads: --shard is an ordinal of at
// most Limits.ParameterServers shards.
func (o *paramServerOptions) validate() error {
	return errors.Join(o.serverFlags.validate(),
		jobconfig.Range{Min: 0, Max: jobconfig.Limits.ParameterServers.Max - 1}.Check("--shard", o.shard))
}

// fromConfig loads the run config at path into the options.
func (o *paramServerOptions) fromConfig(path string) error {
	c, err := jobconfig.Load(path)
	if err != nil {
		return err
	}
	o.shards, o.port, o.security = c.ParameterServers.Replicas, c.ParameterServers.Port, c.Security
	if o.shard < 0 || o.shard >= o.shards {
		return fmt.Errorf("--shard %d: the run config has shards 0..%d", o.shard, o.shards-1)
	}
	if cp := c.Checkpoint; cp != nil {
		o.checkpoint = checkpointOptions{location: cp.Path, every: cp.IntervalEpochs, keep: cp.Keep, resume: !cp.Fresh, runID: cp.RunID}
		if cp.S3 != nil {
			o.checkpoint.location = "s3://" + cp.S3.Bucket + "/" + cp.S3.Prefix
			o.s3 = objstore.Config{Region: cp.S3.Region, Endpoint: cp.S3.Endpoint, CredentialsDir: cp.S3.CredentialsDir}
		}
	}
	return nil
}

func runParamServer(ctx context.Context, o paramServerOptions) error {
	sh, err := paramserver.New(o.shard, o.shards)
	if err != nil {
		return err
	}
	defer sh.Close()
	if o.checkpoint.location != "" {
		c := paramserver.Checkpointing{Every: o.checkpoint.every, Resume: o.checkpoint.resume, Log: os.Stderr}
		for i := range o.shards {
			st, err := checkpoint.Open(ctx, strings.TrimSuffix(o.checkpoint.location, "/")+fmt.Sprintf("/shard-%d", i), o.s3)
			if err != nil {
				return err
			}
			if i == o.shard {
				c.Checkpoints = checkpoint.Checkpoints{Store: st, Keep: o.checkpoint.keep, RunID: o.checkpoint.runID}
			} else {
				c.Peers = append(c.Peers, checkpoint.Checkpoints{Store: st, RunID: o.checkpoint.runID})
			}
		}
		if err := sh.EnableCheckpoints(c); err != nil {
			return err
		}
	}
	addr, err := o.advertised(o.port)
	if err != nil {
		return err
	}
	if addr != "" {
		sh.Advertise(addr)
	}
	creds, err := tlsCredentials(o.security)
	if err != nil {
		return err
	}
	lis, err := o.listener(o.port)
	if err != nil {
		return err
	}
	healthLis, err := o.healthListener()
	if err != nil {
		lis.Close()
		return err
	}
	ctx, cancel := o.context(ctx)
	defer cancel()
	reg, err := o.metrics(ctx, os.Stderr)
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
	// Stopped (SIGTERM, or the launcher): keep the epochs done since the last checkpoint.
	if cerr := sh.SaveCheckpoint(context.WithoutCancel(ctx)); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}
