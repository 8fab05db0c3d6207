// Package hostile is what the fuzz targets of the data plane share: a bound on the heap bytes a
// call allocates, to check that hostile input costs memory only in proportion to its own size,
// and the encoding of fuzzed scripts of RPCs.
package hostile

import (
	"encoding/binary"
	"runtime/metrics"
	"testing"

	"google.golang.org/protobuf/proto"
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

// Call is one call of a fuzzed script of RPCs: a method's number and its request.
type Call struct {
	Method byte
	Msg    proto.Message
}

// Script encodes calls as a fuzz input: per call, the method, the message's length (2 bytes,
// little-endian) and the message.
func Script(calls ...Call) []byte {
	var b []byte
	for _, c := range calls {
		m, err := proto.Marshal(c.Msg)
		if err != nil {
			panic(err) // a seed the test wrote
		}
		b = append(b, c.Method)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	return b
}

// Parse decodes at most limit calls of a script; request(m) returns an empty request of
// method m, which is the call's first byte modulo methods. A call whose message does not
// unmarshal is dropped.
func Parse(b []byte, limit int, methods byte, request func(method byte) proto.Message) []Call {
	var out []Call
	for len(b) >= 3 && len(out) < limit {
		method, n := b[0]%methods, int(binary.LittleEndian.Uint16(b[1:]))
		b = b[3:]
		n = min(n, len(b))
		raw := b[:n]
		b = b[n:]
		msg := request(method)
		if proto.Unmarshal(raw, msg) == nil {
			out = append(out, Call{Method: method, Msg: msg})
		}
	}
	return out
}
