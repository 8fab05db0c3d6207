package tensor

import "unsafe"

// The portable micro-kernels: a 4×4 register block in plain Go, used where no assembly kernel
// applies (other architectures, the purego tag, CPUs without AVX2 and FMA).

var goKernels = kernelSet{mr: 4, nr: 4, n: goKernN, t: goKernT}

func goKernN(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr) {
	lda := int(stride / 4)
	as := unsafe.Slice(a, 3*lda+kc)
	goKern(kc, as, lda, 1, b, c, ldc, alpha, beta, loadC)
}

func goKernT(kc int, a *float32, stride uintptr, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr) {
	lda := int(stride / 4)
	as := unsafe.Slice(a, (kc-1)*lda+4)
	goKern(kc, as, 1, lda, b, c, ldc, alpha, beta, loadC)
}

func goKern(kc int, a []float32, rs, cs int, b *float32, c *float32, ldc uintptr, alpha, beta float32, loadC uintptr) {
	bs := unsafe.Slice(b, 4*kc)
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
	for p := 0; p < kc; p++ {
		bb := bs[4*p : 4*p+4 : 4*p+4]
		b0, b1, b2, b3 := bb[0], bb[1], bb[2], bb[3]
		o := p * cs
		a0, a1, a2, a3 := a[o], a[o+rs], a[o+2*rs], a[o+3*rs]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	l := int(ldc / 4)
	cs4 := unsafe.Slice(c, 3*l+4)
	acc := [16]float32{c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33}
	for i := 0; i < 4; i++ {
		row := cs4[i*l : i*l+4 : i*l+4]
		for j := 0; j < 4; j++ {
			v := alpha * acc[4*i+j]
			if loadC != 0 {
				v += beta * row[j]
			}
			row[j] = v
		}
	}
}
