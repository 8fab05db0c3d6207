package paramserver

import (
	"fmt"

	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// event is something that happened, handed to the loop; the types below are all there are.
// A call's event carries the channel its answer goes on (buffered: the loop never waits).
type event interface{ isEvent() }

// asked is a call's event: what it asks, and the channel its answer goes on.
type asked[Q, A any] struct {
	req   Q
	reply chan<- answer[A]
}

type (
	// initCalled: a graph server's Init.
	initCalled = asked[*rpc.InitRequest, *rpc.InitReply]
	// joinAsked: the Init of graph server req, told to wait, asks again whether every graph
	// server has joined.
	joinAsked = asked[int, *rpc.InitReply]
	// pullAsked: a Pull, or one told to wait asking again (then without its Keep report).
	pullAsked = asked[*rpc.PullRequest, *rpc.PullReply]
	// pushAsked: a Push.
	pushAsked = asked[*rpc.PushRequest, *rpc.PushReply]
	// watchAsked: the Watch stream of graph server req asks for the newest version and
	// checkpoint.
	watchAsked = asked[uint32, *rpc.VersionUpdate]
	// saveAsked: SaveCheckpoint.
	saveAsked = asked[struct{}, struct{}]
	// inspected: the accessors and metrics read the shard.
	inspected = asked[struct{}, view]
)

type (
	// saveEnded: a checkpoint's write ended, with err if it failed.
	saveEnded struct {
		job *saveJob
		err error
	}
	// limitSet, advertised, checkpointsEnabled: the shard's settings, before serving.
	limitSet           struct{ n int }
	advertised         struct{ addr string }
	checkpointsEnabled struct{ c *Checkpointing }
	// preemptSet: Preempt, which the Watch streams tell the graph servers.
	preemptSet struct{}
)

func (asked[Q, A]) isEvent()        {}
func (saveEnded) isEvent()          {}
func (limitSet) isEvent()           {}
func (advertised) isEvent()         {}
func (checkpointsEnabled) isEvent() {}
func (preemptSet) isEvent()         {}

// answer is the loop's answer to a call: its result or error; or wait, closed once the
// state moves, for a call to ask again then; and landed for a call that waits for a
// checkpoint being written outside the loop.
type answer[T any] struct {
	v      T
	err    error
	wait   <-chan struct{}
	landed <-chan saveResult
}

// view is what the accessors and metrics read: the newest version, the versions held, the
// version of the newest checkpoint and the held layers.
type view struct {
	newest, saved uint64
	held          []uint64
	layers        []int
}

// run is the loop: it steps on every event until the shard closes, and never waits for I/O
// but the checkpoint reads of a (re)start, which no training goes on beside.
func (s *Shard) run() error {
	for {
		select {
		case ev := <-s.events:
			s.st.step(ev)
		case <-s.ctx.Done():
			return nil
		}
	}
}

// step does what the shard does about ev.
func (st *state) step(ev event) {
	switch ev := ev.(type) {
	case initCalled:
		ev.reply <- st.initCalled(ev.req)
	case joinAsked:
		ev.reply <- st.join(ev.req)
	case pullAsked:
		ev.reply <- st.pull(ev.req)
	case pushAsked:
		ev.reply <- st.push(ev.req)
	case watchAsked:
		ev.reply <- st.watch(ev.req)
	case saveAsked:
		ev.reply <- answer[struct{}]{landed: st.checkpoint(false)}
	case saveEnded:
		st.landed(ev.job, ev.err)
	case limitSet:
		st.maxMessage = ev.n
	case advertised:
		st.advertise = ev.addr
	case checkpointsEnabled:
		st.ckpt, st.saved = ev.c, 0
	case inspected:
		ev.reply <- st.view()
	case preemptSet:
		st.preempt = true
		st.notify()
	default:
		panic(fmt.Sprintf("paramserver: unknown event %T", ev))
	}
}
