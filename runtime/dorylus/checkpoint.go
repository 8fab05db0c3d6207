package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
	"github.com/dorylus-gnn/dorylus/pkg/graph"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// saveTimeout bounds the checkpoint written after a stop signal, whose context is already done.
const saveTimeout = 30 * time.Second

// checkpointOptions are the checkpoint flags of `dorylus train`.
type checkpointOptions struct {
	location string
	every    int
	keep     int
	resume   bool
	// Set by prepare (in a server, by the run config): the run the checkpoints belong to and
	// its own folder of location.
	runID string
	run   string
}

// addFlags registers the checkpoint flags.
func (c *checkpointOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.location, "checkpoint-dir", "", "save checkpoints (weights, optimizer state, epoch, seed) to this folder or s3://bucket/prefix: every --checkpoint-every epochs, after the last epoch, and on SIGTERM or Ctrl-C (with --graph-servers: by each parameter server, in subfolder shard-N; with a --staleness bound at the epoch boundaries where the pipeline drains, every --checkpoint-every epochs, and after the last epoch)")
	f.IntVar(&c.every, "checkpoint-every", 10, "with --checkpoint-dir: epochs between checkpoints")
	f.IntVar(&c.keep, "keep", 3, "with --checkpoint-dir: checkpoints kept (0: all)")
	f.BoolVar(&c.resume, "resume", false, "with --checkpoint-dir: continue the run whose checkpoints it holds from its latest complete one (a fresh start if it holds none); "+
		"without --resume a run starts only in a --checkpoint-dir that holds no other run's checkpoints. Each run keeps its checkpoints in its own folder, run-ID")
}

func (c *checkpointOptions) validate(o trainOptions) error {
	if c.location == "" {
		if c.resume {
			return errors.New("--resume needs --checkpoint-dir")
		}
		return nil
	}
	if err := errors.Join(jobconfig.Limits.CheckpointInterval.Check("--checkpoint-every", c.every),
		zeroOr(jobconfig.Limits.Epochs, "--keep", c.keep, "all")); err != nil {
		return err
	}
	switch {
	case o.runs > 1:
		return fmt.Errorf("--checkpoint-dir with --runs %d: checkpoint one run at a time", o.runs)
	case o.patience > 0:
		return errors.New("--checkpoint-dir with --patience: the best-validation selection is not checkpointed")
	}
	return nil
}

// prepare settles the run this invocation's checkpoints belong to: a fresh run with a new id in
// its own folder of the location, refused when the location holds another run's checkpoints;
// with --resume the one run whose checkpoints it holds (a fresh one if it holds none).
func (c *checkpointOptions) prepare(ctx context.Context) error {
	if c.location == "" {
		return nil
	}
	root, err := checkpoint.Open(ctx, c.location, objstore.Config{}) // S3 settings from the SDK's environment
	if err != nil {
		return fmt.Errorf("--checkpoint-dir: %w", err)
	}
	runs, err := runsIn(ctx, root)
	if err != nil {
		return fmt.Errorf("--checkpoint-dir: %w", err)
	}
	switch {
	case len(runs) == 0:
		id, err := newRunID()
		if err != nil {
			return err
		}
		c.runID, c.run = id, strings.TrimSuffix(c.location, "/")+"/"+jobconfig.RunFolder(id)
	case !c.resume:
		return fmt.Errorf("--checkpoint-dir %s holds the checkpoints of %s: pass --resume to continue it, or another --checkpoint-dir to start over", c.location, runs[0])
	case len(runs) > 1:
		return fmt.Errorf("--checkpoint-dir %s holds the checkpoints of %d runs (%s): --resume continues a run only in a --checkpoint-dir holding it alone (its run-ID folder)", c.location, len(runs), joinRuns(runs))
	case runs[0].id == "":
		c.run = c.location
	default:
		c.runID, c.run = runs[0].id, strings.TrimSuffix(c.location, "/")+"/"+jobconfig.RunFolder(runs[0].id)
	}
	return nil
}

// foundRun is a run whose checkpoints a location holds; id "" for checkpoints written flat in it,
// before runs had ids.
type foundRun struct {
	id     string
	epochs []int // of its own checkpoints, newest first; none for a run of parameter servers
}

func (r foundRun) String() string {
	what := "run " + r.id
	if r.id == "" {
		what = "an earlier run"
	}
	if len(r.epochs) > 0 {
		what += fmt.Sprintf(" (epochs %v)", r.epochs)
	}
	return what
}

func joinRuns(runs []foundRun) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}

// runsIn returns the runs whose checkpoints root holds: one per run-ID folder, and one without an
// id for checkpoints (or parameter-server shard-N folders) directly in it.
func runsIn(ctx context.Context, root checkpoint.Store) ([]foundRun, error) {
	folders, err := root.Folders(ctx)
	if err != nil {
		return nil, err
	}
	var runs []foundRun
	flat := false
	for _, f := range folders {
		if id, ok := strings.CutPrefix(f, jobconfig.RunFolder("")); ok && id != "" {
			eps, err := checkpoint.Checkpoints{Store: root.Sub(f)}.Epochs(ctx)
			if err != nil {
				return nil, err
			}
			runs = append(runs, foundRun{id: id, epochs: eps})
		}
		flat = flat || strings.HasPrefix(f, "shard-")
	}
	eps, err := checkpoint.Checkpoints{Store: root}.Epochs(ctx)
	if err != nil {
		return nil, err
	}
	if flat || len(eps) > 0 {
		runs = append(runs, foundRun{epochs: eps})
	}
	return runs, nil
}

// newRunID returns a fresh run id: the time, then random hex.
func newRunID() (string, error) {
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("draw a run id: %w", err)
	}
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b), nil
}

// runCheckpoints saves and restores the checkpoints of one training run.
type runCheckpoints struct {
	cp      checkpoint.Checkpoints
	run     string // the run's identity: model, hyper-parameters, data and seed
	every   int
	log     io.Writer
	seconds float64 // time spent saving
	saved   int
}

// openCheckpoints returns the checkpoints of the run of seed on d, or nil without
// --checkpoint-dir. S3 settings come from the SDK's environment.
func openCheckpoints(ctx context.Context, o trainOptions, d *graph.Dataset, seed uint64, log io.Writer) (*runCheckpoints, error) {
	c := o.checkpoint
	if c.location == "" {
		return nil, nil
	}
	st, err := checkpoint.Open(ctx, c.run, objstore.Config{})
	if err != nil {
		return nil, err
	}
	run := fmt.Sprintf("%s layers=%d hidden=%d heads=%d dropout=%g lr=%g weight-decay=%g seed=%d dataset=%s nodes=%d edges=%d features=%d classes=%d",
		o.model, o.layers, o.hidden, o.heads, o.dropout, o.lr, o.weightDecay, seed, d.Name, d.NumNodes(), d.Adj.NNZ(), d.NumFeatures(), d.NumClasses)
	return &runCheckpoints{cp: checkpoint.Checkpoints{Store: st, Keep: c.keep, RunID: c.runID}, run: run, every: c.every, log: log}, nil
}

// resume restores tr from the latest complete checkpoint and returns the epochs it had
// completed; 0 when there is no checkpoint yet. A checkpoint of another run is an error.
func (r *runCheckpoints) resume(ctx context.Context, tr model.Learner) (int, error) {
	s, skipped, err := r.cp.Latest(ctx)
	for _, e := range skipped {
		fmt.Fprintf(r.log, "skipping a checkpoint: %v\n", e)
	}
	if errors.Is(err, checkpoint.ErrNone) {
		fmt.Fprintf(r.log, "no checkpoint in %s: starting from epoch 1\n", r.cp.Store)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if s.Run != r.run {
		return 0, fmt.Errorf("the checkpoint of epoch %d in %s is of another run (%q), not of this one (%q)", s.Epoch, r.cp.Store, s.Run, r.run)
	}
	if err := tr.Restore(s.Tensors, int(s.Position)); err != nil {
		return 0, fmt.Errorf("restore the checkpoint of epoch %d from %s: %w", s.Epoch, r.cp.Store, err)
	}
	fmt.Fprintf(r.log, "resumed from the checkpoint of epoch %d in %s\n", s.Epoch, r.cp.Store)
	return s.Epoch, nil
}

// save writes the checkpoint after epoch epochs. After a stop signal ctx is done, so it writes
// under a fresh deadline.
func (r *runCheckpoints) save(ctx context.Context, tr model.Learner, seed uint64, epochs int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	t0 := time.Now()
	tensors, steps := tr.Snapshot()
	err := r.cp.Save(ctx, checkpoint.State{Run: r.run, Epoch: epochs, Position: int64(steps), Seed: seed, Tensors: tensors})
	r.seconds += time.Since(t0).Seconds()
	if err != nil {
		return fmt.Errorf("checkpoint after epoch %d: %w", epochs, err)
	}
	r.saved++
	return nil
}

// due reports whether a checkpoint is due after epochs of last.
func (r *runCheckpoints) due(epochs, last int) bool {
	return epochs%r.every == 0 || epochs == last
}
