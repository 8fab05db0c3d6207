//go:build !amd64 || purego

package tensor

// pickKernels returns nil: there are no assembly micro-kernels on this platform.
func pickKernels(n int) *kernelSet { return nil }
