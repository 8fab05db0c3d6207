//go:build amd64 && !purego

package tensor

// The AVX-512 element-wise kernels of elementwise_amd64.s; each has a portable twin in
// elementwise.go with identical results, except axpy, which fuses its multiply-add (one rounding).

//go:noescape
func reluAVX512(dst, src *float32, n int)

//go:noescape
func reluBackAVX512(grad, out *float32, n int)

//go:noescape
func addAVX512(dst, src *float32, n int)

//go:noescape
func axpyAVX512(dst, src *float32, n int, alpha float32)

//go:noescape
func scaleAVX512(dst *float32, n int, alpha float32)

//go:noescape
func adamAVX512(w, grad, m, v *float32, n int, c *[8]float32)

func vec512(n int) bool { return n > 0 && kernelISA == isaAVX512 }

func reluSlice(d, s []float32) {
	if vec512(len(s)) {
		_ = d[len(s)-1]
		reluAVX512(&d[0], &s[0], len(s))
		return
	}
	reluGo(d, s)
}

func reluBackSlice(g, o []float32) {
	if vec512(len(o)) {
		_ = g[len(o)-1]
		reluBackAVX512(&g[0], &o[0], len(o))
		return
	}
	reluBackGo(g, o)
}

func addSlice(d, s []float32) {
	if vec512(len(s)) {
		_ = d[len(s)-1]
		addAVX512(&d[0], &s[0], len(s))
		return
	}
	addGo(d, s)
}

func axpySlice(d, s []float32, a float32) {
	if vec512(len(s)) {
		_ = d[len(s)-1]
		axpyAVX512(&d[0], &s[0], len(s), a)
		return
	}
	axpy1(d, s, a)
}

func scaleSlice(d []float32, a float32) {
	if vec512(len(d)) {
		scaleAVX512(&d[0], len(d), a)
		return
	}
	scaleGo(d, a)
}

func adamSlice(w, g, m, v []float32, c *[8]float32) {
	if vec512(len(w)) {
		_, _, _ = g[len(w)-1], m[len(w)-1], v[len(w)-1]
		adamAVX512(&w[0], &g[0], &m[0], &v[0], len(w), c)
		return
	}
	adamGo(w, g, m, v, c)
}
