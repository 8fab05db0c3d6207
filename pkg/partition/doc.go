// Package partition cuts a graph into the parts its graph servers hold: an edge-cut into P parts
// balanced by edges, the ghost (mirror) vertices each part needs, the local Â block a graph
// server gathers with, the send lists of the Scatter, and the cut of each part's rows into
// intervals.
//
// # Plans
//
// A Plan gives every part a contiguous range of vertex ids, possibly after renumbering the
// graph (Plan.Perm). New computes one by a Method; Default (DefaultMethod) is what every caller
// that does not choose uses. Multilevel, the default, cuts as METIS's k-way partitioner does:
// coarsening by heavy-edge matching, recursive (multilevel) bisection of the coarsest graph,
// greedy and Fiduccia–Mattheyses boundary refinement while projecting back, the small levels
// cut several times and the best kept; vertices weigh 1 + degree, so parts are balanced by edges +
// vertices within Options.Imbalance (5%). It is deterministic for a seed and renumbers the
// vertices part by part. Contiguous cuts the rows into ranges of equal weight (adjacency
// entries + rows) from the row offsets alone. Refine improves a plan by size-constrained label
// propagation. Every partition file keeps the original id of each of its vertices
// (graph.PartitionData.OrigIDs and GhostOrigIDs, Part.OriginalIDs), and dropout masks are keyed by it, so a
// renumbered run draws the masks of a single-process run of the original numbering.
//
// # Files
//
// WriteDataset and WritePrepared write one prepared file per part (graph.PartitionData, named
// by graph.PartitionFileName), so that each graph server reads only its own; from a prepared
// file they stream (ReadAdjacency holds only the adjacency, 4 bytes an entry, which the
// multilevel cut releases while it coarsens; each part's rows are read back per part). Beside the files
// they write a Manifest (ManifestFileName): the dataset, the method, the bounds, the cut's
// quality and every file's size and header checksum, so that a launcher checks a directory by
// reading the manifest and the files' headers (Manifest.CheckHeaders) and a graph server the one
// file it reads (Manifest.CheckPart). CheckFiles reads every file and refuses a set that is not
// one partitioning of one dataset.
// Cut writes them from a dataset in any layout, through a prepared copy of one that is not a
// prepared file, and HasFiles says whether a folder holds such files.
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
