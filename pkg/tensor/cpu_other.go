//go:build !amd64 || purego

package tensor

const (
	isaGo = iota
	isaAVX2
	isaAVX512
)

var bestISA = isaGo

var kernelISA = bestISA

func isaName(int) string { return "go" }
