package dispatch

import (
	"cmp"
	"slices"
	"sync"
)

// Placement chooses where a backend runs each kind of task: in the graph server (local) or
// on the backend's workers (remote). It decides once per op and layer, at the first task of
// that kind, with the function it was made with, and counts the tasks placed each way. A nil
// Placement sends every task to the backend. It is safe for concurrent use.
type Placement struct {
	local func(*TaskRequest) bool
	mu    sync.Mutex
	kinds map[placeKey]*Placed
}

type placeKey struct {
	op    Op
	layer int
}

// Placed is the placement of one kind of task and the tasks placed so.
type Placed struct {
	Op    Op     `json:"-"`
	Task  string `json:"task"` // Op's name
	Layer int    `json:"layer"`
	Local bool   `json:"local"`
	Tasks int64  `json:"tasks"`
}

// NewPlacement returns a placement that runs a kind of task locally when local reports so of
// its first task.
func NewPlacement(local func(*TaskRequest) bool) *Placement {
	return &Placement{local: local, kinds: map[placeKey]*Placed{}}
}

// Local reports whether req runs in the graph server, and counts it.
func (p *Placement) Local(req *TaskRequest) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.kind(req)
	pl.Tasks++
	return pl.Local
}

// RunsLocally reports whether req runs in the graph server, deciding its kind as Local does,
// without counting it.
func (p *Placement) RunsLocally(req *TaskRequest) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kind(req).Local
}

// kind returns the placement of req's kind, deciding it at its first task; p.mu is held.
func (p *Placement) kind(req *TaskRequest) *Placed {
	k := placeKey{req.Op, req.Layer}
	pl := p.kinds[k]
	if pl == nil {
		pl = &Placed{Op: req.Op, Task: req.Op.String(), Layer: req.Layer, Local: p.local(req)}
		p.kinds[k] = pl
	}
	return pl
}

// Kinds returns the kinds of task placed so far, by op and layer.
func (p *Placement) Kinds() []Placed {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	out := make([]Placed, 0, len(p.kinds))
	for _, pl := range p.kinds {
		out = append(out, *pl)
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b Placed) int { return cmp.Or(cmp.Compare(a.Op, b.Op), cmp.Compare(a.Layer, b.Layer)) })
	return out
}

// Counts returns the tasks placed locally and remotely so far.
func (p *Placement) Counts() (local, remote int64) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range p.kinds {
		if pl.Local {
			local += pl.Tasks
		} else {
			remote += pl.Tasks
		}
	}
	return local, remote
}

// Placer is implemented by backends that place tasks (Placement).
type Placer interface {
	Placement() *Placement
}
