//go:build race

package harness_test

// raceEnabled is set when the tests run under the race detector, which slows training tenfold.
const raceEnabled = true
