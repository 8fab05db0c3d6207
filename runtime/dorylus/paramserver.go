package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/runtime/paramserver"
)

// paramServerOptions are the flags of `dorylus param-server`.
type paramServerOptions struct {
	serverFlags
	shard, shards int
	checkpoint    checkpointOptions
	s3            objstore.Config // how to reach an s3:// checkpoint location
}

func newParamServerCommand() *cobra.Command {
	o := paramServerOptions{}
	cmd := &cobra.Command{
		Use:   "param-server",
		Short: "Serve one shard of the model's weights as a parameter server",
		Long: `Param-server holds the layers l with l mod SHARDS = SHARD of the model, applies Adam to the
gradients the graph servers push, and keeps the weight versions they still read. The model is
described by the graph servers when they connect.`,
		Example: `  dorylus param-server --config /etc/dorylus/run.json --shard 0
  dorylus param-server --shard 1 --shards 2 --listen :5101`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.config != "" {
				err := overrideConfig(cmd.Flags(), func() error {
					c, err := jobconfig.Load(o.config)
					if err != nil {
						return err
					}
					o.shards, o.listen = c.ParameterServers.Replicas, fmt.Sprintf(":%d", c.ParameterServers.Port)
					if cp := c.Checkpoint; cp != nil {
						// A restarted pod continues from the latest checkpoint.
						o.checkpoint.every, o.checkpoint.resume, o.checkpoint.location = cp.IntervalEpochs, true, cp.Path
						if cp.S3 != nil {
							o.checkpoint.location = "s3://" + cp.S3.Bucket + "/" + cp.S3.Prefix
							o.s3 = objstore.Config{Region: cp.S3.Region, Endpoint: cp.S3.Endpoint, CredentialsDir: cp.S3.CredentialsDir}
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			return runParamServer(cmd.Context(), o)
		},
	}
	o.add(cmd.Flags(), jobconfig.ParamServerPort)
	cmd.Flags().IntVar(&o.shard, "shard", 0, "this shard's index")
	cmd.Flags().IntVar(&o.shards, "shards", 1, "number of shards")
	o.checkpoint.addFlags(cmd.Flags())
	cmd.Flags().Lookup("checkpoint-dir").Usage = "save checkpoints (weights and Adam state of this shard, in its subfolder shard-N) to this folder or s3://bucket/prefix: every --checkpoint-every epochs and when stopped; synchronous runs only"
	return cmd
}

func runParamServer(ctx context.Context, o paramServerOptions) error {
	sh, err := paramserver.New(o.shard, o.shards)
	if err != nil {
		return err
	}
	if o.checkpoint.location != "" {
		if err := o.checkpoint.validate(trainOptions{runs: 1}); err != nil {
			return err
		}
		c := paramserver.Checkpointing{Every: o.checkpoint.every, Resume: o.checkpoint.resume, Log: os.Stderr}
		for i := range o.shards {
			st, err := checkpoint.Open(ctx, strings.TrimSuffix(o.checkpoint.location, "/")+fmt.Sprintf("/shard-%d", i), o.s3)
			if err != nil {
				return err
			}
			if i == o.shard {
				c.Checkpoints = checkpoint.Checkpoints{Store: st, Keep: o.checkpoint.keep}
			} else {
				c.Peers = append(c.Peers, checkpoint.Checkpoints{Store: st})
			}
		}
		err = sh.EnableCheckpoints(c)
		if err != nil {
			return err
		}
	} else if o.checkpoint.resume {
		return errors.New("--resume needs --checkpoint-dir")
	}
	lis, err := o.listener()
	if err != nil {
		return err
	}
	ctx, cancel := o.context(ctx)
	defer cancel()
	srv, h := rpc.NewServer()
	rpc.RegisterParamServerServer(srv, sh)
	err = rpc.Serve(ctx, lis, srv, h)
	// Stopped (SIGTERM, or the launcher): keep the epochs done since the last checkpoint.
	if cerr := sh.SaveCheckpoint(context.WithoutCancel(ctx)); cerr != nil {
		return errors.Join(err, cerr)
	}
	return err
}
