package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
)

// FuzzRead feeds Read, and Begin (which reads what names the current version: model.json or
// predict.json), a location holding a model card (or, with manifest, a prediction run's
// predict.json) and weights as anyone who may write there could have left them: the card as
// given or, when empty, the true card of the weights (their size and SHA-256 listed), so that
// the weights' decoding is reached. No input may make them panic; every refusal of Read names
// the file at fault; and a model Read accepts must write and read back the same.
func FuzzRead(f *testing.F) {
	weights, err := safetensors.Encode([]safetensors.Tensor{
		{Name: "layers.0.weight", Shape: []int{8, 5}, Data: make([]float32, 40)},
		{Name: "layers.1.weight", Shape: []int{5, 3}, Data: []float32{1, -2, 3, float32(math.Inf(1)), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
	}, nil)
	if err != nil {
		f.Fatal(err)
	}
	c := card()
	c.Format, c.Files = CardFormat, []File{fileOf(WeightsFile, weights)}
	good, err := json.Marshal(c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(weights, "", false)
	f.Add(weights, string(good), false)
	f.Add(weights[:40], "", false)
	f.Add(weights, strings.Replace(string(good), `"files"`, `"version":"v-x-1","files"`, 1), false)
	f.Add(weights, strings.Replace(string(good), `"files"`, `"version":"../..","files"`, 1), false)
	f.Add([]byte("{}"), `{"format":"dorylus-model/1"}`, false)
	f.Add(weights, `{"version":"v-run-7","files":[{"name":"predictions.npy"}]}`, true)
	f.Fuzz(func(t *testing.T, weights []byte, cardJSON string, manifest bool) {
		if len(weights) > 1<<20 {
			return
		}
		dir := t.TempDir()
		cb := []byte(cardJSON)
		if len(cb) == 0 {
			c := card()
			c.Format, c.Files = CardFormat, []File{fileOf(WeightsFile, weights)}
			if cb, err = json.Marshal(c); err != nil {
				t.Fatal(err)
			}
		}
		top := CardFile
		if manifest {
			top = ManifestFile
		}
		for n, data := range map[string][]byte{WeightsFile: weights, top: cb} {
			if err := os.WriteFile(filepath.Join(dir, n), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		st := checkpoint.Dir(dir)
		for _, overwrite := range []bool{false, true} {
			_, _ = Begin(ctx, st, "run", overwrite) // refusing is its right; panicking is not
		}
		m, err := Read(ctx, st)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, CardFile) && !strings.Contains(msg, WeightsFile) {
				t.Fatalf("Read: %v: names neither %s nor %s", err, CardFile, WeightsFile)
			}
			return
		}
		b, err := safetensors.Encode(m.Tensors, nil)
		if err != nil {
			t.Fatalf("encode what Read accepted: %v", err)
		}
		again := checkpoint.Dir(filepath.Join(t.TempDir(), "again"))
		w := &Writer{Store: again}
		if err := w.Put(ctx, WeightsFile, b); err != nil {
			t.Fatal(err)
		}
		if err := w.PutCard(ctx, m.Card); err != nil {
			t.Fatalf("PutCard of the card Read accepted: %v", err)
		}
		back, err := Read(ctx, again)
		if err != nil {
			t.Fatalf("Read of what was written again: %v", err)
		}
		if !sameTensors(m.Tensors, back.Tensors) || back.Card.Architecture != m.Card.Architecture || back.Card.Layers != m.Card.Layers ||
			back.Card.Hidden != m.Card.Hidden || back.Card.Classes != m.Card.Classes {
			t.Fatalf("read %+v, then %+v", m, back)
		}
	})
}

// fileOf lists data as the named file.
func fileOf(name string, data []byte) File {
	sum := sha256.Sum256(data)
	return File{Name: name, Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}

// sameTensors compares tensors by name, shape and bits.
func sameTensors(a, b []safetensors.Tensor) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || len(a[i].Shape) != len(b[i].Shape) || len(a[i].Data) != len(b[i].Data) {
			return false
		}
		for j := range a[i].Shape {
			if a[i].Shape[j] != b[i].Shape[j] {
				return false
			}
		}
		for j := range a[i].Data {
			if math.Float32bits(a[i].Data[j]) != math.Float32bits(b[i].Data[j]) {
				return false
			}
		}
	}
	return true
}
