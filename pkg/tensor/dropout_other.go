//go:build !amd64 || purego

package tensor

func dropoutRow(dst, src []float32, seed uint64, thr uint32, scale float32) {
	dropoutRowGo(dst, src, seed, thr, scale)
}

func dropoutCSRRow(dst, src []float32, cols []int32, seed uint64, thr uint32, scale float32) {
	dropoutCSRRowGo(dst, src, cols, seed, thr, scale)
}
