package paramserver

import (
	"google.golang.org/grpc/codes"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// aggregation is how a run turns the gradients its contributions push into updates (weight
// versions): synchronous sums an epoch's and makes one update, asynchronous makes one of
// each push. Versions count updates in both: the weights after epoch e are version
// e·perEpoch().
type aggregation interface {
	// perEpoch returns the updates of one epoch.
	perEpoch() uint64
	// epoch returns the lowest epoch whose updates are not all made.
	epoch() int
	// boundary reports whether the updates made are every update of the epochs before
	// epoch() and none of a later one.
	boundary() bool
	// restartable reports whether the run's graph servers may restart without checkpoints.
	restartable() bool
	// take checks that task t may push gradients computed at version (newest: the newest
	// version) and takes them, decoded by decode into the given buffers (nil: views of the
	// request's data); it returns the gradient of the update they complete, nil while the
	// epoch's other contributions have not pushed.
	take(who string, t *rpc.TaskRef, version, newest uint64, decode func(into []*tensor.Dense) ([]*tensor.Dense, error)) ([]*tensor.Dense, error)
	// reset forgets the gradients of unfinished epochs: the weights are those after epoch.
	reset(epoch int)
	// stepping is told the weights (of version) and the Adam state an update is about to
	// change.
	stepping(version uint64, w []*tensor.Dense, adam *model.Adam)
	// undo returns the weights and Adam state after epoch when they are those before the
	// newest update, kept by stepping; nil when they are not kept.
	undo(epoch int, newest uint64) *lastStep
}

// newAggregation returns the aggregation of the run req describes, of staleness st (req's);
// alloc makes a set of buffers shaped like the held layers.
func newAggregation(id int, st jobconfig.Staleness, req *rpc.InitRequest, alloc func() []*tensor.Dense) aggregation {
	n := int(req.Contributions)
	if st.Sync() {
		return &synchronous{id: id, contributions: n, perServer: n / int(req.GraphServers), alloc: alloc,
			pending: map[int][]*tensor.Dense{}, have: map[int]bool{}}
	}
	return &asynchronous{id: id, contributions: n, pushes: map[int]int{}}
}

// synchronous makes one update per epoch: it waits for the gradients of every interval of
// every graph server and sums them in the order of (partition, interval), so that a run
// equals the single-process trainer up to float summation order.
type synchronous struct {
	id                       int
	contributions, perServer int
	alloc                    func() []*tensor.Dense
	// the current epoch's gradients, one set per contribution (slot partition·perServer +
	// interval), made when the slot first pushes, and their sum
	pending  map[int][]*tensor.Dense
	have     map[int]bool
	received int
	sum      []*tensor.Dense
	done     int       // epochs complete: the newest version
	last     *lastStep // the state before the last update (nil before the first)
}

func (a *synchronous) perEpoch() uint64  { return 1 }
func (a *synchronous) epoch() int        { return a.done }
func (a *synchronous) boundary() bool    { return true }
func (a *synchronous) restartable() bool { return true }

func (a *synchronous) take(who string, t *rpc.TaskRef, version, newest uint64, decode func([]*tensor.Dense) ([]*tensor.Dense, error)) ([]*tensor.Dense, error) {
	slot := int(t.Partition)*a.perServer + int(t.Interval)
	switch {
	case int(t.Interval) >= a.perServer || slot >= a.contributions:
		return nil, refused(a.id, codes.InvalidArgument, "%s is not one of the %d intervals per server", who, a.perServer)
	case version != newest || uint64(t.Epoch) != newest:
		return nil, refused(a.id, codes.FailedPrecondition, "%s pushed gradients of version %d in synchronous mode at version %d", who, version, newest)
	case a.have[slot]:
		return nil, refused(a.id, codes.AlreadyExists, "%s pushed twice", who)
	}
	if a.pending[slot] == nil {
		a.pending[slot] = a.alloc()
	}
	if _, err := decode(a.pending[slot]); err != nil { // kept until every contribution has pushed
		return nil, err
	}
	a.have[slot] = true
	if a.received++; a.received < a.contributions {
		return nil, nil
	}
	if a.sum == nil {
		a.sum = a.alloc()
	}
	for i := range a.sum {
		a.sum[i].Zero()
		for slot := range a.contributions {
			tensor.AddInPlace(a.sum[i], a.pending[slot][i])
		}
	}
	a.reset(a.done + 1)
	return a.sum, nil
}

func (a *synchronous) reset(epoch int) {
	clear(a.have)
	a.received, a.done = 0, epoch
}

// stepping copies w and the Adam state into a.last: a graph server killed between its
// pushes to two shards leaves one shard an epoch ahead of the other, and with it that shard
// goes back one epoch without a checkpoint.
func (a *synchronous) stepping(version uint64, w []*tensor.Dense, adam *model.Adam) {
	st, steps := adam.Snapshot(w)
	if a.last == nil {
		a.last = &lastStep{state: make(map[string][]float32, len(st))}
	}
	for k, v := range st {
		a.last.state[k] = append(a.last.state[k][:0], v...)
	}
	a.last.version, a.last.steps = version, steps
}

func (a *synchronous) undo(epoch int, newest uint64) *lastStep {
	if u := a.last; u != nil && epoch > 0 && uint64(epoch) == u.version && newest == u.version+1 {
		return u
	}
	return nil
}

// lastStep is the weights and Adam state of version, before the next update.
type lastStep struct {
	version uint64
	state   map[string][]float32 // as model.Adam.Snapshot, copied
	steps   int
}

// asynchronous applies each pushed gradient as it arrives, to the newest weights. Since a
// pushed gradient is an interval's share of the loss gradient and Adam normalises step
// sizes, the learning rate and the weight decay are divided by perEpoch(), the contributions
// of an epoch, so that an epoch's updates move the weights about as far as one synchronous
// step.
type asynchronous struct {
	id, contributions int
	// the lowest epoch some contribution has not pushed, and the pushes of that epoch and
	// later ones; none means the weights are at that epoch's boundary
	done   int
	pushes map[int]int
}

func (a *asynchronous) perEpoch() uint64                              { return uint64(a.contributions) }
func (a *asynchronous) epoch() int                                    { return a.done }
func (a *asynchronous) boundary() bool                                { return len(a.pushes) == 0 }
func (a *asynchronous) restartable() bool                             { return false }
func (a *asynchronous) stepping(uint64, []*tensor.Dense, *model.Adam) {}
func (a *asynchronous) undo(int, uint64) *lastStep                    { return nil }

func (a *asynchronous) take(who string, t *rpc.TaskRef, _, _ uint64, decode func([]*tensor.Dense) ([]*tensor.Dense, error)) ([]*tensor.Dense, error) {
	e := int(t.Epoch)
	if e < a.done || a.pushes[e] >= a.contributions {
		return nil, refused(a.id, codes.FailedPrecondition, "%s pushed gradients of an epoch every contribution has pushed", who)
	}
	grads, err := decode(nil)
	if err != nil {
		return nil, err
	}
	a.pushes[e]++
	for ; a.pushes[a.done] == a.contributions; a.done++ {
		delete(a.pushes, a.done)
	}
	return grads, nil
}

func (a *asynchronous) reset(epoch int) {
	a.done = epoch
	clear(a.pushes)
}
