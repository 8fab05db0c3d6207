//go:build amd64 && !purego

package tensor

import "golang.org/x/sys/cpu"

// Instruction-set levels of the kernels.
const (
	isaGo = iota
	isaAVX2
	isaAVX512
)

// bestISA is the widest kernel set this CPU and OS support.
var bestISA = func() int {
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL:
		return isaAVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return isaAVX2
	}
	return isaGo
}()

// kernelISA is the kernel set in use; tests and benchmarks lower it to compare implementations.
var kernelISA = bestISA

func isaName(i int) string {
	switch i {
	case isaAVX512:
		return "avx512"
	case isaAVX2:
		return "avx2"
	}
	return "go"
}
