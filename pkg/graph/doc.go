// Package graph holds the graph side of the training data: a Dataset (a symmetric CSR
// adjacency with int32 indices, node features, labels and a train/val/test split), its loaders,
// the GCN normalisation, and the synthetic R-MAT generator.
//
// # Sources
//
// Load resolves a spec: the embedded Cora, the other shipped datasets by name, a plain-text
// dataset directory (datasets/FORMAT.md, read by LoadText), a prepared binary file or directory
// (ReadPrepared), a directory in OGB's node-property-prediction layout (LoadOGB), NumPy arrays
// with PyG's names (LoadNumPy: a directory of .npy files or a .npz), or an "rmat:" spec (RMAT);
// DetectFormat tells the layouts of a path apart, and LoadOptions.Format insists on one. The
// OGB and NumPy edge lists are made symmetric (Meta.Conversion says how). Every loader returns
// a Dataset that passes Validate; malformed text is reported as a *ParseError naming the file,
// line and column, a bad NumPy array as an *ArrayError naming the file, array and index, a bad
// prepared file with an error naming the file and the section. Datasets without features (PubMed) load only with
// LoadOptions.AllowMissingFeatures; training calls Dataset.RequireFeatures.
//
// # Prepared format, version 1
//
// A prepared file holds one Dataset ready to be used without parsing. All integers are
// little-endian. It starts with a 64-byte header:
//
//	offset size  field
//	 0      8    magic "DORYGRPH"
//	 8      4    format version (1)
//	12      4    number of sections S
//	16      8    file size in bytes (a shorter file is truncated)
//	24      4    partition index p
//	28      4    partition count P (a whole-graph file: p = 0, P = 1)
//	32      8    nodes N (rows of the adjacency held by this file)
//	40      8    adjacency entries (directed edges)
//	48      4    feature columns F (0: no features)
//	52      4    classes
//	56      4    flags (0; a reader refuses flags it does not know)
//	60      4    CRC-32C (Castagnoli) of bytes 0..59 followed by the section table
//
// then the section table, S entries of 32 bytes:
//
//	 0      4    kind
//	 4      4    element size in bytes (1, 4 or 8)
//	 8      8    offset of the section from the start of the file, a multiple of 64
//	16      8    length in bytes
//	24      4    CRC-32C of the section's bytes
//	28      4    reserved (0)
//
// Sections follow, each starting at a 64-byte boundary (zero padding between), in any order and
// never overlapping. Version 1 defines these kinds, each at most once:
//
//	 1 meta         the Meta as JSON (meta.json's fields)
//	 2 adj_rowptr   int64 × (N+1)    adjacency row offsets
//	 3 adj_colidx   int32 × entries  adjacency column indices
//	 4 feat_rowptr  int64 × (N+1)    sparse features: row offsets
//	 5 feat_colidx  int32            sparse features: column indices
//	 6 feat_val     float32          sparse features: values (absent: all ones)
//	 7 feat_dense   float32 × N·F    dense features, row-major
//	 8 labels       int32 × N        class per node, -1 unlabelled
//	 9 train        int32            sorted node ids
//	10 val          int32            sorted node ids
//	11 test         int32            sorted node ids
//
// Sections 1-3 and 8-11 are required; features are either 4-5 (and optionally 6) or 7, or
// absent. The reader reads each section into a typed slice with no per-element decoding (on a
// big-endian host it swaps bytes), verifies every checksum, and runs Dataset.Validate.
//
// Extending the format: a reader skips section kinds it does not know after checking their
// checksum, so a writer may add sections (for example per-partition maps of local to global
// vertex ids and ghost-vertex lists) without a version change; a change to the meaning of an
// existing field or section bumps the version. A partitioned dataset is a directory holding one
// file per partition, each with the header's p and P set, the adjacency rows of its own vertices
// in sections 2-3 and the extra sections describing the mapping; a whole-graph dataset is a
// directory holding PreparedFileName (or that file alone). This version's reader accepts only
// whole-graph files (p = 0, P = 1).
//
// # R-MAT
//
// RMAT follows the PyTorch reference's rmat_edges: recursive quadrant choice with
// (0.57, 0.19, 0.19, 0.05), rejection of out-of-range pairs and self loops, deduplicated
// undirected pairs trimmed to exactly E/2 by a seeded random subset, permuted node ids. The
// output depends only on the parameters and the seed, not on the number of threads.
package graph
