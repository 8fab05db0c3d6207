package paramserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// trainShards runs epochs synchronous epochs on two shards checkpointing every 2 epochs into
// dirs, and returns each shard's weights per version.
func trainShards(t *testing.T, dirs []string, epochs int) [][][]*tensor.Dense {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 10))
	shards := make([]*Shard, 2)
	weights := make([][][]*tensor.Dense, 2)
	for i := range shards {
		shards[i] = mustShard(t, i, 2)
		if err := shards[i].EnableCheckpoints(Checkpointing{Checkpoints: checkpoint.Checkpoints{Store: checkpoint.Dir(dirs[i])}, Every: 2}); err != nil {
			t.Fatal(err)
		}
		for gs := range 2 {
			if _, err := shards[i].Init(context.Background(), initReq(uint32(gs), true)); err != nil {
				t.Fatal(err)
			}
		}
		weights[i] = append(weights[i], pull(t, shards[i], 0))
	}
	for epoch := range epochs {
		for c := range 4 {
			g := map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)}
			for _, s := range shards {
				if _, err := push(t, s, c/2, c%2, epoch, uint64(epoch), g); err != nil {
					t.Fatal(err)
				}
			}
		}
		for i, s := range shards {
			weights[i] = append(weights[i], pull(t, s, uint64(epoch+1)))
		}
	}
	return weights
}

// resumeShard starts shard id of 2 on dirs with Resume and sends it Init.
func resumeShard(t *testing.T, id int, dirs []string) (*Shard, *rpc.InitReply, error) {
	t.Helper()
	c := Checkpointing{Every: 2, Resume: true}
	for i, d := range dirs {
		if i == id {
			c.Checkpoints = checkpoint.Checkpoints{Store: checkpoint.Dir(d)}
		} else {
			c.Peers = append(c.Peers, checkpoint.Checkpoints{Store: checkpoint.Dir(d)})
		}
	}
	s := mustShard(t, id, 2)
	if err := s.EnableCheckpoints(c); err != nil {
		t.Fatal(err)
	}
	r, err := s.Init(context.Background(), initReq(0, true))
	return s, r, err
}

func removeCheckpoint(t *testing.T, dir string, epoch int) {
	t.Helper()
	for _, ext := range []string{".json", ".bin"} {
		if err := os.Remove(filepath.Join(dir, fmt.Sprintf("ckpt-%08d%s", epoch, ext))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResumeAtCommonEpoch checkpoints two shards every 2 epochs, then takes away checkpoints as
// a shard killed at different moments would lack them: each shard must resume at the newest
// epoch both have, with exactly the weights of that epoch, skip a corrupt one, and refuse with
// an error naming what each shard has when there is no common epoch.
func TestResumeAtCommonEpoch(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	weights := trainShards(t, dirs, 6) // checkpoints of epochs 2, 4 and 6 on both
	removeCheckpoint(t, dirs[1], 6)    // shard 1 was killed before writing epoch 6

	for id := range 2 {
		s, r, err := resumeShard(t, id, dirs)
		if err != nil {
			t.Fatalf("shard %d: %v", id, err)
		}
		if r.Version != 4 {
			t.Fatalf("shard %d resumed at version %d, want 4 (the newest both shards have)", id, r.Version)
		}
		got := pull(t, s, 4)
		for l, w := range got {
			if !slices.Equal(w.Data, weights[id][4][l].Data) {
				t.Errorf("shard %d layer %d: the resumed weights differ from those of epoch 4", id, l)
			}
		}
	}

	// A corrupt checkpoint of epoch 4 on shard 0: both shards fall back to epoch 2, shard 1
	// too although its own epoch 4 is sound.
	bin := filepath.Join(dirs[0], "ckpt-00000004.bin")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(bin, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for id := range 2 {
		if _, r, err := resumeShard(t, id, dirs); err != nil || r.Version != 2 {
			t.Fatalf("shard %d with shard 0's epoch 4 corrupt: %v, %v; want version 2", id, r, err)
		}
	}

	// No common epoch: shard 0 has 6 (and the corrupt 4), shard 1 only 4.
	removeCheckpoint(t, dirs[0], 2)
	removeCheckpoint(t, dirs[1], 2)
	for id := range 2 {
		_, _, err = resumeShard(t, id, dirs)
		if err == nil {
			t.Fatalf("shard %d resumed with no epoch that both shards can restore", id)
		}
		for _, want := range []string{"no epoch has a valid checkpoint on every parameter server", dirs[0] + ": [6 4]", dirs[1] + ": [4]"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("shard %d: error %q does not say %q", id, err, want)
			}
		}
	}
}
