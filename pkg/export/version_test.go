package export

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/safetensors"
)

// errCrash is what crashStore returns once the export it serves has "crashed".
var errCrash = errors.New("crashed")

// crashStore passes every object operation to a real store until the limit-th write (Put or
// Delete), and fails that one and every later one, as a process killed there would never make
// them; its folders share the count.
type crashStore struct {
	checkpoint.Store
	writes *atomic.Int64
	limit  int64
}

func (c crashStore) step() error {
	if c.writes.Add(1) >= c.limit {
		return errCrash
	}
	return nil
}

func (c crashStore) Put(ctx context.Context, name string, data []byte) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.Store.Put(ctx, name, data)
}

func (c crashStore) Delete(ctx context.Context, name string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.Store.Delete(ctx, name)
}

func (c crashStore) Sub(name string) checkpoint.Store {
	return crashStore{Store: c.Store.Sub(name), writes: c.writes, limit: c.limit}
}

// versionStores returns makers of a fresh folder and of a fresh S3 prefix on a real MinIO
// server, each named n.
func versionStores(t *testing.T) map[string]func(n string) checkpoint.Store {
	t.Helper()
	dir, srv := t.TempDir(), minio.Start(t)
	bucket := srv.Bucket(t, "models")
	return map[string]func(string) checkpoint.Store{
		"dir": func(n string) checkpoint.Store { return checkpoint.Dir(filepath.Join(dir, n)) },
		"s3": func(n string) checkpoint.Store {
			return checkpoint.S3{Client: srv.Client(), Bucket: bucket, Prefix: "m/" + n}
		},
	}
}

// exportModel writes a model whose weights are saved (and so are its predictions and history)
// to st as run, through a Target: the weights, three more files, then the card.
func exportModel(ctx context.Context, st checkpoint.Store, run string, overwrite bool, saved []safetensors.Tensor) error {
	tg, err := Begin(ctx, st, run, overwrite)
	if err != nil {
		return err
	}
	w := &Writer{Store: tg}
	weights, err := safetensors.Encode(saved, nil)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{WeightsFile, weights}, {PredictionsFile, []byte(run)}, {ProbabilitiesFile, []byte(run + "p")}, {HistoryFile, []byte("{}")}} {
		if err := w.Put(ctx, f.name, f.data); err != nil {
			return err
		}
	}
	return w.PutCard(ctx, card())
}

// TestExportReplacesAtomically replaces a model with another, the export crashed at every one of
// its writes in turn (each file, the card, each deletion of the old version): after every crash
// the location reads back as the old model or as the new, whole, and once the new one is read the
// old is never read again. An export finishing after the crash replaces whatever it left; the
// location then holds the new version alone. A location holding a model is not replaced without
// overwrite, but a run's own model is (a job exporting again after a restart).
func TestExportReplacesAtomically(t *testing.T) {
	ctx := context.Background()
	d := rmat(t, 8, 3)
	older, newer := Capture(mustSlots(t, gcn(t, d, 5, 1))), Capture(mustSlots(t, gcn(t, d, 5, 2)))
	for kind, mk := range versionStores(t) {
		for limit := int64(1); ; limit++ {
			st := mk(kind + "-crash-" + string(rune('a'+limit)))
			if err := exportModel(ctx, st, "old", false, older); err != nil {
				t.Fatal(err)
			}
			err := exportModel(ctx, crashStore{Store: st, writes: &atomic.Int64{}, limit: limit}, "new", true, newer)
			m, rerr := Read(ctx, st)
			if rerr != nil {
				t.Fatalf("%s: crashed at write %d (%v): the location reads back as %v", kind, limit, err, rerr)
			}
			isNew := slices.Equal(m.Tensors[0].Data, newer[0].Data)
			if !isNew && !slices.Equal(m.Tensors[0].Data, older[0].Data) {
				t.Fatalf("%s: crashed at write %d: neither model", kind, limit)
			}
			if pred, err := mustFiles(t, st, m.Card.Version).Get(ctx, PredictionsFile); err != nil || string(pred) != map[bool]string{false: "old", true: "new"}[isNew] {
				t.Fatalf("%s: crashed at write %d: predictions %q (%v) beside the %v model", kind, limit, pred, err, map[bool]string{false: "old", true: "new"}[isNew])
			}
			if err == nil { // no crash: every write done
				if !isNew || limit < 7 {
					t.Fatalf("%s: an export of %d writes left the new model %v", kind, limit-1, isNew)
				}
				folders, _ := st.Folders(ctx)
				names, _ := st.List(ctx)
				if !slices.Equal(folders, []string{m.Card.Version}) || !slices.Equal(names, []string{CardFile}) {
					t.Errorf("%s: after the replacement the location holds %v and %v, want %s and the card alone", kind, folders, names, m.Card.Version)
				}
				t.Logf("%s: crashed at each of %d writes, the location read back whole every time", kind, limit-1)
				break
			}
			if !errors.Is(err, errCrash) {
				t.Fatalf("%s: crash at write %d: %v", kind, limit, err)
			}
			if err := exportModel(ctx, st, "again", true, newer); err != nil {
				t.Fatalf("%s: export after a crash at write %d: %v", kind, limit, err)
			}
			if m, err := Read(ctx, st); err != nil || !strings.HasPrefix(m.Card.Version, "v-again-") {
				t.Fatalf("%s: after a crash at write %d and a new export: %v, version %q", kind, limit, err, m.Card.Version)
			}
			folders, _ := st.Folders(ctx)
			if len(folders) != 1 {
				t.Errorf("%s: after a crash at write %d and a new export the location holds %v", kind, limit, folders)
			}
		}

		st := mk(kind + "-refuse")
		if err := exportModel(ctx, st, "old", false, older); err != nil {
			t.Fatal(err)
		}
		err := exportModel(ctx, st, "new", false, newer)
		if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "holds model.json (version v-old-1): pass --overwrite") {
			t.Errorf("%s: a second export without overwrite: %v", kind, err)
		}
		if m, err := Read(ctx, st); err != nil || !slices.Equal(m.Tensors[0].Data, older[0].Data) {
			t.Errorf("%s: a refused export changed the model: %v", kind, err)
		}
		if err := exportModel(ctx, st, "old", false, newer); err != nil {
			t.Errorf("%s: the same run exporting again: %v", kind, err)
		}
		if m, err := Read(ctx, st); err != nil || m.Card.Version != "v-old-2" || !slices.Equal(m.Tensors[0].Data, newer[0].Data) {
			t.Errorf("%s: the same run's second export: %v, version %q", kind, err, m.Card.Version)
		}
	}
}

func mustFiles(t *testing.T, st checkpoint.Store, version string) checkpoint.Store {
	t.Helper()
	f, err := Files(st, version)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
