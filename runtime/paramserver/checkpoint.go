package paramserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// checkpointTimeout bounds one checkpoint read, and the write of a small one (writeTimeout).
const checkpointTimeout = time.Minute

// checkpointSlowRate is the slowest rate, in bytes per second, a store is expected to write a
// checkpoint at: a large model's write gets a second more for each (writeTimeout), where a
// minute would cut the save of a preemption that its pod's grace period leaves time for
// (controllers/grace.go counts 10 MiB/s).
const checkpointSlowRate = 1 << 20

// writeTimeout bounds the write of checkpoint s: checkpointTimeout, and a second for every
// checkpointSlowRate bytes of its tensors.
func writeTimeout(s checkpoint.State) time.Duration {
	var n int64
	for _, t := range s.Tensors {
		n += 4 * int64(len(t))
	}
	return checkpointTimeout + time.Duration(n/checkpointSlowRate)*time.Second
}

// errCheckpoints marks a checkpoint store that failed (unreachable, access denied): the run
// cannot go on, and every later call to the shard fails with codes.DataLoss.
var errCheckpoints = errors.New("the run cannot go on without its checkpoints")

// Checkpointing says where and how often a shard saves its weights and Adam state. A
// checkpoint holds the weights after an epoch: in asynchronous mode the shard saves when the
// graph servers have drained the pipeline there (pipeline.Config.DrainEvery, every Every
// epochs too).
type Checkpointing struct {
	Checkpoints checkpoint.Checkpoints // the shard's own store
	Every       int                    // save every this many epochs
	// Resume restores, when the first graph server sends Init, the newest complete checkpoint
	// of an epoch that every shard in Peers has checkpointed too (a shard killed outright may
	// lack the latest ones), if any; the graph servers then start at its epoch.
	Resume bool
	// Peers are the other shards' checkpoints, read on resume.
	Peers []checkpoint.Checkpoints
	Log   io.Writer // where resumes and skipped checkpoints are noted; nil discards
}

// EnableCheckpoints makes the shard save checkpoints (and resume from them) as c says. Call it
// before serving.
func (s *Shard) EnableCheckpoints(c Checkpointing) error {
	if c.Every < 1 {
		return fmt.Errorf("paramserver: checkpoints every %d epochs", c.Every)
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return s.post(context.Background(), checkpointsEnabled{&c})
}

// SaveCheckpoint writes the checkpoint of the newest version now, if checkpoints are enabled
// and it is at an epoch boundary not saved yet, after the one being written, if any: what a
// shard does when it is told to stop. An asynchronous run stopped mid-epoch keeps its last
// checkpoint instead.
func (s *Shard) SaveCheckpoint(ctx context.Context) error {
	for {
		a := ask(ctx, s, func(r chan<- answer[struct{}]) event { return saveAsked{reply: r} })
		if a.err != nil || a.landed == nil {
			return a.err
		}
		if _, err := s.landing(ctx, a.landed); err != nil {
			return err
		}
		// Ask again: the write waited for may be of an older epoch than the newest.
	}
}

// saveJob is a checkpoint being written: a snapshot the loop took, and the calls waiting
// for it.
type saveJob struct {
	start   int // the shard's start it was taken in (state.starts)
	to      checkpoint.Checkpoints
	state   checkpoint.State
	waiters []chan<- saveResult
}

// saveResult is how a checkpoint's write ended: the epoch it holds, or the error that broke
// the shard.
type saveResult struct {
	epoch int
	err   error
}

// wait returns a channel that gets the job's outcome.
func (j *saveJob) wait() <-chan saveResult {
	c := make(chan saveResult, 1)
	j.waiters = append(j.waiters, c)
	return c
}

// checkpoint starts writing the checkpoint of the newest version when it is at an epoch
// boundary not saved yet — with due, only at the epochs checkpoints are due at, and not while
// another is being written: the store is slower than training, so that one is skipped — and
// returns the channel its outcome comes on. Without due, while one is being written, it
// returns that one's, to ask again once it is written.
func (st *state) checkpoint(due bool) <-chan saveResult {
	if st.ckpt == nil || st.init == nil {
		return nil
	}
	e := st.agg.epoch()
	if !st.agg.boundary() || e == st.saved || (due && e%st.ckpt.Every != 0) {
		return nil
	}
	if j := st.saving; j != nil {
		if due {
			fmt.Fprintf(st.ckpt.Log, "parameter server %d: skipping the checkpoint of epoch %d: the one of epoch %d is still being written\n", st.id, e, j.state.Epoch)
			return nil
		}
		return j.wait()
	}
	j, err := st.snapshot(e)
	if err != nil {
		st.broken = status.Error(codes.DataLoss, err.Error())
		st.notify()
		failed := make(chan saveResult, 1)
		failed <- saveResult{err: st.broken}
		return failed
	}
	st.saving = j
	st.write(j)
	return j.wait()
}

// snapshot returns the job of the checkpoint of epoch: the newest version's weights and Adam
// state, copied (the next update changes the Adam state).
func (st *state) snapshot(epoch int) (*saveJob, error) {
	id, err := st.runIdentity(st.init)
	if err != nil {
		return nil, err
	}
	tensors, steps := st.adam.Snapshot(st.vs.latest())
	if uint64(steps) != st.vs.newest {
		return nil, fmt.Errorf("paramserver: %d Adam steps at version %d", steps, st.vs.newest)
	}
	for k, v := range tensors {
		tensors[k] = slices.Clone(v)
	}
	return &saveJob{start: st.starts, to: st.ckpt.Checkpoints,
		state: checkpoint.State{Run: id, Epoch: epoch, Position: int64(st.vs.newest), Seed: st.init.Seed, Tensors: tensors}}, nil
}

// landed records the end of j's write: it moves the newest checkpoint, unless the shard
// started again since j's snapshot; err, a failed write, breaks the shard.
func (st *state) landed(j *saveJob, err error) {
	st.saving = nil
	r := saveResult{epoch: j.state.Epoch}
	if err != nil {
		st.broken = status.Error(codes.DataLoss, err.Error())
		r.err = st.broken
	} else if j.start == st.starts {
		st.saved = j.state.Epoch
	}
	st.notify()
	for _, w := range j.waiters {
		w <- r
	}
}

// writeCheckpoint writes j to its store, waiting for the store first (store is held while
// the store is in use).
func writeCheckpoint(ctx context.Context, id int, store chan struct{}, j *saveJob) error {
	select {
	case store <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("parameter server %d: checkpoint of epoch %d: %w: %w", id, j.state.Epoch, ctx.Err(), errCheckpoints)
	}
	defer func() { <-store }()
	ctx, cancel := context.WithTimeout(ctx, writeTimeout(j.state))
	defer cancel()
	if err := j.to.Save(ctx, j.state); err != nil {
		return fmt.Errorf("parameter server %d: checkpoint of epoch %d: %w: %w", id, j.state.Epoch, err, errCheckpoints)
	}
	return nil
}

// useStore waits for the checkpoint store (a checkpoint may be being written) and returns a
// context for one read and the function that hands the store back.
func (st *state) useStore() (context.Context, func(), error) {
	select {
	case st.store <- struct{}{}:
	case <-st.ctx.Done():
		return nil, nil, st.ctx.Err()
	}
	ctx, cancel := context.WithTimeout(st.ctx, checkpointTimeout)
	return ctx, func() { cancel(); <-st.store }, nil
}

// runIdentity names the model, optimiser and data layout an Init describes and this shard's
// place, so that a checkpoint is restored only into the run that wrote it.
func (st *state) runIdentity(req *rpc.InitRequest) (string, error) {
	r := proto.Clone(req).(*rpc.InitRequest)
	r.GraphServer, r.Run, r.RewindTo = 0, "", nil // the run name changes between launches of one job
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("parameter server %d of %d, model %v, init %x", st.id, st.shards, req.Dims, sha256.Sum256(b)), nil
}

// restore loads into held and adam the newest checkpoint every shard has, if any (at setup),
// and returns its epoch (0 for none).
func (st *state) restore(req *rpc.InitRequest, held []*tensor.Dense, adam *model.Adam) (int, error) {
	c := st.ckpt
	ctx, done, err := st.useStore()
	if err != nil {
		return 0, err
	}
	defer done()
	cp, err := st.latestCommon(ctx)
	if errors.Is(err, checkpoint.ErrNone) {
		fmt.Fprintf(c.Log, "parameter server %d: no checkpoint in %s: starting from epoch 1\n", st.id, c.Checkpoints.Store)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the checkpoints in %s: %w: %w", c.Checkpoints.Store, err, errCheckpoints)
	}
	if err := st.restoreState(req, cp, held, adam); err != nil {
		return 0, err
	}
	fmt.Fprintf(c.Log, "parameter server %d: resumed from the checkpoint of epoch %d in %s\n", st.id, cp.Epoch, c.Checkpoints.Store)
	return cp.Epoch, nil
}

// restoreState checks that cp is a checkpoint of this run and loads it into held and adam.
func (st *state) restoreState(req *rpc.InitRequest, cp checkpoint.State, held []*tensor.Dense, adam *model.Adam) error {
	where := st.ckpt.Checkpoints.Store
	id, err := st.runIdentity(req)
	if err != nil {
		return err
	}
	if cp.Run != id {
		return fmt.Errorf("the checkpoint of epoch %d in %s is of another run (%s), not of this one (%s)", cp.Epoch, where, cp.Run, id)
	}
	if want := int64(cp.Epoch) * int64(st.agg.perEpoch()); cp.Position != want {
		return fmt.Errorf("the checkpoint of epoch %d in %s holds version %d, want the epoch's, %d", cp.Epoch, where, cp.Position, want)
	}
	if err := adam.Restore(held, cp.Tensors, int(cp.Position)); err != nil {
		return fmt.Errorf("restore the checkpoint of epoch %d from %s: %w", cp.Epoch, where, err)
	}
	return nil
}

// rewind takes the shard back to the weights and Adam state after epoch: the initial ones for
// 0, the state before its last update for the epoch before its newest when the aggregation
// kept it (synchronous), else its checkpoint of that epoch.
func (st *state) rewind(epoch int) error {
	newest := st.vs.newest
	if epoch > st.agg.epoch() {
		return fmt.Errorf("asked to go back to epoch %d, but the shard is at epoch %d (version %d)", epoch, st.agg.epoch(), newest)
	}
	held, adam, err := st.fresh(st.init)
	if err != nil {
		return err
	}
	if u := st.agg.undo(epoch, newest); u != nil {
		if err := adam.Restore(held, u.state, u.steps); err != nil {
			return fmt.Errorf("go back to epoch %d from %d: %w", epoch, newest, err)
		}
		st.start(held, adam, epoch)
		return nil
	}
	if epoch > 0 {
		if st.ckpt == nil {
			return fmt.Errorf("asked to go back to epoch %d from %d, but it takes no checkpoints", epoch, newest)
		}
		if err := st.load(epoch, held, adam); err != nil {
			return fmt.Errorf("go back to epoch %d from %d: %w", epoch, newest, err)
		}
	}
	if st.ckpt != nil {
		fmt.Fprintf(st.ckpt.Log, "parameter server %d: back from version %d to the checkpoint of epoch %d\n", st.id, newest, epoch)
	}
	st.start(held, adam, epoch)
	return nil
}

// load reads the shard's checkpoint of epoch into held and adam.
func (st *state) load(epoch int, held []*tensor.Dense, adam *model.Adam) error {
	ctx, done, err := st.useStore()
	if err != nil {
		return err
	}
	defer done()
	cp, err := st.ckpt.Checkpoints.Load(ctx, epoch)
	if err != nil {
		return err
	}
	return st.restoreState(st.init, cp, held, adam)
}

// latestCommon returns the newest valid checkpoint of this shard whose epoch every peer has a
// valid checkpoint of too; ErrNone when this shard has none, an error naming what each has when there is
// no common epoch.
func (st *state) latestCommon(ctx context.Context) (checkpoint.State, error) {
	c := st.ckpt
	own, err := c.Checkpoints.Epochs(ctx)
	if err != nil {
		return checkpoint.State{}, err
	}
	if len(own) == 0 {
		return checkpoint.State{}, fmt.Errorf("%w in %s", checkpoint.ErrNone, c.Checkpoints.Store)
	}
	have := []string{fmt.Sprintf("%s: %v", c.Checkpoints.Store, own)}
	common := own
	for _, p := range c.Peers {
		eps, err := p.Epochs(ctx)
		if err != nil {
			return checkpoint.State{}, err
		}
		have = append(have, fmt.Sprintf("%s: %v", p.Store, eps))
		common = slices.DeleteFunc(common, func(e int) bool { return !slices.Contains(eps, e) })
	}
	for _, ep := range common {
		cp, err := c.Checkpoints.Load(ctx, ep)
		// Every shard must be able to restore ep, or they would resume at different epochs.
		for _, p := range c.Peers {
			if err == nil {
				_, err = p.Load(ctx, ep)
			}
		}
		if err == nil {
			return cp, nil
		}
		if !checkpoint.IsCorrupt(err) {
			return checkpoint.State{}, err
		}
		fmt.Fprintf(c.Log, "parameter server %d: skipping epoch %d: %v\n", st.id, ep, err)
	}
	return checkpoint.State{}, fmt.Errorf("no epoch has a valid checkpoint on every parameter server (%s); keep more checkpoints (--keep)", strings.Join(have, "; "))
}
