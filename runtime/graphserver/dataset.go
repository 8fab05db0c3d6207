package graphserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/partition"
	"github.com/dorylus-gnn/dorylus/pkg/source"
)

// LoadPartition reads partition p of parts of dataset d: its own file from a partitioned
// directory, checked against the directory's manifest when it has one (of a remote dataset,
// only that file is downloaded, under /tmp, the pods' writable emptyDir), or the whole dataset
// cut in memory by the default plan (deterministic: every server computes the same cut). The
// dataset must be in the layout d.Format names, when it names one.
func LoadPartition(ctx context.Context, d jobconfig.Dataset, fetch source.Options, p, parts int) (*graph.PartitionData, error) {
	fetch.Partition, fetch.Partitions = p, parts
	spec, err := source.Fetch(ctx, d, fetch)
	if err != nil {
		return nil, err
	}
	own := filepath.Join(spec, graph.PartitionFileName(p, parts))
	format := graph.Format(d.Format)
	if (partition.HasManifest(spec) || isRegular(own)) && format != "" && format != graph.FormatPrepared {
		return nil, fmt.Errorf("dataset %s holds partition files (the %s layout), not the %s layout its configuration names", source.Redact(source.Spec(d)), graph.FormatPrepared, format)
	}
	if partition.HasManifest(spec) {
		m, err := partition.ReadManifest(spec)
		if err != nil {
			return nil, err
		}
		if err := m.Require(spec, parts); err != nil {
			return nil, err
		}
		data, err := graph.ReadPartitionFile(own, p, parts)
		if err != nil {
			return nil, err
		}
		return data, m.CheckPart(own, data)
	}
	if isRegular(own) {
		return graph.ReadPartitionFile(own, p, parts)
	}
	whole, err := graph.Load(spec, graph.LoadOptions{Format: format})
	if err != nil {
		return nil, err
	}
	plan, err := partition.Default(whole.Adj, parts)
	if err != nil {
		return nil, err
	}
	return partition.DatasetPart(whole, plan, p)
}

// isRegular reports whether p is a regular file.
func isRegular(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
