package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/internal/gctune"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/runtime/serve"
)

// paramServerOptions are the flags of `dorylus param-server`.
type paramServerOptions struct {
	serverFlags
	shard int
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
			c, err := jobconfig.Load(o.config)
			if err != nil {
				return err
			}
			return serve.RunParamServer(cmd.Context(), serve.ParamServer{Process: o.Process, Run: c, Shard: o.shard, Stderr: os.Stderr})
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
