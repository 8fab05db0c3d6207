package graphserver

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/model"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/runpolicy"
)

// coordinator is graph server 0's bookkeeping of the whole run; loop goroutine only. It does
// no I/O: its methods return the commands to send every graph server and an error that ends
// the run, and add the reports to write (progress lines, status, warnings) to out.
type coordinator struct {
	cfg     *Config
	totals  [3]int // train, val, test sizes of the whole graph
	pins    *keeper
	out     *effects
	now     func() time.Time // the clock of the epochs' times and the cost
	start   time.Time
	reports map[int]*epochAgg
	next    int        // the next epoch to complete
	lines   []epochRow // completed epochs not yet written
	evals   map[uint32]*evalAgg
	queue   []*rpc.Evaluate // evaluations not yet started; one runs at a time
	running bool
	// progress is the last one reported (Config.Status).
	progress jobstatus.Progress
	// policy says when to evaluate and when the run ends (pkg/runpolicy); it selects by
	// validation with Config.Patience.
	policy *runpolicy.Policy
	// With Config.Export: the curve so far, the version of the kept epoch's weights (pinned,
	// with Config.Patience), and the export pass once started.
	curve []export.Point
	kept  uint64
	exp   *pendingExport
	// preempted: the run drains for a preemption (preempt.go) and reports no result.
	preempted bool
	// With Config.Cost: when the servers started, the billed calls reported so far, and the
	// cost when last priced and at the last epoch's end.
	started   time.Time
	calls     cost.Calls
	cost      float64
	epochCost float64
}

type epochAgg struct {
	from  reporters
	loss  float64
	bytes uint64
}

// reporters are the partitions whose report of an epoch or evaluation is in.
type reporters map[uint32]bool

// add records from's report.
func (r *reporters) add(from uint32) {
	if *r == nil {
		*r = reporters{}
	}
	(*r)[from] = true
}

// errRefused marks a report the coordinator does not take: the peer that sent it is told
// why, and the run goes on.
var errRefused = errors.New("report refused")

type epochRow struct {
	ev      Event
	pending bool // waiting for its evaluation
}

type evalAgg struct {
	version uint64
	from    reporters
	correct [3]uint64
	loss    [2]float64
}

// newCoordinator returns the coordinator of a run of cfg over a graph of totals (train, val,
// test), pinning the versions it evaluates in pins and adding its reports to out.
func newCoordinator(cfg *Config, totals [3]int, pins *keeper, out *effects) *coordinator {
	c := &coordinator{cfg: cfg, totals: totals, pins: pins, out: out, now: time.Now, reports: map[int]*epochAgg{}, evals: map[uint32]*evalAgg{}}
	pc := runpolicy.Config{Epochs: cfg.Epochs, EvalEvery: cfg.EvalEvery, TargetAccuracy: cfg.TargetAccuracy}
	if cfg.Patience > 0 && cfg.Weights == nil { // selection is training's
		pc.Patience = cfg.Patience
	}
	if cfg.Cost != nil {
		pc.BudgetUSD = cfg.Cost.BudgetUSD
	}
	c.policy = runpolicy.New(pc)
	c.started, c.cost, c.epochCost = cfg.Started, cfg.CostBefore, cfg.CostBefore
	if c.started.IsZero() {
		c.started = c.now()
	}
	return c
}

// begin starts the clock of the run's first epoch, first.
func (c *coordinator) begin(first int) {
	c.next, c.progress.Epoch, c.start = first, first, c.now()
}

// admitEpoch says why the coordinator cannot take r (wrapping errRefused), or nil: an epoch
// past the run's, one already summed, or a second report of it from the same partition.
func (c *coordinator) admitEpoch(r *rpc.EpochReport) error {
	e := int(r.Epoch)
	switch {
	case e >= c.cfg.Epochs:
		return fmt.Errorf("%w: epoch %d of graph server %d: the run has %d epochs", errRefused, e, r.From, c.cfg.Epochs)
	case e < c.next:
		return fmt.Errorf("%w: epoch %d of graph server %d: every partition's report of it is in", errRefused, e, r.From)
	case c.reports[e] != nil && c.reports[e].from[r.From]:
		return fmt.Errorf("%w: epoch %d of graph server %d: reported twice", errRefused, e, r.From)
	}
	return nil
}

// admitEval says why the coordinator cannot take r (wrapping errRefused), or nil: no
// evaluation r.Id running, counts of the wrong length, or a second report from the same
// partition.
func (c *coordinator) admitEval(r *rpc.EvalReport) error {
	a := c.evals[r.Id]
	switch {
	case a == nil:
		return fmt.Errorf("%w: evaluation %d of graph server %d: none is running", errRefused, r.Id, r.From)
	case len(r.Correct) != 3 || len(r.Loss) != 2:
		return fmt.Errorf("%w: evaluation %d of graph server %d: %d correct counts and %d losses, want 3 and 2", errRefused, r.Id, r.From, len(r.Correct), len(r.Loss))
	case a.from[r.From]:
		return fmt.Errorf("%w: evaluation %d of graph server %d: reported twice", errRefused, r.Id, r.From)
	}
	return nil
}

// epochDone adds a partition's epoch report, which admitEpoch took; every epoch all
// partitions reported completes. version is the weight version every shard has reached.
func (c *coordinator) epochDone(r *rpc.EpochReport, version int) ([]*rpc.CommandRequest, error) {
	a := c.reports[int(r.Epoch)]
	if a == nil {
		a = &epochAgg{}
		c.reports[int(r.Epoch)] = a
	}
	a.from.add(r.From)
	a.loss += r.Loss
	a.bytes += r.BytesSent
	c.progress.GraphServerPeakMemoryBytes = max(c.progress.GraphServerPeakMemoryBytes, int64(min(r.PeakRssBytes, math.MaxInt64)))
	c.addCalls(r.Calls, r.BilledNs, r.LocalTasks)
	var cmds []*rpc.CommandRequest
	for {
		a := c.reports[c.next]
		if a == nil || len(a.from) < c.cfg.Partitions || c.next > c.last() {
			return cmds, nil
		}
		delete(c.reports, c.next)
		now := c.now()
		e := c.next
		c.next++
		before := c.progress // the progress a failure reports
		if err := c.price(now); err != nil {
			return cmds, err
		}
		d := c.policy.Epoch(runpolicy.Report{Epoch: e + 1, Loss: a.loss, CostUSD: c.cost})
		if d.Stop == runpolicy.NotFinite {
			err := fmt.Errorf("epoch %d: the training loss is %v (AV_%d, the loss task); lower the learning rate", e+1, a.loss, c.cfg.Layers)
			before.Epoch, before.Loss, before.FailureMessage = e+1, a.loss, err.Error() // jobstatus drops the non-finite loss
			c.updateStatus(before, true)
			return cmds, err
		}
		row := epochRow{ev: Event{Event: EventEpoch, Epoch: e + 1, Loss: a.loss, Seconds: now.Sub(c.start).Seconds(), Bytes: a.bytes,
			PeakRSSBytes: c.progress.GraphServerPeakMemoryBytes}}
		c.start = now
		epochCost := c.cost - c.epochCost
		c.epochCost = c.cost
		row.ev.CostUSD, row.ev.EpochCostUSD, c.progress.EpochCostUSD = c.cost, epochCost, epochCost
		if d.OverBudget {
			c.reachedBudget()
		}
		if d.Stop != runpolicy.None {
			cmds = append(cmds, c.stop(e)) // the budget ran out in this epoch
		}
		row.ev.Calls, row.ev.BilledSeconds, row.ev.LocalTasks = c.calls.Requests, c.calls.Billed.Seconds(), c.calls.Local
		if d.Evaluate && !c.preempted {
			row.pending = true
			v := uint64(version)
			if c.cfg.Staleness.Sync() {
				v = uint64(e + 1) // the weights after epoch e's update
			}
			c.pins.pin(v)
			c.evals[uint32(e)] = &evalAgg{version: v}
			c.queue = append(c.queue, &rpc.Evaluate{Id: uint32(e), Version: v})
			cmds = c.startNext(cmds)
		}
		c.lines = append(c.lines, row)
		c.flush()
	}
}

// addCalls counts a partition's billed tensor calls and their duration, and the tensor tasks
// placement ran in its graph server, since its last report.
func (c *coordinator) addCalls(calls, billedNs, local uint64) {
	c.calls.Requests += int64(calls)
	c.calls.Billed += time.Duration(billedNs)
	c.calls.Local += int64(local)
}

// price sets the run's cost at now, with Config.Cost, into the progress.
func (c *coordinator) price(now time.Time) error {
	run := c.cfg.Cost
	if run == nil {
		return nil
	}
	b, err := run.At(now.Sub(c.started), c.calls)
	if err != nil {
		return err
	}
	c.cost = c.cfg.CostBefore + b.TotalUSD
	c.progress.CostUSD = c.cost
	return nil
}

// reachedBudget logs that the cost reached the budget, and reports the progress at once.
func (c *coordinator) reachedBudget() {
	c.out.writeLogs = append(c.out.writeLogs, fmt.Sprintf("graph server 0: the cost $%.6f reached the budget $%g", c.cost, c.cfg.Cost.BudgetUSD))
	c.updateStatus(c.progress, true)
}

// last returns the run's last epoch (0-based): the policy's.
func (c *coordinator) last() int { return c.policy.Last() - 1 }

// startNext appends to cmds the next queued evaluation unless one is running.
func (c *coordinator) startNext(cmds []*rpc.CommandRequest) []*rpc.CommandRequest {
	if c.running || len(c.queue) == 0 {
		return cmds
	}
	ev := c.queue[0]
	c.queue = c.queue[1:]
	c.running = true
	return append(cmds, &rpc.CommandRequest{Evaluate: ev})
}

// evalDone adds a partition's evaluation report (admitEval took it).
func (c *coordinator) evalDone(r *rpc.EvalReport) ([]*rpc.CommandRequest, error) {
	a := c.evals[r.Id]
	a.from.add(r.From)
	c.addCalls(r.Calls, r.BilledNs, r.LocalTasks)
	for i := range a.correct {
		a.correct[i] += r.Correct[i]
	}
	a.loss[0] += r.Loss[0]
	a.loss[1] += r.Loss[1]
	if r.Id == c.cfg.exportID() && int(r.From) < len(c.exp.files) {
		c.exp.files[r.From] = r.Files
	}
	if len(a.from) < c.cfg.Partitions {
		return nil, nil
	}
	delete(c.evals, r.Id)
	c.running = false
	c.pins.unpin(a.version)
	acc := func(i int) float64 {
		if t := c.totals[i]; t > 0 {
			return float64(a.correct[i]) / float64(t)
		}
		return 0
	}
	val := acc(1)
	e := int(r.Id)
	for i := range c.lines {
		if c.lines[i].ev.Epoch == e+1 {
			c.lines[i].ev.ValAcc, c.lines[i].pending = &val, false
		}
	}
	var cmds []*rpc.CommandRequest
	m := model.Metrics{TrainLoss: a.loss[0], ValLoss: a.loss[1], TrainAcc: acc(0), ValAcc: val, TestAcc: acc(2)}
	if r.Id == c.cfg.exportID() {
		c.exp.metrics, c.exp.done = m, true
		return nil, nil
	}
	if c.preempted {
		c.flush()
		return nil, nil
	}
	d := c.policy.Evaluated(e+1, m)
	if c.policy.Selects() && c.cfg.Export != nil {
		if kept, _ := c.policy.Best(); kept == e+1 {
			c.pins.pin(a.version) // the weights to export, unless a later epoch is kept
			if c.kept != 0 {
				c.pins.unpin(c.kept)
			}
			c.kept = a.version
		}
	}
	if d.Stop != runpolicy.None {
		cmds = append(cmds, c.stop(e))
	}
	c.flush()
	if e != c.last() {
		return c.startNext(cmds), nil
	}
	x, err := c.result(e, m, a.version)
	if x != nil {
		cmds = append(cmds, x)
	}
	return cmds, err
}

// result reports the run's result after the evaluation m of its last epoch e, at version v,
// and returns the command of the export pass, with Config.Export.
func (c *coordinator) result(e int, m model.Metrics, v uint64) (*rpc.CommandRequest, error) {
	if !c.policy.OverBudget() { // a run the budget stopped reports the cost that reached it
		if err := c.price(c.now()); err != nil {
			return nil, err
		}
	}
	res := Event{Event: EventResult, Epoch: e + 1, CostUSD: c.cost, Calls: c.calls.Requests, BilledSeconds: c.calls.Billed.Seconds(), LocalTasks: c.calls.Local}
	if c.policy.Selects() {
		res.Selected, m = c.policy.Best()
	}
	res.ValAcc, res.TrainAcc, res.TestAcc, res.TrainLoss, res.ValLoss = &m.ValAcc, m.TrainAcc, m.TestAcc, m.TrainLoss, m.ValLoss
	c.emit(res)
	if c.cfg.Export == nil {
		return nil, nil
	}
	return c.startExport(res, v), nil
}

// startExport returns the command of the export pass with the weights res reports: those of
// version v, or with Config.Patience those of the kept epoch.
func (c *coordinator) startExport(res Event, v uint64) *rpc.CommandRequest {
	if c.policy.Selects() {
		v = c.kept // pinned since it was kept, until the model is written
	} else {
		c.pins.pin(v) // until the model is written
	}
	c.exp = &pendingExport{version: v, result: res, files: make([][]*rpc.ExportedFile, c.cfg.Partitions)}
	id := c.cfg.exportID()
	c.evals[id] = &evalAgg{version: v}
	c.pins.pin(v) // the pass's own, which evalDone drops
	c.running = true
	return &rpc.CommandRequest{Evaluate: &rpc.Evaluate{Id: id, Version: v, Export: true}}
}

// takeExport returns the export pass once every partition has written its share, once, with
// the learning curve.
func (c *coordinator) takeExport() *pendingExport {
	if c.exp == nil || !c.exp.done {
		return nil
	}
	x := c.exp
	c.exp.done, x.curve = false, slices.Clone(c.curve)
	return x
}

// stop ends the run after epoch e, as the policy decided: it drops the evaluations and lines
// of later epochs and returns the command that stops every graph server.
func (c *coordinator) stop(e int) *rpc.CommandRequest {
	kept := c.queue[:0]
	for _, ev := range c.queue {
		if int(ev.Id) <= e {
			kept = append(kept, ev)
		} else {
			c.pins.unpin(ev.Version)
		}
	}
	c.queue = kept
	rows := c.lines[:0]
	for _, row := range c.lines {
		if row.ev.Epoch <= e+1 {
			rows = append(rows, row)
		}
	}
	c.lines = rows
	return &rpc.CommandRequest{Stop: true, StopAfter: uint32(e)}
}

// flush writes the completed epochs in order, each once its evaluation (if any) is in.
func (c *coordinator) flush() {
	for len(c.lines) > 0 && !c.lines[0].pending {
		c.emit(c.lines[0].ev)
		c.lines = c.lines[1:]
	}
}

// emit writes ev as a progress line, and the progress after it into the status.
func (c *coordinator) emit(ev Event) {
	if ev.Event == EventEpoch && c.cfg.Export != nil {
		c.curve = append(c.curve, export.Point{Epoch: ev.Epoch, Loss: ev.Loss, ValAcc: ev.ValAcc, Seconds: ev.Seconds})
	}
	c.report(ev)
	c.out.writeLines = append(c.out.writeLines, ev)
}

// updateStatus reports p into the job's status; a final report goes at once.
func (c *coordinator) updateStatus(p jobstatus.Progress, final bool) {
	c.out.writeStatus = append(c.out.writeStatus, statusUpdate{p, final})
}

// report writes the progress after ev into the status; the result is the final report.
func (c *coordinator) report(ev Event) {
	if ev.Event == EventExported || ev.Event == EventPreempted {
		return
	}
	p := &c.progress
	before := c.cfg.CallsBefore
	p.Epoch, p.TensorCalls, p.LocalTensorTasks = ev.Epoch, before.Requests+ev.Calls, before.Local+ev.LocalTasks
	if ev.ValAcc != nil {
		p.ValAccuracy = *ev.ValAcc
	}
	final := ev.Event == EventResult
	if final {
		p.TrainAccuracy, p.TestAccuracy = ev.TrainAcc, ev.TestAcc
	} else {
		p.Loss = ev.Loss
	}
	c.updateStatus(*p, final)
}

// checkpointed reports that every parameter server has a checkpoint of epoch e (0: none yet).
func (c *coordinator) checkpointed(e int) {
	if e == 0 || (c.progress.LastCheckpointEpoch != nil && *c.progress.LastCheckpointEpoch == e) {
		return
	}
	c.progress.LastCheckpointEpoch = &e
	c.updateStatus(c.progress, false)
}

// exported reports the export pass x done, files written: as an event, and into the job's
// status at once.
func (c *coordinator) exported(x *pendingExport, files []string) {
	acc := x.accuracy()
	p := c.progress
	p.Outputs = files
	if c.cfg.Weights != nil { // an inference reports its accuracies here, training in its result
		p.TrainAccuracy, p.ValAccuracy, p.TestAccuracy = acc.Train, acc.Val, acc.Test
	}
	c.updateStatus(p, true)
	c.emit(Event{Event: EventExported, Files: len(files), TrainAcc: acc.Train, ValAcc: &acc.Val, TestAcc: acc.Test})
}

// failure returns the progress that reports err, which stopped the run, as its failure when no
// restart can help — a parameter server lost its checkpoints (codes.DataLoss) or refuses the
// run as it stands (codes.FailedPrecondition: a rewind it cannot make), or the export failed
// (ErrExport) — and nil otherwise. The loop has ended. A run a server's failure ended (a peer
// restarted in an asynchronous run without checkpoints: codes.Aborted) is not reported: the
// operator sees that failure and names the server.
func (c *coordinator) failure(err error) *jobstatus.Progress {
	if code := status.Code(err); code != codes.DataLoss && code != codes.FailedPrecondition && !errors.Is(err, ErrExport) {
		return nil
	}
	p := c.progress
	p.FailureMessage = err.Error()
	return &p
}
