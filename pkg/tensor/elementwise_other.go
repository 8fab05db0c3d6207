//go:build !amd64 || purego

package tensor

func reluSlice(d, s []float32)                      { reluGo(d, s) }
func reluBackSlice(g, o []float32)                  { reluBackGo(g, o) }
func addSlice(d, s []float32)                       { addGo(d, s) }
func axpySlice(d, s []float32, a float32)           { axpy1(d, s, a) }
func scaleSlice(d []float32, a float32)             { scaleGo(d, a) }
func adamSlice(w, g, m, v []float32, c *[8]float32) { adamGo(w, g, m, v, c) }
