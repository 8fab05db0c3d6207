package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func state(epoch int) State {
	return State{Epoch: epoch, Position: int64(10 * epoch), Seed: 7, RNG: []byte{1, 2, 3},
		Tensors: map[string][]float32{"w0": {1, 2, float32(epoch)}, "m0": make([]float32, 70000)}}
}

func TestSaveLatestKeep(t *testing.T) {
	d := Dir{Path: t.TempDir(), Keep: 2}
	if _, _, err := d.Latest(); !errors.Is(err, ErrNone) {
		t.Fatalf("empty folder: %v, want ErrNone", err)
	}
	for ep := 1; ep <= 4; ep++ {
		if err := d.Save(state(ep)); err != nil {
			t.Fatal(err)
		}
	}
	s, skipped, err := d.Latest()
	if err != nil || len(skipped) != 0 {
		t.Fatal(err, skipped)
	}
	want := state(4)
	if s.Epoch != 4 || s.Position != 40 || s.Seed != 7 || !slices.Equal(s.RNG, want.RNG) ||
		!slices.Equal(s.Tensors["w0"], want.Tensors["w0"]) || len(s.Tensors["m0"]) != 70000 {
		t.Errorf("restored %+v", s)
	}
	if eps, _ := d.manifests(); !slices.Equal(eps, []int{4, 3}) {
		t.Errorf("kept %v, want [4 3]", eps)
	}
	if _, err := os.Stat(filepath.Join(d.Path, name(1, ".bin"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pruned data file still there: %v", err)
	}
}

func TestLatestSkipsTornAndCorrupt(t *testing.T) {
	d := Dir{Path: t.TempDir()}
	for ep := 1; ep <= 3; ep++ {
		if err := d.Save(state(ep)); err != nil {
			t.Fatal(err)
		}
	}
	// epoch 3: one flipped byte; epoch 4: a data file whose manifest was never published.
	p := filepath.Join(d.Path, name(3, ".bin"))
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Path, name(4, ".bin")), b[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	s, skipped, err := d.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if s.Epoch != 2 || len(skipped) != 1 {
		t.Errorf("latest epoch %d, skipped %v; want epoch 2 with the corrupt epoch 3 skipped", s.Epoch, skipped)
	}
}
