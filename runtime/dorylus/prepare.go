package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
)

func newPrepareCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "prepare SRC DST",
		Short: "Convert a dataset to the prepared binary format",
		Long: `Prepare reads SRC (a builtin name, a dataset directory in the plain-text format, or an
rmat:... generator spec) and writes DST in the prepared binary format: CSR adjacency, float32
features, labels and splits, with checksums. Training loads a prepared file many times faster.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := graph.Prepare(args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", args[1])
			return nil
		},
	}
}
