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

	"google.golang.org/protobuf/proto"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// checkpointTimeout bounds one checkpoint write or read.
const checkpointTimeout = time.Minute

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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ckpt, s.saved = &c, 0
	return nil
}

// runIdentity names the model, optimiser and data layout an Init describes and this shard's
// place, so that a checkpoint is restored only into the run that wrote it.
func (s *Shard) runIdentity(req *rpc.InitRequest) (string, error) {
	r := proto.Clone(req).(*rpc.InitRequest)
	r.GraphServer, r.Run, r.RewindTo = 0, "", nil // the run name changes between launches of one job
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("parameter server %d of %d, model %v, init %x", s.id, s.shards, req.Dims, sha256.Sum256(b)), nil
}

// restore loads into held and adam the newest checkpoint every shard has, if any (at setup),
// and returns its epoch (0 for none).
func (s *Shard) restore(req *rpc.InitRequest, held []*tensor.Dense, adam *model.Adam) (int, error) {
	c := s.ckpt
	ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
	defer cancel()
	st, err := s.latestCommon(ctx)
	if errors.Is(err, checkpoint.ErrNone) {
		fmt.Fprintf(c.Log, "parameter server %d: no checkpoint in %s: starting from epoch 1\n", s.id, c.Checkpoints.Store)
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the checkpoints in %s: %w: %w", c.Checkpoints.Store, err, errCheckpoints)
	}
	if err := s.restoreState(req, st, held, adam); err != nil {
		return 0, err
	}
	fmt.Fprintf(c.Log, "parameter server %d: resumed from the checkpoint of epoch %d in %s\n", s.id, st.Epoch, c.Checkpoints.Store)
	return st.Epoch, nil
}

// restoreState checks that st is a checkpoint of this run and loads it into held and adam.
func (s *Shard) restoreState(req *rpc.InitRequest, st checkpoint.State, held []*tensor.Dense, adam *model.Adam) error {
	where := s.ckpt.Checkpoints.Store
	id, err := s.runIdentity(req)
	if err != nil {
		return err
	}
	if st.Run != id {
		return fmt.Errorf("the checkpoint of epoch %d in %s is of another run (%s), not of this one (%s)", st.Epoch, where, st.Run, id)
	}
	if want := int64(st.Epoch) * int64(perEpoch(req)); st.Position != want {
		return fmt.Errorf("the checkpoint of epoch %d in %s holds version %d, want the epoch's, %d", st.Epoch, where, st.Position, want)
	}
	if err := adam.Restore(held, st.Tensors, int(st.Position)); err != nil {
		return fmt.Errorf("restore the checkpoint of epoch %d from %s: %w", st.Epoch, where, err)
	}
	return nil
}

// rewind takes the shard back to the weights and Adam state after epoch: the initial ones for
// 0, in synchronous mode the state before its last step for the epoch before its newest, else
// its checkpoint of that epoch (s.mu held).
func (s *Shard) rewind(epoch int) error {
	if epoch > s.epoch() {
		return fmt.Errorf("asked to go back to epoch %d, but the shard is at epoch %d (version %d)", epoch, s.epoch(), s.newest)
	}
	held, adam, err := s.fresh(s.init)
	if err != nil {
		return err
	}
	if u := s.undo; u != nil && epoch > 0 && uint64(epoch) == u.version && s.newest == u.version+1 {
		if err := adam.Restore(held, u.state, u.steps); err != nil {
			return fmt.Errorf("go back to epoch %d from %d: %w", epoch, s.newest, err)
		}
		s.start(held, adam, epoch)
		return nil
	}
	if epoch > 0 {
		if s.ckpt == nil {
			return fmt.Errorf("asked to go back to epoch %d from %d, but it takes no checkpoints", epoch, s.newest)
		}
		ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
		defer cancel()
		st, err := s.ckpt.Checkpoints.Load(ctx, epoch)
		if err == nil {
			err = s.restoreState(s.init, st, held, adam)
		}
		if err != nil {
			return fmt.Errorf("go back to epoch %d from %d: %w", epoch, s.newest, err)
		}
	}
	if s.ckpt != nil {
		fmt.Fprintf(s.ckpt.Log, "parameter server %d: back from version %d to the checkpoint of epoch %d\n", s.id, s.newest, epoch)
	}
	s.start(held, adam, epoch)
	return nil
}

// latestCommon returns the newest valid checkpoint of this shard whose epoch every peer has a
// valid checkpoint of too; ErrNone when this shard has none, an error naming what each has when there is
// no common epoch.
func (s *Shard) latestCommon(ctx context.Context) (checkpoint.State, error) {
	c := s.ckpt
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
		st, err := c.Checkpoints.Load(ctx, ep)
		// Every shard must be able to restore ep, or they would resume at different epochs.
		for _, p := range c.Peers {
			if err == nil {
				_, err = p.Load(ctx, ep)
			}
		}
		if err == nil {
			return st, nil
		}
		if !checkpoint.IsCorrupt(err) {
			return checkpoint.State{}, err
		}
		fmt.Fprintf(c.Log, "parameter server %d: skipping epoch %d: %v\n", s.id, ep, err)
	}
	return checkpoint.State{}, fmt.Errorf("no epoch has a valid checkpoint on every parameter server (%s); keep more checkpoints (--keep)", strings.Join(have, "; "))
}

// save writes the newest version and the Adam state as the checkpoint of its epoch (s.mu
// held), if they are at an epoch boundary not saved yet.
func (s *Shard) save(ctx context.Context) error {
	if s.ckpt == nil || s.init == nil || !s.boundary() || s.epoch() == s.saved {
		return nil
	}
	epoch := s.epoch()
	id, err := s.runIdentity(s.init)
	if err != nil {
		return err
	}
	tensors, steps := s.adam.Snapshot(s.versions[s.newest])
	if uint64(steps) != s.newest {
		return fmt.Errorf("paramserver: %d Adam steps at version %d", steps, s.newest)
	}
	ctx, cancel := context.WithTimeout(ctx, checkpointTimeout)
	defer cancel()
	err = s.ckpt.Checkpoints.Save(ctx, checkpoint.State{Run: id, Epoch: epoch, Position: int64(s.newest), Seed: s.init.Seed, Tensors: tensors})
	if err != nil {
		return fmt.Errorf("parameter server %d: checkpoint of epoch %d: %w: %w", s.id, epoch, err, errCheckpoints)
	}
	s.saved = epoch
	s.notify()
	return nil
}

// SaveCheckpoint writes the checkpoint of the newest version now, if checkpoints are enabled
// and it is at an epoch boundary not saved yet: what a shard does when it is told to stop. An
// asynchronous run stopped mid-epoch keeps its last checkpoint instead.
func (s *Shard) SaveCheckpoint(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.save(ctx)
}
