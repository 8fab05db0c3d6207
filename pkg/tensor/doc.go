// Package tensor holds the float32 data types and kernels of the training engine: row-major dense
// blocks, CSR sparse matrices, SpMM (the Gather kernel), GEMM through gonum's blas32, activations,
// dropout and the masked softmax cross-entropy loss.
//
// Kernels write into caller-provided buffers and never allocate inside their loops; the parallel
// ones split work into contiguous row ranges over a pool sized by SetThreads (GOMAXPROCS by
// default).
package tensor
