package plan

import "github.com/dorylus-gnn/dorylus/runtime/graphserver"

// GraphServerBytes predicts the resident memory of the graph server that holds the heaviest
// part of w in configuration c: the buffers of its rows, term by term as the README's "Memory
// of a graph server" lists them, and the graph, times unaccounted: what the terms leave out
// (gRPC's buffers, the garbage collector's headroom, evaluation's garbage).
//
// With layer widths w_0 … w_L (a GAT's hidden width is its heads' concatenation), H their sum
// but w_0 and A their sum but w_L; the part owns v vertices, holds g ghosts and e entries of Â;
// R epochs of P_l and dZ_l are kept — a GCN's 2 (its writers wait for the Gathers of the epoch
// they overwrite), a GAT's 2S+2 — and π = 2 epochs of Z_l (but the logits, w_L wide) and the
// kept activations when a GCN's backward pass overlaps the next forward pass (S ≥ 1), else 1:
// R and π as the graph server keeps them (graphserver.Slots and EpochsInFlight). A GraphSAGE
// keeps a GCN's buffers (its R and π) and beside them (runtime/graphserver, sage.go) S_l = H_l
// W_self of its owned rows in R epochs and in the evaluation pass, the W_self half of dZ_{l-1}
// (l ≥ 1) of every interval, and M and Mᵀ's values on Â's structure, 4 bytes an entry each.
func (w Workload) GraphServerBytes(c Config) float64 {
	p := w.Part(c.GraphServers)
	v, g, e := float64(p.Vertices), float64(p.Ghosts), float64(p.Entries)
	ws := w.widths()
	var H, A, widest float64
	for l, x := range ws {
		if l > 0 {
			H += float64(x)
			widest = max(widest, float64(x))
		}
		if l < len(ws)-1 {
			A += float64(x)
		}
	}
	heads := 0 // the graph server's Config.Heads: 0 trains a GCN
	if w.Model.Architecture == GAT {
		heads = max(w.Model.Heads, 1)
	}
	R, pi := float64(graphserver.Slots(c.Staleness, heads)), float64(graphserver.EpochsInFlight(c.Staleness, heads))
	out := float64(ws[len(ws)-1])
	features, nnz := 4*v*float64(w.Features), 0.0
	if w.FeatureEntries > 0 { // sparse: a column and a value per non-zero, and its activation's values
		nnz = float64(w.FeatureEntries) * v / float64(w.Vertices)
		features = 8*nnz + 8*v
		A += nnz/v - float64(w.Features)
	}
	acts := pi * v * A // activations kept for the backward pass
	if w.Model.Architecture != GAT {
		// Only drop(X) of sparse features is kept: ∇AV recomputes the others from Z_{l-1}, a
		// block of rows at a time (pkg/model), as AV computed them.
		acts = pi * nnz
	}
	// The backward exchange: a GCN pulls gradients (dZ_l's ghost rows, R epochs); a GAT pushes
	// them (the rows pushed here, each by one or two intervals, in R epochs, and its ghosts'
	// gradient rows).
	exchange := R * g
	if w.Model.Architecture == GAT {
		exchange = (R + 1) * min(float64(c.Intervals), 2) * g
	}
	b := 4 * (R*(v+g)*H + // P_l, owned and ghost rows
		R*v*H + // dZ_l, owned rows
		(pi*(H-out)+out+widest)*v + // Z_l (the logits' once) and dP_l (one layer's at a time)
		acts +
		(2*v+g)*H + // an evaluation pass
		exchange*H)
	b += features + 20*e // Â and its blocks: 8 to 24 bytes an entry; the mixed-epoch Gather's source of each entry, 2 bytes in each of two
	if w.Model.Architecture == SAGE {
		b += 4*((R+1)*v*H+v*(H-out)) + 8*e // S_l, R epochs and the evaluation's; dZ_{l-1}'s W_self half; M and Mᵀ
	}
	if w.Model.Architecture == GAT {
		for l := 1; l < len(ws); l++ {
			h := float64(w.headsOf(l))
			b += 4 * h * ((2*R+1)*e + R*(v+g)) // α̃ and its gradient per entry, s_src per row
		}
	}
	return unaccounted * b
}

// unaccounted is measured resident memory over the terms: graph server 3 of R-MAT 1M/20M
// (32 features, hidden 32, 16 classes) on 4 parts, S = 1, 4 intervals, 12 epochs, peaked at
// 1.56 GiB against 1.15 GiB of terms.
const unaccounted = 1.36
