package checkpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad feeds Load a checkpoint's data object and its manifest as a folder holds them,
// written by anyone who may write there: the manifest as given or, when empty, the true one of
// the object (its size and checksum), so that the object's decoding is reached. No input may
// make it panic or allocate beyond the object's size; every refusal must be corrupt
// (IsCorrupt, so that Latest falls back to an older checkpoint instead of failing the run);
// and what it accepts must save and load back the same.
func FuzzLoad(f *testing.F) {
	good, err := encode(state(3))
	if err != nil {
		f.Fatal(err)
	}
	small, err := encode(State{Run: "r", Epoch: 1, Tensors: map[string][]float32{"w": {float32(math.NaN()), -0}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[:200], "")
	f.Add(small, "")
	f.Add(small, `{"epoch":3,"file":"ckpt-00000003.bin","size":1,"crc32c":0}`)
	f.Add(small, `{"epoch":3,"file":"../ckpt-00000003.bin"}`)
	f.Add(small, `{"epoch":3,"file":"ckpt-\u0000"}`)
	f.Add([]byte{8, 0, 0, 0, '{', '}'}, "")
	f.Add([]byte{255, 255, 255, 255}, "")
	f.Fuzz(func(t *testing.T, object []byte, manifestJSON string) {
		if len(object) > 1<<20 {
			return
		}
		dir := t.TempDir()
		m := []byte(manifestJSON)
		if len(m) == 0 {
			var err error
			m, err = json.Marshal(manifest{Epoch: 3, File: name(3, ".bin"), Size: int64(len(object)), CRC32C: crc32.Checksum(object, castagnoli)})
			if err != nil {
				t.Fatal(err)
			}
		}
		for n, data := range map[string][]byte{name(3, ".bin"): object, name(3, ".json"): m} {
			if err := os.WriteFile(filepath.Join(dir, n), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		s, err := Checkpoints{Store: Dir(dir)}.Load(ctx, 3)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("Load: %v: not corrupt (IsCorrupt false), so a run would fail instead of resuming from an older checkpoint", err)
			}
			return
		}
		again := Checkpoints{Store: Dir(filepath.Join(dir, "again"))}
		if s.Epoch < 0 {
			return // Save refuses it; a manifest of epoch 3 named it
		}
		if err := again.Save(ctx, s); err != nil {
			t.Fatalf("Save of what Load accepted: %v", err)
		}
		back, err := again.Load(ctx, s.Epoch)
		if err != nil {
			t.Fatalf("Load of what Save wrote: %v", err)
		}
		if !sameState(s, back) {
			t.Fatalf("loaded %+v, then %+v", s, back)
		}
	})
}

// sameState compares two states, tensors bit by bit.
func sameState(a, b State) bool {
	if a.Run != b.Run || a.Epoch != b.Epoch || a.Position != b.Position || a.Seed != b.Seed || !bytes.Equal(a.RNG, b.RNG) || len(a.Tensors) != len(b.Tensors) {
		return false
	}
	for n, x := range a.Tensors {
		y, ok := b.Tensors[n]
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
	}
	return true
}
