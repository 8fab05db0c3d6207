package plan

import "github.com/dorylus-gnn/dorylus/runtime/graphserver"

// GraphServerBytes predicts the resident memory of the graph server that holds the heaviest
// part of w in configuration c: graphserver.Footprint's Bytes, the function the graph server
// sizes itself by before it allocates its rows (README "Memory of a graph server"), with an
// evaluation pass beside training (a job evaluates every evalEvery epochs) and the output
// layer's one attention head.
func (w Workload) GraphServerBytes(c Config) float64 {
	return w.footprint(c).Bytes()
}

// footprint returns the graphserver.Footprint of the heaviest part of w in c.
func (w Workload) footprint(c Config) graphserver.Footprint {
	p := w.Part(c.GraphServers)
	f := graphserver.Footprint{Owned: p.Vertices, Ghosts: p.Ghosts, Entries: p.Entries, Dims: w.widths(),
		SAGE: w.Model.Architecture == SAGE, Staleness: c.Staleness, Intervals: c.Intervals, Evaluates: true}
	if w.Model.Architecture == GAT {
		f.Heads, f.OutHeads = max(w.Model.Heads, 1), 1
	}
	if w.FeatureEntries > 0 {
		f.FeatureEntries = w.FeatureEntries * p.Vertices / w.Vertices
	}
	return f
}

// ParamServersBytes predicts the resident memory of n parameter servers holding w's weights in
// c, all together: each shard's graphserver.ParamServerBytes of the layers it holds, which sum
// to n shards' fixed bytes and every weight's once.
func (w Workload) ParamServersBytes(c Config, n int) float64 {
	if n < 1 {
		return 0
	}
	return float64(n) * graphserver.ParamServerBytes(w.Weights()/float64(n), c.Staleness)
}
