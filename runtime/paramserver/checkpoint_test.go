package paramserver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
		mustInitAll(t, shards[i], initReq(0, true), initReq(1, true))
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
	r, err := initAll(s, initReq(0, true), initReq(1, true))
	return s, r[0], err
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

// TestRejoinAndRewind restarts the graph servers of a synchronous run mid-epoch: a second Init
// from a graph server drops the unfinished epoch's gradients, and RewindTo takes the shard back
// to a checkpoint (or to the initial weights), refusing an epoch it has no checkpoint of.
func TestRejoinAndRewind(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	weights := trainShards(t, dirs, 5) // checkpoints of epochs 2 and 4
	s, r, err := resumeShard(t, 0, dirs)
	if err != nil || r.Version != 4 {
		t.Fatalf("resume: %v, %v; want version 4", r, err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	g := map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)}
	if _, err := push(t, s, 0, 0, 4, 4, g); err != nil {
		t.Fatal(err)
	}
	// Graph server 0 restarts, and graph server 1 with it: the Init again drops the gradient
	// graph server 0 pushed.
	if r, err := initAll(s, initReq(0, true), initReq(1, true)); err != nil || r[0].Version != 4 {
		t.Fatalf("second Init: %v, %v", r, err)
	}
	if _, err := push(t, s, 0, 0, 4, 4, g); err != nil {
		t.Fatalf("the same interval after the restart: %v", err)
	}
	// Without a restart, a second push of it is refused.
	if _, err := push(t, s, 0, 0, 4, 4, g); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("a second push in one run: %v", err)
	}
	// Complete epoch 5, then go back to 2 and 0.
	for c := 1; c < 4; c++ {
		if _, err := push(t, s, c/2, c%2, 4, 4, g); err != nil {
			t.Fatal(err)
		}
	}
	// Both graph servers ask to go back, as they do after a start.
	rewind := func(e uint64) (*rpc.InitReply, error) {
		reqs := []*rpc.InitRequest{initReq(0, true), initReq(1, true)}
		for _, req := range reqs {
			req.RewindTo = &e
		}
		r, err := initAll(s, reqs...)
		return r[1], err
	}
	// One epoch back needs no checkpoint (a graph server killed between its pushes to two
	// shards): epoch 6, back to 5 (never checkpointed), then the same step again gives the
	// same weights.
	fifth := pull(t, s, 5)
	step6 := func() {
		for c := range 4 {
			if _, err := push(t, s, c/2, c%2, 5, 5, g); err != nil {
				t.Fatal(err)
			}
		}
	}
	step6()
	sixth := pull(t, s, 6)
	if r, err := rewind(5); err != nil || r.Version != 5 {
		t.Fatalf("rewind one epoch, to 5: %v, %v", r, err)
	}
	for l, w := range pull(t, s, 5) {
		if !slices.Equal(w.Data, fifth[l].Data) {
			t.Errorf("back to 5: layer %d differs from the weights of that epoch", l)
		}
	}
	step6()
	for l, w := range pull(t, s, 6) {
		if !slices.Equal(w.Data, sixth[l].Data) {
			t.Errorf("epoch 6 again after going back one epoch: layer %d differs", l)
		}
	}
	if _, err := rewind(3); err == nil || !strings.Contains(err.Error(), "go back to epoch 3") {
		t.Errorf("rewind to epoch 3, which has no checkpoint: %v", err)
	}
	if _, err := rewind(9); err == nil || !strings.Contains(err.Error(), "the shard is at epoch 6") {
		t.Errorf("rewind to epoch 9 at version 6: %v", err)
	}
	for _, e := range []uint64{2, 0} {
		r, err := rewind(e)
		if err != nil || r.Version != e {
			t.Fatalf("rewind to %d: %v, %v", e, r, err)
		}
		if got := s.Versions(); !slices.Equal(got, []uint64{e}) {
			t.Errorf("versions %v after the rewind to %d", got, e)
		}
		for l, w := range pull(t, s, e) {
			if !slices.Equal(w.Data, weights[0][e][l].Data) {
				t.Errorf("rewound to %d: layer %d differs from the weights of that epoch", e, l)
			}
		}
	}
	// Training goes on from there: epoch 1 again, as the first time.
	for c := range 4 {
		if _, err := push(t, s, c/2, c%2, 0, 0, g); err != nil {
			t.Fatal(err)
		}
	}
	if s.Newest() != 1 {
		t.Errorf("newest %d after an epoch from the rewind to 0", s.Newest())
	}
}

// TestAsyncCheckpointsAtBoundaries pushes an asynchronous run's gradients with epochs 0 and 1
// interleaved (staleness 1) and the pipeline drained before epoch 2, checkpointing every 2
// epochs: the shard saves only at the boundary of epoch 2 (version 8: two epochs of 4
// contributions) and not when stopped mid-epoch; a restarted graph server takes it back to
// that checkpoint while the other, not restarted yet, is refused until it restarts too; and a
// shard started anew resumes there with the same weights.
func TestAsyncCheckpointsAtBoundaries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cp := checkpoint.Checkpoints{Store: checkpoint.Dir(dir)}
	rng := rand.New(rand.NewPCG(5, 6))
	g := func() map[int]*tensor.Dense { return map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)} }
	s := mustShard(t, 0, 1)
	if err := s.EnableCheckpoints(Checkpointing{Checkpoints: cp, Every: 2}); err != nil {
		t.Fatal(err)
	}
	mustInitAll(t, s, initReq(0, false), initReq(1, false))
	// Contribution c is interval c%2 of graph server c/2.
	order := []struct{ c, epoch int }{{0, 0}, {1, 0}, {0, 1}, {2, 0}, {1, 1}, {3, 0}, {2, 1}, {3, 1}}
	for k, o := range order {
		if _, err := push(t, s, o.c/2, o.c%2, o.epoch, 0, g()); err != nil {
			t.Fatalf("push %d: %v", k, err)
		}
		eps, err := cp.Epochs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := k == len(order)-1; (len(eps) > 0) != want {
			t.Fatalf("after push %d: checkpoints of epochs %v", k, eps)
		}
	}
	st, err := cp.Load(ctx, 2)
	if err != nil || st.Epoch != 2 || st.Position != 8 {
		t.Fatalf("checkpoint of epoch 2: epoch %d, version %d, %v; want 2 and 8", st.Epoch, st.Position, err)
	}
	second := pull(t, s, 8)
	if _, err := push(t, s, 0, 0, 2, 8, g()); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if eps, _ := cp.Epochs(ctx); !slices.Equal(eps, []int{2}) {
		t.Fatalf("stopped mid-epoch 3: checkpoints of epochs %v, want only 2", eps)
	}

	replies := make(chan *rpc.InitReply, 2)
	go func() {
		r, err := s.Init(ctx, initReq(1, false))
		if err != nil {
			t.Error(err)
		}
		replies <- r
	}()
	for !slices.Equal(s.Versions(), []uint64{8}) { // graph server 1's Init takes the shard back
		if len(replies) > 0 {
			t.Fatal("graph server 1's Init returned before graph server 0 restarted")
		}
		runtime.Gosched()
	}
	if _, err := push(t, s, 0, 1, 2, 8, g()); status.Code(err) != codes.Aborted {
		t.Fatalf("a push of graph server 0, not restarted, after graph server 1 restarted: %v, want Aborted", err)
	}
	r0, err := s.Init(ctx, initReq(0, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*rpc.InitReply{r0, <-replies} {
		if r == nil || r.Epoch != 2 || r.Version != 8 {
			t.Fatalf("Init after the restart: %v, want epoch 2 at version 8", r)
		}
	}
	sameTensors(t, "back at epoch 2", pull(t, s, 8), second)

	again := mustShard(t, 0, 1)
	if err := again.EnableCheckpoints(Checkpointing{Checkpoints: cp, Every: 2, Resume: true}); err != nil {
		t.Fatal(err)
	}
	for _, r := range mustInitAll(t, again, initReq(0, false), initReq(1, false)) {
		if r.Epoch != 2 || r.Version != 8 {
			t.Fatalf("resumed shard: %v, want epoch 2 at version 8", r)
		}
	}
	sameTensors(t, "resumed at epoch 2", pull(t, again, 8), second)
}

// sameTensors fails the test unless got and want hold the same values.
func sameTensors(t *testing.T, what string, got, want []*tensor.Dense) {
	t.Helper()
	for l := range want {
		if !slices.Equal(got[l].Data, want[l].Data) {
			t.Errorf("%s: layer %d differs", what, l)
		}
	}
}

// blockingStore is a checkpoint folder whose first data object takes hold to write.
type blockingStore struct {
	checkpoint.Dir
	hold     time.Duration
	once     sync.Once
	blocked  chan struct{} // closed when the first write begins
	released atomic.Bool   // set when it goes on
}

func (b *blockingStore) Put(ctx context.Context, name string, data []byte) error {
	first := false
	if strings.HasSuffix(name, ".bin") {
		b.once.Do(func() { first = true })
	}
	if first {
		close(b.blocked)
		select {
		case <-time.After(b.hold):
		case <-ctx.Done():
			return ctx.Err()
		}
		b.released.Store(true)
	}
	return b.Dir.Put(ctx, name, data)
}

// TestSlowStoreDelaysNoCall checkpoints a run, synchronous and asynchronous, every 2 epochs
// into a store whose first write takes 10 s: while it is written, 50 more epochs of Pushes
// and Pulls are answered (50 or 200 updates; the checkpoints due meanwhile are skipped and
// logged); the Push that completed epoch 2 returns once its checkpoint is written, which
// holds the weights of epoch 2; and the next checkpoint due after it is written again.
func TestSlowStoreDelaysNoCall(t *testing.T) {
	const epochs = 50
	for _, sync := range []bool{true, false} {
		per := uint64(1) // updates per epoch
		if !sync {
			per = 4
		}
		t.Run(map[bool]string{true: "sync", false: "async"}[sync], func(t *testing.T) {
			t.Parallel()
			store := &blockingStore{Dir: checkpoint.Dir(t.TempDir()), hold: 10 * time.Second, blocked: make(chan struct{})}
			cp := checkpoint.Checkpoints{Store: store}
			var log strings.Builder
			s := mustShard(t, 0, 1)
			if err := s.EnableCheckpoints(Checkpointing{Checkpoints: cp, Every: 2, Log: &log}); err != nil {
				t.Fatal(err)
			}
			mustInitAll(t, s, initReq(0, sync), initReq(1, sync))
			rng := rand.New(rand.NewPCG(13, 14))
			g := map[int]*tensor.Dense{0: gradient(rng, 0), 1: gradient(rng, 1)}
			// epoch pushes every contribution of epoch e but the last, and returns the last's push.
			epoch := func(e int) func() (*rpc.PushReply, error) {
				for c := range 3 {
					if _, err := push(t, s, c/2, c%2, e, uint64(e)*per, g); err != nil {
						t.Fatalf("epoch %d push %d: %v", e, c, err)
					}
				}
				return func() (*rpc.PushReply, error) { return push(t, s, 1, 1, e, uint64(e)*per, g) }
			}
			if _, err := epoch(0)(); err != nil {
				t.Fatal(err)
			}
			type pushed struct {
				r   *rpc.PushReply
				err error
			}
			second := make(chan pushed, 1)
			last := epoch(1)
			go func() {
				r, err := last()
				second <- pushed{r, err}
			}()
			<-store.blocked
			begin := time.Now()
			for e := 2; e < 2+epochs; e++ {
				r, err := epoch(e)()
				if err != nil || r.Version != uint64(e+1)*per || r.CheckpointEpoch != 0 {
					t.Fatalf("epoch %d while the checkpoint of epoch 2 is written: %v, %v; want version %d and no checkpoint yet", e, r, err, uint64(e+1)*per)
				}
				if w := pull(t, s, uint64(e+1)*per); len(w) != 2 {
					t.Fatalf("pulled %d layers of version %d", len(w), uint64(e+1)*per)
				}
			}
			during := time.Since(begin)
			if store.released.Load() {
				t.Fatalf("%d epochs took %v, longer than the store's write of %v", epochs, during, store.hold)
			}
			select {
			case p := <-second:
				t.Fatalf("the push that completed epoch 2 returned (%v, %v) before its checkpoint was written", p.r, p.err)
			default:
			}
			t.Logf("%d epochs: %d updates (%d pushes, %d pulls) in %v while the checkpoint's write was blocked", epochs, uint64(epochs)*per, 4*epochs, epochs, during)
			if s.Newest() != (2+epochs)*per {
				t.Fatalf("newest version %d, want %d", s.Newest(), (2+epochs)*per)
			}
			var p pushed
			select {
			case p = <-second:
			case <-time.After(time.Minute):
				t.Fatal("the push that completed epoch 2 never returned")
			}
			if p.err != nil || p.r.Version != 2*per || p.r.CheckpointEpoch != 2 {
				t.Fatalf("the push that completed epoch 2: %v, %v; want version %d and the checkpoint of epoch 2", p.r, p.err, 2*per)
			}
			st, err := cp.Load(context.Background(), 2)
			if err != nil || st.Epoch != 2 || st.Position != int64(2*per) {
				t.Fatalf("checkpoint of epoch 2: epoch %d, version %d, %v", st.Epoch, st.Position, err)
			}
			for l, w := range pull(t, s, 2*per) {
				if !slices.Equal(st.Tensors[fmt.Sprintf("param/%d", l)], w.Data) {
					t.Errorf("layer %d in the checkpoint of epoch 2 differs from version %d", l, 2*per)
				}
			}
			if !strings.Contains(log.String(), "skipping the checkpoint of epoch 4: the one of epoch 2 is still being written") {
				t.Errorf("log %q: want the checkpoints skipped while the store was slow", log.String())
			}
			// The store keeps up again: the next checkpoint due is written before its push returns.
			next := 2 + epochs
			for e := next; e < next+2; e++ {
				r, err := epoch(e)()
				if err != nil || (e == next+1) != (r.CheckpointEpoch == uint64(next+2)) {
					t.Fatalf("epoch %d after the slow write: %v, %v", e, r, err)
				}
			}
			if eps, err := cp.Epochs(context.Background()); err != nil || !slices.Equal(eps, []int{next + 2, 2}) {
				t.Fatalf("checkpoints of epochs %v, %v; want %d and 2", eps, err, next+2)
			}
		})
	}
}

// TestWriteTimeoutGrowsWithTheCheckpoint: a small checkpoint's write is bounded by the minute
// of checkpointTimeout; one of 10 MiB (two tensors of 5 MiB) gets 10 s more: a preempted job's
// pod grace can exceed a minute for a large model.
func TestWriteTimeoutGrowsWithTheCheckpoint(t *testing.T) {
	mib := func(n int) []float32 { return make([]float32, n<<20/4) }
	for _, c := range []struct {
		tensors map[string][]float32
		want    time.Duration
	}{
		{map[string][]float32{"w": make([]float32, 1000)}, time.Minute},
		{map[string][]float32{"w": mib(5), "m": mib(5)}, time.Minute + 10*time.Second},
	} {
		if got := writeTimeout(checkpoint.State{Tensors: c.tensors}); got != c.want {
			t.Errorf("write timeout of %d tensors: %v, want %v", len(c.tensors), got, c.want)
		}
	}
}
