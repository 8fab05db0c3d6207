//go:build !amd64 || purego

package tensor

func pickKernels(n int) *kernelSet { return &goKernels }
