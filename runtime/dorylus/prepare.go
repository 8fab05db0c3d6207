package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/internal/gctune"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
)

func newPrepareCommand() *cobra.Command {
	var parts int
	var method string
	var refine bool
	var layout string
	cmd := &cobra.Command{
		Use:   "prepare SRC DST",
		Short: "Convert a dataset to the prepared binary format",
		Long: `Prepare reads SRC (a builtin name, a dataset directory in the plain-text format or in
OGB's node-property-prediction layout, NumPy arrays with PyG's names (a directory of .npy files
or a .npz), or an rmat:... generator spec) and writes DST in the prepared binary format: CSR adjacency, float32
features, labels and splits, with checksums. Training loads a prepared file many times faster.
With --partitions P it writes directory DST with one file per partition instead, so that each
graph server reads only its own. The partitions are cut by --method: multilevel (the default, a
METIS-style multilevel k-way cut balanced by edges + vertices within 5%; it renumbers the
vertices), contiguous (ranges of vertex ids), or label-propagation (contiguous, refined). From a
prepared SRC the cut streams: contiguous holds one part at a time, the others the adjacency.
Beside the files it writes partitions.json: the dataset, the method, the cut's quality, and
every file's size and checksum. Every file keeps its vertices' original ids, which key the
dropout masks. train --graph-servers P --dataset DST trains on such a directory: the launcher
checks the manifest and the files' headers, and each graph server reads only its own file.
With --layout text, ogb or numpy it writes DST in that layout instead (the plain-text format,
OGB's node-property-prediction layout, or PyG's NumPy arrays: a .npz when DST ends so, else a
directory of .npy files), e.g. an rmat: graph for a loader's benchmark.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			// One partition per graph server: at most as many as a run may have.
			if err := zeroOr(jobconfig.Limits.GraphServers, "--partitions", parts, "one file"); err != nil {
				return err
			}
			m, err := partition.ParseMethod(method)
			if err != nil {
				return fmt.Errorf("--method: %w", err)
			}
			if refine {
				m = partition.MethodLabelPropagation
			}
			gctune.CollectEarly(cmd.Context())
			if layout != preparedLayout {
				write, ok := layoutWriters[layout]
				switch {
				case !ok:
					return fmt.Errorf("--layout %q: want %s, text, ogb or numpy", layout, preparedLayout)
				case parts > 0 || cmd.Flags().Changed("method") || refine:
					return fmt.Errorf("--layout %s writes one dataset: --partitions, --method and --refine are for the prepared format", layout)
				}
				d, err := graph.Load(args[0], graph.LoadOptions{AllowMissingFeatures: true})
				if err == nil {
					err = write(args[1], d)
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "wrote %s (%s layout)\n", args[1], layout)
				return nil
			}
			if parts > 0 {
				return partition.Cut(cmd.Context(), args[0], args[1], parts, m, cmd.OutOrStdout())
			}
			if cmd.Flags().Changed("method") || refine {
				return fmt.Errorf("--method and --refine apply to --partitions only")
			}
			if err := graph.Prepare(args[0], args[1]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", args[1])
			return nil
		},
	}
	cmd.Flags().IntVar(&parts, "partitions", 0, "write DST as a directory of this many partition files")
	cmd.Flags().StringVar(&method, "method", string(partition.DefaultMethod), "with --partitions: multilevel, contiguous or label-propagation")
	cmd.Flags().StringVar(&layout, "layout", preparedLayout, "write DST in this layout: prepared, text, ogb or numpy")
	cmd.Flags().BoolVar(&refine, "refine", false, "with --partitions: the same as --method label-propagation")
	_ = cmd.Flags().MarkDeprecated("refine", "use --method label-propagation") // errs only for an undefined flag
	return cmd
}

// preparedLayout is prepare's default --layout, the prepared binary format.
const preparedLayout = "prepared"

// layoutWriters write the layouts of prepare --layout other than the prepared format.
var layoutWriters = map[string]func(string, *graph.Dataset) error{
	"text": graph.WriteText, "ogb": graph.WriteOGB, "numpy": graph.WriteNumPy,
}
