//go:build openblas

package tensor

import "github.com/dorylus-gnn/dorylus/pkg/tensor/internal/openblas"

// gemmDefault is the GEMM behind MatMul: OpenBLAS's cblas_sgemm in this build.
var gemmDefault = gemmOpenBLAS

func init() { setBLASThreads(Threads()) }

func setBLASThreads(n int) { openblas.SetThreads(n) }

// MatMulImpl names the GEMM behind MatMul, with the kernel set OpenBLAS chose.
func MatMulImpl() string { return "openblas-" + openblas.CoreName() }

// MatMulOpenBLAS is MatMul through OpenBLAS's cblas_sgemm (the openblas build only).
func MatMulOpenBLAS(dst, a *Dense, transA bool, b *Dense, transB bool, alpha, beta float32) {
	must(CheckMatMul(dst, a, transA, b, transB))
	m, n, k := dst.Rows, dst.Cols, a.Cols
	if transA {
		k = a.Rows
	}
	gemmOpenBLAS(transA, transB, m, n, k, alpha, a.Data, a.Cols, b.Data, b.Cols, beta, dst.Data, dst.Cols)
}

func gemmOpenBLAS(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || alpha == 0 {
		scaleC(c, m, n, ldc, beta)
		return
	}
	openblas.Sgemm(transA, transB, m, n, k, alpha, a, max(lda, 1), b, max(ldb, 1), beta, c, max(ldc, 1))
}
