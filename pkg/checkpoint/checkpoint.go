// Package checkpoint saves and restores training state — named float32 tensors (weights and
// optimizer moments), the epoch, the pipeline position and the RNG seed/state — in a folder.
//
// A checkpoint is two files: the data file ckpt-EEEEEEEE.bin, written under a temporary name,
// synced and renamed, and then its manifest ckpt-EEEEEEEE.json holding the data file's size and
// CRC-32C. The manifest is published last, so a checkpoint without one (a crash mid-write) is
// ignored, and the last good checkpoint is never replaced by an incomplete one. Latest verifies
// the checksum and skips torn or corrupt checkpoints. Save keeps the newest Keep checkpoints.
package checkpoint

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ErrNone reports a folder without a complete, valid checkpoint.
var ErrNone = errors.New("checkpoint: no complete checkpoint")

// State is what a checkpoint holds.
type State struct {
	Epoch    int                  // epochs completed
	Position int64                // pipeline position (e.g. the weight version)
	Seed     uint64               // RNG seed
	RNG      []byte               // RNG state, opaque
	Tensors  map[string][]float32 // weights and optimizer state by name
}

// Dir is a folder of checkpoints.
type Dir struct {
	Path string // the folder
	Keep int    // checkpoints kept by Save; ≤ 0 keeps all
}

// manifest is the published record of one complete data file.
type manifest struct {
	Epoch  int    `json:"epoch"`
	File   string `json:"file"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// header precedes the raw tensors in a data file.
type header struct {
	Epoch    int      `json:"epoch"`
	Position int64    `json:"position"`
	Seed     uint64   `json:"seed"`
	RNG      []byte   `json:"rng,omitempty"`
	Names    []string `json:"names"`
	Lens     []int    `json:"lens"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func name(epoch int, ext string) string { return fmt.Sprintf("ckpt-%08d%s", epoch, ext) }

// Save writes s as the checkpoint of s.Epoch, then deletes all but the newest Keep.
func (d Dir) Save(s State) error {
	if s.Epoch < 0 {
		return fmt.Errorf("checkpoint: %s: negative epoch %d", d.Path, s.Epoch)
	}
	if err := os.MkdirAll(d.Path, 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	h := header{Epoch: s.Epoch, Position: s.Position, Seed: s.Seed, RNG: s.RNG}
	for n := range s.Tensors {
		h.Names = append(h.Names, n)
	}
	sort.Strings(h.Names)
	for _, n := range h.Names {
		h.Lens = append(h.Lens, len(s.Tensors[n]))
	}
	data := name(s.Epoch, ".bin")
	size, sum, err := d.publish(data, func(w io.Writer) error {
		hb, err := json.Marshal(h)
		if err != nil {
			return err
		}
		if err := binary.Write(w, binary.LittleEndian, uint32(len(hb))); err != nil {
			return err
		}
		if _, err := w.Write(hb); err != nil {
			return err
		}
		buf := make([]byte, 0, 1<<16)
		for _, n := range h.Names {
			for _, v := range s.Tensors[n] {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				if len(buf) == cap(buf) {
					if _, err := w.Write(buf); err != nil {
						return err
					}
					buf = buf[:0]
				}
			}
		}
		_, err = w.Write(buf)
		return err
	})
	if err != nil {
		return err
	}
	m, err := json.Marshal(manifest{Epoch: s.Epoch, File: data, Size: size, CRC32C: sum})
	if err != nil {
		return err
	}
	if _, _, err := d.publish(name(s.Epoch, ".json"), func(w io.Writer) error { _, err := w.Write(m); return err }); err != nil {
		return err
	}
	return d.prune()
}

// publish writes the file rel through write under a temporary name, syncs it and renames it
// into place, returning its size and CRC-32C.
func (d Dir) publish(rel string, write func(io.Writer) error) (int64, uint32, error) {
	f, err := os.CreateTemp(d.Path, ".tmp-"+rel+"-*")
	if err != nil {
		return 0, 0, fmt.Errorf("checkpoint: %w", err)
	}
	defer os.Remove(f.Name())
	crc := crc32.New(castagnoli)
	cw := &countWriter{w: io.MultiWriter(f, crc)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(d.Path, rel))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("checkpoint: write %s: %w", filepath.Join(d.Path, rel), err)
	}
	return cw.n, crc.Sum32(), nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// manifests returns the epochs of the published manifests, newest first.
func (d Dir) manifests() ([]int, error) {
	ents, err := os.ReadDir(d.Path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	var epochs []int
	for _, e := range ents {
		var ep int
		if n := e.Name(); strings.HasPrefix(n, "ckpt-") && strings.HasSuffix(n, ".json") {
			if _, err := fmt.Sscanf(n, "ckpt-%08d.json", &ep); err == nil {
				epochs = append(epochs, ep)
			}
		}
	}
	slices.Sort(epochs)
	slices.Reverse(epochs)
	return epochs, nil
}

// prune deletes all but the newest Keep checkpoints.
func (d Dir) prune() error {
	if d.Keep <= 0 {
		return nil
	}
	epochs, err := d.manifests()
	if err != nil || len(epochs) <= d.Keep {
		return err
	}
	for _, ep := range epochs[d.Keep:] {
		if err := os.Remove(filepath.Join(d.Path, name(ep, ".json"))); err != nil {
			return fmt.Errorf("checkpoint: prune: %w", err)
		}
		if err := os.Remove(filepath.Join(d.Path, name(ep, ".bin"))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("checkpoint: prune: %w", err)
		}
	}
	return nil
}

// Latest returns the newest complete checkpoint whose checksum holds, skipping (and reporting
// in skipped) newer ones that are torn or corrupt; ErrNone when there is none.
func (d Dir) Latest() (s State, skipped []error, err error) {
	epochs, err := d.manifests()
	if err != nil {
		return State{}, nil, err
	}
	for _, ep := range epochs {
		s, err := d.load(ep)
		if err == nil {
			return s, skipped, nil
		}
		skipped = append(skipped, err)
	}
	return State{}, skipped, fmt.Errorf("%w in %s", ErrNone, d.Path)
}

// load reads and verifies the checkpoint of epoch.
func (d Dir) load(epoch int) (State, error) {
	mpath := filepath.Join(d.Path, name(epoch, ".json"))
	mb, err := os.ReadFile(mpath)
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return State{}, fmt.Errorf("checkpoint: %s: %w", mpath, err)
	}
	path := filepath.Join(d.Path, filepath.Base(m.File))
	b, err := os.ReadFile(path)
	switch {
	case err != nil:
		return State{}, fmt.Errorf("checkpoint: %w", err)
	case int64(len(b)) != m.Size:
		return State{}, fmt.Errorf("checkpoint: %s: %d bytes, manifest says %d", path, len(b), m.Size)
	case crc32.Checksum(b, castagnoli) != m.CRC32C:
		return State{}, fmt.Errorf("checkpoint: %s: checksum mismatch", path)
	case len(b) < 4:
		return State{}, fmt.Errorf("checkpoint: %s: truncated header", path)
	}
	hl := int(binary.LittleEndian.Uint32(b))
	if hl > len(b)-4 {
		return State{}, fmt.Errorf("checkpoint: %s: header of %d bytes in a %d-byte file", path, hl, len(b))
	}
	var h header
	if err := json.Unmarshal(b[4:4+hl], &h); err != nil || len(h.Lens) != len(h.Names) {
		return State{}, fmt.Errorf("checkpoint: %s: bad header: %v", path, err)
	}
	s := State{Epoch: h.Epoch, Position: h.Position, Seed: h.Seed, RNG: h.RNG, Tensors: make(map[string][]float32, len(h.Names))}
	raw := b[4+hl:]
	for i, n := range h.Names {
		if h.Lens[i] < 0 || 4*h.Lens[i] > len(raw) {
			return State{}, fmt.Errorf("checkpoint: %s: tensor %s overruns the file", path, n)
		}
		t := make([]float32, h.Lens[i])
		for j := range t {
			t[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		s.Tensors[n], raw = t, raw[4*h.Lens[i]:]
	}
	if len(raw) != 0 {
		return State{}, fmt.Errorf("checkpoint: %s: %d trailing bytes", path, len(raw))
	}
	return s, nil
}
