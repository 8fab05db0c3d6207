//go:build !amd64 || purego

package tensor

func spmmRange(dst []float32, ldd int, a *CSR, b *Dense, lo, hi int) {
	spmmRowsGo(dst, ldd, a, b, lo, hi)
}

func spmmTransBlock(dst *Dense, a *CSR, b *Dense, lo, hi int) { spmmTransBlockGo(dst, a, b, lo, hi) }
