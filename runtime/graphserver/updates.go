package graphserver

import (
	"sync"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// updates sums, in asynchronous mode, the weight gradients of an epoch of each group of size
// consecutive intervals (Config.UpdateEvery), so that the group's last WU pushes them as one
// update: one weight version, pulled once, instead of one per interval. Each WU adds its
// interval's gradients when it runs, while they are still the epoch's (the interval's next
// epochs overwrite them); the other WUs of the group push nothing.
type updates struct {
	size, intervals int
	params          [][2]int // the shape of every parameter tensor

	mu   sync.Mutex
	open map[groupEpoch]*groupSum
	free [][]*tensor.Dense // sums pushed, for reuse
}

// groupEpoch names the sum of a group's gradients of an epoch.
type groupEpoch struct{ group, epoch int }

// groupSum is the sum of the gradients of the group's intervals added so far.
type groupSum struct {
	grads []*tensor.Dense
	added int
}

// newUpdates returns the sums of groups of size of intervals, or nil when every interval
// pushes its own gradients (size 1).
func newUpdates(size, intervals int, params [][2]int) *updates {
	if size <= 1 {
		return nil
	}
	return &updates{size: size, intervals: intervals, params: params, open: map[groupEpoch]*groupSum{}}
}

// add adds the gradients of WU task t (grad(i): of parameter tensor i) to its group's sum of
// the epoch. It returns the sum once every interval of the group has added its own; the
// caller pushes it and hands it back with release.
func (u *updates) add(t pipeline.Task, grad func(i int) *tensor.Dense) []*tensor.Dense {
	g := t.Interval / u.size
	key := groupEpoch{g, t.Epoch}
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.open[key]
	if s == nil {
		s = &groupSum{grads: u.take()}
		u.open[key] = s
		for i, d := range s.grads {
			copy(d.Data, grad(i).Data)
		}
	} else {
		for i, d := range s.grads {
			tensor.AddInPlace(d, grad(i))
		}
	}
	if s.added++; s.added < min(u.size, u.intervals-g*u.size) {
		return nil
	}
	delete(u.open, key)
	return s.grads
}

// take returns a set of buffers shaped like the parameters, reused if one was released.
func (u *updates) take() []*tensor.Dense {
	if n := len(u.free); n > 0 {
		w := u.free[n-1]
		u.free = u.free[:n-1]
		return w
	}
	w := make([]*tensor.Dense, len(u.params))
	for i, p := range u.params {
		w[i] = tensor.NewDense(p[0], p[1])
	}
	return w
}

// release hands back a sum add returned, once pushed.
func (u *updates) release(w []*tensor.Dense) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.free = append(u.free, w)
}
