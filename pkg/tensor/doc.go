// Package tensor holds the float32 data types and kernels of the training engine: row-major dense
// blocks (Dense), CSR sparse matrices (CSR), SpMM (the Gather kernel), GEMM (MatMul), activations,
// dropout and the masked softmax cross-entropy loss, and vertex orderings that make SpMM faster.
//
// # Buffers and threads
//
// Kernels write into caller-provided buffers and do not allocate on their hot paths. The parallel
// ones split their work into contiguous row ranges over a persistent pool sized by SetThreads
// (GOMAXPROCS by default); chunks are claimed dynamically, so uneven rows (skewed graphs) and
// threads taken by other work balance out. Any goroutine may call any kernel at any time,
// including from inside ParallelFor: a call hands chunks only to idle pool threads and runs the
// rest itself.
//
// # Errors
//
// Kernels panic with an error wrapping ErrShape when their arguments' shapes disagree, which is a
// programmer error. Code holding shapes from outside (a request, a file) validates them first with
// the Check functions (CheckSpMM, CheckMatMul, CheckLabels, CheckSameShape), which return that
// error instead.
//
// # Implementations
//
// On amd64 the SpMM and GEMM kernels are Go assembly (internal/asmgen generates it): AVX-512 where
// the CPU and OS support it, AVX2+FMA otherwise, portable Go on other CPUs, other architectures
// and under the purego build tag. MatMul runs this package's blocked GEMM by default; built with
// the openblas tag (cgo, Debian's libopenblas-dev) it calls cblas_sgemm instead. OpenBLAS 0.3.21
// does not recognise CPUs newer than it and falls back to its slowest kernels on them: set
// OPENBLAS_CORETYPE (SkylakeX, Cooperlake or Haswell) there; MatMulImpl names what is in use.
//
// Dense blocks of 4 MiB and more ask for transparent huge pages on Linux (AdviseHugePages):
// SpMM gathers rows of its dense operand at random, and 2 MiB pages cut its TLB misses.
package tensor
