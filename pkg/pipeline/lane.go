package pipeline

// side names one of an interval's two lanes.
type side uint8

const (
	head side = iota // the forward pass: steps [0, split) of an epoch
	tail             // the backward pass and WU: steps [split, len) of an epoch
)

// String names the lane in error messages.
func (sd side) String() string {
	if sd == tail {
		return "tail (backward pass)"
	}
	return "head"
}

// lane is one lane of an interval: the epoch it is in, the index in Sequence of its next task,
// whether that task is running, and the weight version its epoch pinned (-1: none).
type lane struct {
	epoch   int
	step    int
	running bool
	pin     int
}

// ivState is an interval's progress in its two lanes. The head runs steps [0, split) of its
// epoch and then waits at split ("parked") until it may move to the next epoch: once the tail
// has finished the head's epoch (lead 0), or has reached it (lead 1, Config.TailOverlap). The
// tail runs steps [split, len) of the interval's lowest unfinished epoch, once the head has
// left them behind. With lead 0 the lanes are always in one epoch and take turns: one task at a
// time, in Sequence order.
//
// The head's pin is the version its epoch's AV_0 pinned (-1 before it); the tail's pin is the
// version of its epoch while the head is an epoch ahead (-1 otherwise, when the head's pin is
// the tail's too).
type ivState struct {
	lanes   [2]lane // indexed by side
	prevPin int     // the version the previous epoch pinned, -1 if none
}

// newIvState returns an interval at the start of epoch first.
func newIvState(first, split int) ivState {
	return ivState{lanes: [2]lane{head: {epoch: first, pin: -1}, tail: {epoch: first, step: split, pin: -1}}, prevPin: -1}
}

// sideOf returns the lane step si runs in.
func (s *Scheduler) sideOf(si int) side {
	if si >= s.split {
		return tail
	}
	return head
}

// cmpPos compares the position (epoch, si) with the next task of interval g's lane of si.
func (s *Scheduler) cmpPos(g, epoch, si int) int {
	ln := &s.iv[g].lanes[s.sideOf(si)]
	if epoch != ln.epoch {
		return epoch - ln.epoch
	}
	return si - ln.step
}

// task returns interval g's next task in lane sd.
func (s *Scheduler) task(g int, sd side) Task {
	ln := &s.iv[g].lanes[sd]
	sp := &s.steps[ln.step]
	return Task{Partition: s.ids[g].Partition, Interval: s.ids[g].Interval, Epoch: ln.epoch, Layer: sp.layer, Kind: sp.kind}
}

// tailReached reports whether the head has left the tail's next task behind.
func (s *Scheduler) tailReached(g int) bool {
	h, t := &s.iv[g].lanes[head], &s.iv[g].lanes[tail]
	return h.epoch > t.epoch || h.step == s.split
}

// unpark moves interval g's parked head to its next epoch once the tail allows it: once the
// tail has finished the head's epoch, or with lead 1 has reached it (the tail then keeps the
// epoch's pin).
func (s *Scheduler) unpark(g int) {
	st := &s.iv[g]
	h, t := &st.lanes[head], &st.lanes[tail]
	if h.step != s.split || t.epoch < h.epoch+1-s.lead {
		return
	}
	if t.epoch == h.epoch {
		t.pin = h.pin
	}
	st.prevPin, h.pin = h.pin, -1
	h.epoch++
	h.step = 0
}
