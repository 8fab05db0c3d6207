package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/runtime/paramserver"
)

// paramServerOptions are the flags of `dorylus param-server`.
type paramServerOptions struct {
	serverFlags
	shard, shards int
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
	return cmd
}

func runParamServer(ctx context.Context, o paramServerOptions) error {
	sh, err := paramserver.New(o.shard, o.shards)
	if err != nil {
		return err
	}
	lis, err := o.listener()
	if err != nil {
		return err
	}
	ctx, cancel := o.context(ctx)
	defer cancel()
	srv, h := rpc.NewServer()
	rpc.RegisterParamServerServer(srv, sh)
	return rpc.Serve(ctx, lis, srv, h)
}
