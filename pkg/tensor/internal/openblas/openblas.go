//go:build openblas

// Package openblas binds the one OpenBLAS routine package tensor uses, cblas_sgemm, through cgo
// (Debian's libopenblas-dev). It is a package of its own because Go does not allow cgo and Go
// assembly in one package.
package openblas

/*
#cgo LDFLAGS: -lopenblas
#include <cblas.h>
*/
import "C"

import "unsafe"

// CoreName returns the name of the kernel set OpenBLAS picked for this CPU (OPENBLAS_CORETYPE
// overrides it).
func CoreName() string { return C.GoString(C.openblas_get_corename()) }

// SetThreads sets the size of OpenBLAS's own thread pool.
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major float32 matrices (strides in floats).
// The slices must be non-empty and large enough for their shapes; m, n, k must be positive.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := uint32(C.CblasNoTrans), uint32(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	C.cblas_sgemm(C.CblasRowMajor, C.enum_CBLAS_TRANSPOSE(ta), C.enum_CBLAS_TRANSPOSE(tb), C.blasint(m), C.blasint(n), C.blasint(k),
		C.float(alpha), (*C.float)(unsafe.Pointer(&a[0])), C.blasint(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.blasint(ldb), C.float(beta),
		(*C.float)(unsafe.Pointer(&c[0])), C.blasint(ldc))
}
