//go:build amd64 && !purego

package tensor

// The GEMM micro-kernels of gemm_amd64.s (see internal/asmgen for their contract).

//go:noescape
func gemmAVX512N6x4(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX512T6x4(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX512N12x2(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX512T12x2(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX512N24x1(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX512T24x1(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX2N6x2(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX2T6x2(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX2N12x1(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

//go:noescape
func gemmAVX2T12x1(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr)

var (
	k512x64 = kernelSet{mr: 6, nr: 64, n: gemmAVX512N6x4, t: gemmAVX512T6x4}
	k512x32 = kernelSet{mr: 12, nr: 32, n: gemmAVX512N12x2, t: gemmAVX512T12x2}
	k512x16 = kernelSet{mr: 24, nr: 16, n: gemmAVX512N24x1, t: gemmAVX512T24x1}
	k256x16 = kernelSet{mr: 6, nr: 16, n: gemmAVX2N6x2, t: gemmAVX2T6x2}
	k256x8  = kernelSet{mr: 12, nr: 8, n: gemmAVX2N12x1, t: gemmAVX2T12x1}
)

// pickKernels chooses the micro-kernel whose width wastes least on n columns.
func pickKernels(n int) *kernelSet {
	switch kernelISA {
	case isaAVX512:
		switch {
		case n <= 16:
			return &k512x16
		case n <= 32:
			return &k512x32
		}
		return &k512x64
	case isaAVX2:
		if n <= 8 {
			return &k256x8
		}
		return &k256x16
	}
	return nil
}
