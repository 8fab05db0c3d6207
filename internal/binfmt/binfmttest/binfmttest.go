// Package binfmttest fuzzes the decoders of the array file formats the same way.
package binfmttest

import (
	"errors"
	"testing"
)

// FuzzRoundTrip fuzzes decode: no input may make it panic, every error must wrap sentinel, and
// whatever it accepts must encode again (reencode) to bytes that decode to an equal value (same).
func FuzzRoundTrip[T any](f *testing.F, seeds [][]byte, sentinel error, decode func([]byte) (T, error), reencode func(T) ([]byte, error), same func(a, b T) bool) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decode(b)
		if err != nil {
			if !errors.Is(err, sentinel) {
				t.Fatalf("error %v does not wrap %v", err, sentinel)
			}
			return
		}
		again, err := reencode(v)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		back, err := decode(again)
		if err != nil {
			t.Fatalf("decode the re-encoded file: %v", err)
		}
		if !same(v, back) {
			t.Fatalf("decoded %v, then %v", v, back)
		}
	})
}
