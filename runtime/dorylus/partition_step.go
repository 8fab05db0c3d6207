package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

func newPartitionCommand() *cobra.Command {
	var config, work string
	cmd := &cobra.Command{
		Use:   "partition",
		Short: "Cut a job's dataset into its partition files (the operator's partition step)",
		Long: `Partition reads a run config's dataset and writes it, cut by the multilevel partitioner into
one file per graph server with partitions.json beside them, to the config's partitions location
(a folder, or an S3 prefix through a local staging folder), where the graph servers read their
own file. Files already there for the same dataset and count are checked and reused; files of
another dataset or count are an error. Inside a
GNNTrainingJob ($DORYLUS_NAMESPACE, $DORYLUS_JOB_NAME) it reports the cut into the job's
status.partitions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			limitHeap(cmd.ErrOrStderr())
			collectEarly(cmd.Context())
			c, err := jobconfig.Load(config)
			if err != nil {
				return err
			}
			p, err := partitionStep(cmd.Context(), c, work, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			ns, name := os.Getenv(jobconfig.EnvNamespace), os.Getenv(jobconfig.EnvJobName)
			if ns == "" || name == "" {
				return nil
			}
			r, err := jobstatus.NewInCluster()
			if err != nil {
				return err
			}
			return r.ReportPartitions(cmd.Context(), p)
		},
	}
	cmd.Flags().StringVar(&config, "config", jobconfig.DefaultPath, "the run config")
	cmd.Flags().StringVar(&work, "work-dir", os.TempDir(), "where the dataset is downloaded and, for an S3 location, the files are staged")
	return cmd
}

// partitionStep writes c's dataset cut into c.GraphServers.Replicas partition files to
// c.Partitions, unless valid files of that dataset and count are there already, and returns
// their cut; files of another count or dataset there are refused, not replaced.
func partitionStep(ctx context.Context, c *jobconfig.RunConfig, work string, out io.Writer) (jobstatus.Partitions, error) {
	loc, parts := c.Partitions, c.GraphServers.Replicas
	if loc == nil {
		return jobstatus.Partitions{}, errors.New("the run config has no partitions location")
	}
	st, err := openLocation(ctx, *loc)
	if err != nil {
		return jobstatus.Partitions{}, err
	}
	spec, err := source.Fetch(ctx, c.Dataset, source.Options{Dir: filepath.Join(work, "dataset")})
	if err != nil {
		return jobstatus.Partitions{}, err
	}
	if partition.HasManifest(spec) || hasPartitionFiles(spec) {
		return jobstatus.Partitions{}, fmt.Errorf("dataset %s is already cut into partition files: leave spec.dataset.partitionTo unset", source.Redact(source.Spec(c.Dataset)))
	}
	if m, err := existingPartitions(ctx, st, work, parts); err != nil || m != nil {
		if err == nil {
			err = sameDataset(m, spec, st)
		}
		if err != nil {
			return jobstatus.Partitions{}, err
		}
		fmt.Fprintf(out, "reusing %d partitions (%s) of %s in %s: %v\n", parts, m.Method, m.Dataset, st, m.Quality)
		return reportOf(m, true), nil
	}
	dir := loc.Path
	if loc.S3 != nil {
		dir = filepath.Join(work, "partitions")
	}
	if err := preparePartitions(spec, dir, parts, partition.DefaultMethod, out); err != nil {
		return jobstatus.Partitions{}, err
	}
	m, err := partition.ReadManifest(dir)
	if err != nil {
		return jobstatus.Partitions{}, err
	}
	if loc.S3 != nil {
		if err := uploadPartitions(ctx, dir, m, st); err != nil {
			return jobstatus.Partitions{}, err
		}
		fmt.Fprintf(out, "uploaded them to %s\n", st)
	}
	return reportOf(m, false), nil
}

// sameDataset checks that the manifest m found in st describes the dataset at spec.
func sameDataset(m *partition.Manifest, spec string, st checkpoint.Store) error {
	d, err := graph.Load(spec, graph.LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		return err
	}
	if m.Dataset != d.Name || m.Nodes != d.NumNodes() || m.Edges != d.Adj.NNZ() || m.Features != d.NumFeatures() || m.Classes != d.NumClasses {
		return fmt.Errorf("%s in %s holds the partitions of dataset %s (%d nodes, %d edges, %d features, %d classes), not of %s (%d, %d, %d, %d): choose another spec.dataset.partitionTo",
			partition.ManifestFileName, st, m.Dataset, m.Nodes, m.Edges, m.Features, m.Classes, d.Name, d.NumNodes(), d.Adj.NNZ(), d.NumFeatures(), d.NumClasses)
	}
	return nil
}

// existingPartitions returns the manifest of the partition files in st, checked against parts
// and their headers (of a folder), or nil when st holds none.
func existingPartitions(ctx context.Context, st checkpoint.Store, work string, parts int) (*partition.Manifest, error) {
	dir, ok := st.(checkpoint.Dir)
	if !ok { // S3: read the manifest alone; each graph server checks its own file against it
		raw, err := st.Get(ctx, partition.ManifestFileName)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, objstore.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		dir = checkpoint.Dir(filepath.Join(work, "manifest"))
		if err := dir.Put(ctx, partition.ManifestFileName, raw); err != nil {
			return nil, err
		}
	}
	if !partition.HasManifest(string(dir)) {
		return nil, nil
	}
	m, err := partition.ReadManifest(string(dir))
	if err != nil {
		return nil, err
	}
	if err := m.Require(string(dir), parts); err != nil {
		return nil, err
	}
	if _, ok := st.(checkpoint.Dir); ok {
		if err := m.CheckHeaders(string(dir)); err != nil {
			return nil, fmt.Errorf("the partition files in %s: %w", st, err)
		}
	}
	return m, nil
}

// uploadPartitions puts the partition files of m in dir, then the manifest, into st.
func uploadPartitions(ctx context.Context, dir string, m *partition.Manifest, st checkpoint.Store) error {
	names := make([]string, 0, len(m.Files)+1)
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	for _, name := range append(names, partition.ManifestFileName) { // the manifest last: it says the files are there
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := st.Put(ctx, name, b); err != nil {
			return fmt.Errorf("upload %s to %s: %w", name, st, err)
		}
	}
	return nil
}

func reportOf(m *partition.Manifest, reused bool) jobstatus.Partitions {
	if m == nil {
		return jobstatus.Partitions{}
	}
	q := m.Quality
	return jobstatus.Partitions{Parts: m.Parts, Method: string(m.Method), EdgeCut: q.CutRatio, Ghosts: q.Ghosts, Balance: q.Balance, Reused: reused}
}
