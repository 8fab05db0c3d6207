package jobconfig

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds arbitrary bytes to the run-config parser, which a pod reads from its ConfigMap
// or a file: it must never panic, and a config it accepts must be valid and survive Marshal and
// Parse unchanged.
func FuzzParse(f *testing.F) {
	valid := validConfig()
	valid.Checkpoint = &Checkpoint{IntervalEpochs: 10, Path: "/data/checkpoint/run1"}
	seed, err := Marshal(valid)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{}{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
		again, err := Marshal(cfg)
		if err != nil {
			t.Fatalf("Marshal of a parsed config: %v", err)
		}
		back, err := Parse(again)
		if err != nil {
			t.Fatalf("Parse of a marshalled config: %v", err)
		}
		if diff := cmp.Diff(cfg, back); diff != "" {
			t.Fatalf("Marshal/Parse round trip (-first +second):\n%s", diff)
		}
	})
}
