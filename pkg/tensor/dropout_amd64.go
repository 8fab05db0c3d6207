//go:build amd64 && !purego

package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func dropoutRowAVX512(dst, src *float32, n int, seed uint64, thr uint64, scale float32, consts *uint64)

//go:noescape
func dropoutCSRRowAVX512(dst, src *float32, cols *int32, n int, seed uint64, thr uint64, scale float32, consts *uint64)

//go:noescape
func dropoutPatternRowAVX512(dst *float32, cols *int32, n int, seed uint64, thr uint64, scale float32, consts *uint64)

// dropoutConsts are the constants of dropoutRowAVX512: γ·1..γ·8, γ·8, the finalizer's multipliers.
var dropoutConsts = func() (c [11]uint64) {
	g := uint64(golden)
	for i := range 8 {
		c[i] = uint64(i+1) * g
	}
	c[8], c[9], c[10] = 8*g, mixMul1, mixMul2
	return c
}()

// csrDropoutConsts are the constants of the sparse-row kernels: γ, the finalizer's multipliers.
var csrDropoutConsts = [3]uint64{golden, mixMul1, mixMul2}

// hasDropoutAVX512 reports whether the CPU has the 64-bit multiplies (DQ) and word compares (BW)
// of the vector dropout kernel.
var hasDropoutAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512BW

// dropoutRow applies the mask of row seed to src into dst (thr < 65536).
func dropoutRow(dst, src []float32, seed uint64, thr uint32, scale float32) {
	if kernelISA == isaAVX512 && hasDropoutAVX512 && len(src) > 0 {
		_ = dst[len(src)-1]
		dropoutRowAVX512(&dst[0], &src[0], len(src), seed, uint64(thr), scale, &dropoutConsts[0])
		return
	}
	dropoutRowGo(dst, src, seed, thr, scale)
}

// dropoutCSRRow applies the mask of row seed to the values src (nil: a pattern row, each 1) of
// the entries in columns cols into dst (thr < 65536).
func dropoutCSRRow(dst, src []float32, cols []int32, seed uint64, thr uint32, scale float32) {
	if kernelISA != isaAVX512 || !hasDropoutAVX512 || len(cols) == 0 {
		dropoutCSRRowGo(dst, src, cols, seed, thr, scale)
		return
	}
	_ = dst[len(cols)-1]
	if src == nil {
		dropoutPatternRowAVX512(&dst[0], &cols[0], len(cols), seed, uint64(thr), scale, &csrDropoutConsts[0])
		return
	}
	_ = src[len(cols)-1]
	dropoutCSRRowAVX512(&dst[0], &src[0], &cols[0], len(cols), seed, uint64(thr), scale, &csrDropoutConsts[0])
}
