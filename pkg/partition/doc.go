// Package partition cuts a graph into the parts its graph servers hold (DESIGN.md sections 1
// and 4): an edge-cut into P parts balanced by edges, the ghost (mirror) vertices each part
// needs, the local Â block a graph server gathers with, the send lists of the Scatter, and the
// cut of each part's rows into intervals.
//
// # Plans
//
// A Plan gives every part a contiguous range of vertex ids, possibly after renumbering the
// graph (Plan.Perm). Contiguous is the default: a streaming cut of the rows into ranges of
// equal weight (adjacency entries + rows), computed from the row offsets alone, so a prepared
// file is partitioned without loading its adjacency (WritePrepared). Refine improves a plan by
// size-constrained label propagation: vertices move to the part most of their neighbours are
// in while every part stays within a balance bound; it needs the adjacency in memory and
// renumbers the vertices so that each part is again a range. Dropout masks are keyed by vertex
// id, so a refined run draws other masks than a single-process run of the original numbering.
//
// # Files
//
// WriteDataset and WritePrepared write one prepared file per part (graph.PartitionData, named
// by graph.PartitionFileName), so that each graph server reads only its own.
//
// # Local view
//
// Build turns one part's file into a Part: owned rows are local rows 0..Owned-1 (global ids
// Lo..Lo+Owned-1), ghosts are local columns Owned.. in ascending global id, which groups them by
// owner. Part.Adj holds Â = D̃^-1/2 (A+I) D̃^-1/2 on the owned rows with values from the global
// degrees, exactly as graph.NormalizedAdjacency computes them for the whole graph. Because the
// graph is symmetric, the owned rows partition q holds as ghosts (SendTo[q]) are exactly the
// ghosts this part holds of q, in the same order; each side derives its half alone. Part.Cut
// splits the owned rows into intervals and precomputes, per interval, what its Scatter sends
// to each peer and the transposed ghost block its backward Gather pushes to their owners.
package partition
