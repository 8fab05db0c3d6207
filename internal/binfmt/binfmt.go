// Package binfmt holds what the array file formats (pkg/safetensors, pkg/npy) share: checking a
// shape read from an untrusted header before anything is allocated for it.
package binfmt

import (
	"fmt"
	"math"
)

// Elements returns the number of elements of shape, or an error when a dimension is negative or
// the size in bytes of elemSize-byte elements would overflow an int64.
func Elements(shape []int, elemSize int64) (int64, error) {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && n > math.MaxInt64/elemSize/int64(d) {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= int64(d)
	}
	return n, nil
}
