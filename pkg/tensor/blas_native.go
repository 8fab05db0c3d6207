//go:build !openblas

package tensor

// gemmDefault is the GEMM behind MatMul: the native one in this build.
var gemmDefault = gemmNative

func setBLASThreads(int) {}

// MatMulImpl names the GEMM behind MatMul.
func MatMulImpl() string {
	if pickKernels(128) == nil {
		return "gonum"
	}
	return "native-" + isaName(kernelISA)
}
