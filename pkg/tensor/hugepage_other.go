//go:build !linux

package tensor

// AdviseHugePages asks for transparent huge pages on Linux; elsewhere it does nothing.
func AdviseHugePages(data []float32) {}
