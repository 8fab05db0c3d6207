//go:build race

package rpc

// raceEnabled is set under the race detector, whose sync.Pool drops a quarter of what is put
// back, so that a pooled buffer is sometimes allocated anew.
const raceEnabled = true
