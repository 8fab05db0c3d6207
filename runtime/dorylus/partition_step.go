package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dorylus-gnn/dorylus/internal/gctune"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/source"
	"github.com/dorylus-gnn/dorylus/runtime/serve"
)

func newPartitionCommand() *cobra.Command {
	var config, work string
	cmd := &cobra.Command{
		Use:   "partition",
		Short: "Cut a job's dataset into its partition files (the operator's partition step)",
		Long: `Partition reads a run config's dataset and writes it, cut by the multilevel partitioner into
one file per graph server with partitions.json beside them, to the config's partitions location
(a folder, or an S3 prefix through a local staging folder), where the graph servers read their
own file, and last the digest of what they were cut from (the dataset's files, the method, the
count and the seed). Files already there for the same dataset and count are checked and reused
when that digest matches, cut again when it does not (a dataset changed in place); files of
another dataset or count are an error. Inside a
GNNTrainingJob ($DORYLUS_NAMESPACE, $DORYLUS_JOB_NAME) it reports the cut into the job's
status.partitions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.LimitHeap(cmd.ErrOrStderr())
			gctune.CollectEarly(cmd.Context())
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
// c.Partitions, unless valid files of that dataset and count cut from the same inputs are there
// already, and returns their cut. Files of that dataset and count cut from other inputs are
// replaced; files of another count or dataset are refused.
func partitionStep(ctx context.Context, c *jobconfig.RunConfig, work string, out io.Writer) (jobstatus.Partitions, error) {
	loc, parts := c.Partitions, c.GraphServers.Replicas
	if loc == nil {
		return jobstatus.Partitions{}, errors.New("the run config has no partitions location")
	}
	st, err := serve.OpenLocation(ctx, *loc)
	if err != nil {
		return jobstatus.Partitions{}, err
	}
	spec, err := source.Fetch(ctx, c.Dataset, source.Options{Dir: filepath.Join(work, "dataset")})
	if err != nil {
		return jobstatus.Partitions{}, err
	}
	if partition.HasManifest(spec) || partition.HasFiles(spec) {
		return jobstatus.Partitions{}, fmt.Errorf("dataset %s is already cut into partition files: leave spec.dataset.partitionTo unset", source.Redact(source.Spec(c.Dataset)))
	}
	if err := graph.CheckFormat(spec, graph.Format(c.Dataset.Format)); err != nil {
		return jobstatus.Partitions{}, err
	}
	in, err := digestInputs(spec, partition.DefaultMethod, parts)
	if err != nil {
		return jobstatus.Partitions{}, err
	}
	if m, err := existingPartitions(ctx, st, work, parts); err != nil || m != nil {
		if err == nil {
			err = sameDataset(m, spec, st)
		}
		if err != nil {
			return jobstatus.Partitions{}, err
		}
		was, err := recordedInputs(ctx, st)
		if err != nil {
			return jobstatus.Partitions{}, err
		}
		if was == in {
			fmt.Fprintf(out, "reusing %d partitions (%s) of %s in %s: %v\n", parts, m.Method, m.Dataset, st, m.Quality)
			return reportOf(m, true), nil
		}
		fmt.Fprintf(out, "the partitions of %s in %s were cut from other inputs (%s, now %s): cutting them again\n", m.Dataset, st, was.orNone(), in)
		if err := st.Delete(ctx, inputsFile); err != nil { // until the new files are all there
			return jobstatus.Partitions{}, err
		}
	}
	dir := loc.Path
	if loc.S3 != nil {
		dir = filepath.Join(work, "partitions")
	}
	if err := partition.Cut(ctx, spec, dir, parts, partition.DefaultMethod, out); err != nil {
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
	if err := st.Put(ctx, inputsFile, []byte(in+"\n")); err != nil { // last: the files are of these inputs
		return jobstatus.Partitions{}, err
	}
	return reportOf(m, false), nil
}

// inputsFile holds, beside the partition files, the digest of the inputs they were cut from.
const inputsFile = "partition-inputs.sha256"

// inputs is the digest of what a cut depends on: the dataset's files, the method, the number
// of parts and the partitioner's seed (digestInputs).
type inputs string

func (in inputs) orNone() string {
	if in == "" {
		return "none recorded"
	}
	return string(in)
}

// digestInputs returns the SHA-256 of the cut of the dataset at spec into parts by method: of
// the method, parts and seed, then of every file under spec (its path, size and bytes, in
// lexical order); a builtin or generated dataset (no such path) is its spec.
func digestInputs(spec string, method partition.Method, parts int) (inputs, error) {
	h := sha256.New()
	fmt.Fprintf(h, "method=%s parts=%d seed=%d\n", method, parts, partition.DefaultSeed)
	if _, err := os.Stat(spec); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(h, "dataset %q\n", spec)
	} else if err := filepath.WalkDir(spec, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(spec, path)
		info, err := f.Stat()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "file %q %d\n", filepath.ToSlash(rel), info.Size())
		_, err = io.Copy(h, f)
		return err
	}); err != nil {
		return "", fmt.Errorf("digest the dataset at %s: %w", spec, err)
	}
	return inputs(fmt.Sprintf("sha256:%x", h.Sum(nil))), nil
}

// recordedInputs returns the digest of the inputs the partitions in st were cut from; "" when
// none is recorded (cut before digests were, or the cut did not finish).
func recordedInputs(ctx context.Context, st checkpoint.Store) (inputs, error) {
	b, err := st.Get(ctx, inputsFile)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, objstore.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return inputs(strings.TrimSpace(string(b))), nil
}

// sameDataset checks that the manifest m found in st describes the dataset at spec.
func sameDataset(m *partition.Manifest, spec string, st checkpoint.Store) error {
	d, err := graph.Load(spec, graph.LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		return err
	}
	if m.Dataset != d.Name || m.Nodes != d.NumNodes() || m.Edges != d.Adj.NNZ() || m.Features != d.NumFeatures() || m.Classes != d.NumClasses {
		return fmt.Errorf("%s in %s holds the partitions of dataset %s (%d nodes, %d directed edges, %d features, %d classes), not of %s (%d, %d, %d, %d): choose another spec.dataset.partitionTo",
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
