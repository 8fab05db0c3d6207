// Package hostile is what the fuzz targets of the data plane share to check that hostile input
// costs memory only in proportion to its own size: a bound on the heap bytes a call allocates.
package hostile

import (
	"runtime/metrics"
	"testing"
)

const allocs = "/gc/heap/allocs:bytes"

// Allocated returns the heap bytes the process allocated while f ran, in every goroutine (so a
// server's handler goroutines count too).
func Allocated(f func()) uint64 {
	s := []metrics.Sample{{Name: allocs}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// Budget is the bytes an input of n bytes may make the code under test allocate: Fixed, plus
// PerByte·n, plus Quadratic·n² for a computation whose output is the product of two of its
// inputs (an interval's rows times a weight's columns).
type Budget struct {
	Fixed, PerByte, Quadratic uint64
}

// Check runs f and fails t when it allocated more than b allows for an input of n bytes: an
// allocation sized by a number the input declares rather than by its bytes. Allocated counts
// every goroutine, and a fuzzing engine allocates beside the target, so an run over the budget
// is measured twice more and only the least of the three counts: f must do the same work each
// time it runs (start from a fresh state).
func (b Budget) Check(t testing.TB, n int, what string, f func()) {
	t.Helper()
	limit := b.Fixed + b.PerByte*uint64(n) + b.Quadratic*uint64(n)*uint64(n)
	least := Allocated(f)
	for try := 1; try < 3 && least > limit; try++ {
		least = min(least, Allocated(f))
	}
	if least > limit {
		t.Fatalf("%s: allocated %d bytes for %d bytes of input, over the budget of %d", what, least, n, limit)
	}
}
