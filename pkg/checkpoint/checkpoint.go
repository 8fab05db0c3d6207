package checkpoint

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// ErrNone reports a store without a complete, valid checkpoint.
var ErrNone = errors.New("checkpoint: no complete checkpoint")

// errCorrupt marks a checkpoint that is torn or fails its checksum.
var errCorrupt = errors.New("corrupt")

// IsCorrupt reports whether a checkpoint failed to load with err because it is torn, corrupt or
// missing (so an older one may be used), not because the store failed.
func IsCorrupt(err error) bool {
	return errors.Is(err, errCorrupt) || errors.Is(err, os.ErrNotExist) || errors.Is(err, objstore.ErrNotFound)
}

// State is what a checkpoint holds.
type State struct {
	Run      string               // identity of the run (model and data), checked on resume
	Epoch    int                  // epochs completed
	Position int64                // pipeline position (e.g. the weight version)
	Seed     uint64               // RNG seed
	RNG      []byte               // RNG state, opaque
	Tensors  map[string][]float32 // weights and optimizer state by name
}

// Store holds the objects of checkpoints. Put publishes an object whole or not at all.
type Store interface {
	Put(ctx context.Context, name string, data []byte) error
	Get(ctx context.Context, name string) ([]byte, error)
	// List returns the names of the published objects.
	List(ctx context.Context) ([]string, error)
	Delete(ctx context.Context, name string) error
	// Sub returns the store of the folder name inside this one (a longer S3 prefix).
	Sub(name string) Store
	// Folders returns the names of the folders directly inside this one that hold objects.
	Folders(ctx context.Context) ([]string, error)
	// String says where the store is, for messages.
	String() string
}

// Checkpoints saves to and restores from a store.
type Checkpoints struct {
	Store Store
	Keep  int // checkpoints kept by Save; ≤ 0 keeps all
	// RunID is the run the checkpoints belong to (a job's UID, or the id a CLI run drew), and
	// Store that run's own folder: Save records it in every manifest, and Load refuses a
	// checkpoint another run wrote. Empty: no check (checkpoints written before runs had ids).
	RunID string
}

// manifest is the published record of one complete data object.
type manifest struct {
	RunID  string `json:"run_id,omitempty"`
	Epoch  int    `json:"epoch"`
	File   string `json:"file"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

// header precedes the raw tensors in a data object.
type header struct {
	Run      string   `json:"run,omitempty"`
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
func (c Checkpoints) Save(ctx context.Context, s State) error {
	if s.Epoch < 0 {
		return fmt.Errorf("checkpoint: %s: negative epoch %d", c.Store, s.Epoch)
	}
	data, err := encode(s)
	if err != nil {
		return fmt.Errorf("checkpoint: %s: %w", c.Store, err)
	}
	file := name(s.Epoch, ".bin")
	if err := c.Store.Put(ctx, file, data); err != nil {
		return err
	}
	m, err := json.Marshal(manifest{RunID: c.RunID, Epoch: s.Epoch, File: file, Size: int64(len(data)), CRC32C: crc32.Checksum(data, castagnoli)})
	if err != nil {
		return err
	}
	if err := c.Store.Put(ctx, name(s.Epoch, ".json"), m); err != nil {
		return err
	}
	return c.prune(ctx)
}

// encode lays out a data object: a little-endian uint32 header length, the JSON header, then
// every tensor's float32 values in the header's order.
func encode(s State) ([]byte, error) {
	h := header{Run: s.Run, Epoch: s.Epoch, Position: s.Position, Seed: s.Seed, RNG: s.RNG}
	total := 0
	for n, t := range s.Tensors {
		h.Names = append(h.Names, n)
		total += len(t)
	}
	sort.Strings(h.Names)
	for _, n := range h.Names {
		h.Lens = append(h.Lens, len(s.Tensors[n]))
	}
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 4+len(hb)+4*total)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(hb)))
	out = append(out, hb...)
	for _, n := range h.Names {
		for _, v := range s.Tensors[n] {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out, nil
}

// Epochs returns the epochs of the published checkpoints, newest first (not yet verified).
func (c Checkpoints) Epochs(ctx context.Context) ([]int, error) {
	names, err := c.Store.List(ctx)
	if err != nil {
		return nil, err
	}
	var epochs []int
	for _, n := range names {
		var ep int
		if strings.HasPrefix(n, "ckpt-") && strings.HasSuffix(n, ".json") {
			if _, err := fmt.Sscanf(n, "ckpt-%08d.json", &ep); err == nil {
				epochs = append(epochs, ep)
			}
		}
	}
	slices.Sort(epochs)
	slices.Reverse(epochs)
	return epochs, nil
}

// prune deletes all but the newest Keep checkpoints in the run's own folder, manifest first.
func (c Checkpoints) prune(ctx context.Context) error {
	if c.Keep <= 0 {
		return nil
	}
	epochs, err := c.Epochs(ctx)
	if err != nil || len(epochs) <= c.Keep {
		return err
	}
	for _, ep := range epochs[c.Keep:] {
		if err := c.Store.Delete(ctx, name(ep, ".json")); err != nil {
			return fmt.Errorf("checkpoint: prune: %w", err)
		}
		if err := c.Store.Delete(ctx, name(ep, ".bin")); err != nil {
			return fmt.Errorf("checkpoint: prune: %w", err)
		}
	}
	return nil
}

// Latest returns the newest complete checkpoint whose checksum holds, skipping (and reporting
// in skipped) newer ones that are torn or corrupt; ErrNone when there is none. A store that
// fails otherwise (unreachable, access denied) is an error, never a silent fresh start.
func (c Checkpoints) Latest(ctx context.Context) (s State, skipped []error, err error) {
	epochs, err := c.Epochs(ctx)
	if err != nil {
		return State{}, nil, err
	}
	for _, ep := range epochs {
		s, err := c.Load(ctx, ep)
		if err == nil {
			return s, skipped, nil
		}
		if !IsCorrupt(err) {
			return State{}, skipped, err
		}
		skipped = append(skipped, err)
	}
	return State{}, skipped, fmt.Errorf("%w in %s", ErrNone, c.Store)
}

// Load reads and verifies the checkpoint of epoch. IsCorrupt tells a torn, corrupt or missing
// checkpoint from a store that failed.
func (c Checkpoints) Load(ctx context.Context, epoch int) (State, error) {
	mname := name(epoch, ".json")
	mb, err := c.Store.Get(ctx, mname)
	if err != nil {
		return State{}, err
	}
	var m manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return State{}, fmt.Errorf("checkpoint: %s %s: %w: %w", c.Store, mname, errCorrupt, err)
	}
	if c.RunID != "" && m.RunID != c.RunID {
		return State{}, fmt.Errorf("checkpoint: %s %s is of run %q, not of this run (%q)", c.Store, mname, m.RunID, c.RunID)
	}
	file := m.File
	if file != name(epoch, ".bin") { // Save's name: no other object, folder or unopenable name
		return State{}, fmt.Errorf("checkpoint: %s %s: %w: bad data object name %q, want %q", c.Store, mname, errCorrupt, file, name(epoch, ".bin"))
	}
	b, err := c.Store.Get(ctx, file)
	where := c.Store.String() + " " + file
	switch {
	case err != nil:
		return State{}, err
	case int64(len(b)) != m.Size:
		return State{}, fmt.Errorf("checkpoint: %s: %w: %d bytes, manifest says %d", where, errCorrupt, len(b), m.Size)
	case crc32.Checksum(b, castagnoli) != m.CRC32C:
		return State{}, fmt.Errorf("checkpoint: %s: %w: checksum mismatch", where, errCorrupt)
	}
	s, err := decode(b)
	if err != nil {
		return State{}, fmt.Errorf("checkpoint: %s: %w: %w", where, errCorrupt, err)
	}
	return s, nil
}

// decode reverses encode.
func decode(b []byte) (State, error) {
	if len(b) < 4 {
		return State{}, errors.New("truncated header")
	}
	hl := int(binary.LittleEndian.Uint32(b))
	if hl > len(b)-4 {
		return State{}, fmt.Errorf("header of %d bytes in a %d-byte object", hl, len(b))
	}
	var h header
	if err := json.Unmarshal(b[4:4+hl], &h); err != nil || len(h.Lens) != len(h.Names) {
		return State{}, fmt.Errorf("bad header: %v", err)
	}
	s := State{Run: h.Run, Epoch: h.Epoch, Position: h.Position, Seed: h.Seed, RNG: h.RNG, Tensors: make(map[string][]float32, len(h.Names))}
	raw := b[4+hl:]
	for i, n := range h.Names {
		if h.Lens[i] < 0 || h.Lens[i] > len(raw)/4 {
			return State{}, fmt.Errorf("tensor %s overruns the object", n)
		}
		t := make([]float32, h.Lens[i])
		for j := range t {
			t[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		}
		s.Tensors[n], raw = t, raw[4*h.Lens[i]:]
	}
	if len(raw) != 0 {
		return State{}, fmt.Errorf("%d trailing bytes", len(raw))
	}
	return s, nil
}
