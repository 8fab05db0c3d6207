package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

func newPrepareCommand() *cobra.Command {
	var parts int
	var refine bool
	cmd := &cobra.Command{
		Use:   "prepare SRC DST",
		Short: "Convert a dataset to the prepared binary format",
		Long: `Prepare reads SRC (a builtin name, a dataset directory in the plain-text format, or an
rmat:... generator spec) and writes DST in the prepared binary format: CSR adjacency, float32
features, labels and splits, with checksums. Training loads a prepared file many times faster.
With --partitions P it writes directory DST with one file per partition instead, so that each
graph server reads only its own; from a prepared SRC the contiguous cut streams through it.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if parts > 0 {
				return preparePartitions(args[0], args[1], parts, refine, cmd.OutOrStdout())
			}
			if err := graph.Prepare(args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", args[1])
			return nil
		},
	}
	cmd.Flags().IntVar(&parts, "partitions", 0, "write DST as a directory of this many partition files (edge-cut balanced by edges)")
	cmd.Flags().BoolVar(&refine, "refine", false, "with --partitions: lower the edge cut by label propagation (loads the whole graph; renumbers vertices)")
	return cmd
}
