package graphserver

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// carried writes the reports the coordinator added to out, as graph server 0's driver does,
// and empties out.
func carried(t testing.TB, r *reportWriter, out *effects) {
	t.Helper()
	if err := r.write(out); err != nil {
		t.Fatal(err)
	}
	out.reset()
}

// stepLoop returns the loop of graph server p of 2, one interval each, training a 2-layer GCN
// synchronously for one epoch and exporting it, with one parameter server holding both
// tensors; each epoch report measures 10 calls of 1 s, 3 tensor tasks run locally, 100 bytes
// sent and 1 MiB of memory.
func stepLoop(p int) *loop { return stepLoopOf(p, 1, jobconfig.Sync, &Export{}) }

// stepLoopOf is stepLoop for epochs epochs of staleness s, exporting with x (nil: no export).
func stepLoopOf(p, epochs int, s jobconfig.Staleness, x *Export) *loop {
	cfg := &Config{Partition: p, Partitions: 2, Intervals: 1, Layers: 2, Epochs: epochs, Staleness: s, EvalEvery: 1, Export: x}
	pipe := pipeline.Config{Partitions: 2, Intervals: 1, Layers: 2, Epochs: epochs, Staleness: s, Gradients: cfg.gradients(),
		Local: []int{p}, ExternalVersions: true}
	sh := &shards{self: p, list: []*shard{{layers: []int{0, 1}}}}
	measure := func() usage {
		return usage{calls: cost.Calls{Requests: 10, Billed: time.Second, Local: 3}, sent: 100, peakRSS: 1 << 20}
	}
	keep := newKeeper()
	return newLoop(cfg, pipe, [3]int{4, 4, 4}, keep, &weightCache{keep: keep, byVersion: map[int]*weightSet{}}, sh, measure)
}

// describe lists out, one line an effect, in the order the driver carries the kinds out.
func describe(t *testing.T, out effects) []string {
	var d []string
	add := func(format string, a ...any) { d = append(d, fmt.Sprintf(format, a...)) }
	for _, v := range out.answers {
		add("verdict %v", v.err)
	}
	for _, s := range out.writeLogs {
		add("log %s", s)
	}
	for _, u := range out.writeStatus {
		p := u.progress
		add("status epoch %d loss %g val %g test %g outputs %v final %v", p.Epoch, p.Loss, p.ValAccuracy, p.TestAccuracy, p.Outputs, u.final)
	}
	for _, ev := range out.writeLines {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		add("line %s", b)
	}
	for _, r := range out.sendProgress {
		for _, d := range r.Done {
			add("progress from %d: p%d/i%d e%d %v", r.From, d.Partition, d.Interval, d.Epoch, pipeline.Kind(d.Kind))
		}
	}
	for _, r := range out.sendReports {
		add("report from %d: epoch %d loss %g bytes %d calls %d billed %d ns local %d peak %d", r.From, r.Epoch, r.Loss, r.BytesSent, r.Calls, r.BilledNs, r.LocalTasks, r.PeakRssBytes)
	}
	evaluation := func(ev *rpc.Evaluate) string {
		return fmt.Sprintf("evaluation %d at version %d export %v", ev.Id, ev.Version, ev.Export)
	}
	for _, r := range out.sendCommands {
		if r.Stop {
			add("command stop after %d", r.StopAfter)
		}
		if r.Evaluate != nil {
			add("command %s", evaluation(r.Evaluate))
		}
	}
	for _, ev := range out.runPasses {
		add("run %s", evaluation(ev))
	}
	if x := out.writeExport; x != nil {
		var files []string
		for _, fs := range x.files {
			for _, f := range fs {
				files = append(files, f.Name)
			}
		}
		var curve []string
		for _, p := range x.curve {
			curve = append(curve, fmt.Sprintf("epoch %d loss %g val %g seconds %g", p.Epoch, p.Loss, *p.ValAcc, p.Seconds))
		}
		add("write model at version %d: files %v, curve %v, %s epoch %d", x.version, files, curve, x.result.Event, x.result.Epoch)
	}
	for _, st := range out.runTasks {
		add("start %v", st.Task)
	}
	return d
}

// TestStepDrivesAnEpoch steps graph server 0 (the coordinator) of two, with no goroutine or
// socket, through a whole synchronous epoch of a 2-layer GCN, its evaluation and its export:
// every local task done, the peer's rows and progress, the version its push made, both
// partitions' epoch and evaluation reports. Each step's effects are exactly what the server
// must do about that event: the tasks that became ready (the next of the interval, or the
// Gather the peer's rows let start), the WU's progress to the peer, the verdicts on the peer's
// reports, the evaluation and then the export pass (to every peer and here), the epoch's line
// (its time by the coordinator's clock, both partitions' loss and bytes) once its evaluation is
// in, the result, the export's write with every partition's files and the curve, and the
// exported line; nothing else is sent, written or started.
func TestStepDrivesAnEpoch(t *testing.T) {
	l := stepLoop(0)
	clock := time.Unix(1000, 0)
	l.coord.now = func() time.Time { return clock }
	local := func(kind pipeline.Kind, layer int) pipeline.Task {
		return pipeline.Task{Partition: 0, Kind: kind, Layer: layer}
	}
	peer := func(kind pipeline.Kind, layer int) pipeline.Task {
		return pipeline.Task{Partition: 1, Kind: kind, Layer: layer}
	}
	done := func(kind pipeline.Kind, layer int) event { return taskDone{task: local(kind, layer)} }
	verdict := make(chan error, 1) // the loop only names it in its effects
	files := func(name string) []*rpc.ExportedFile { return []*rpc.ExportedFile{{Name: name, Bytes: 1}} }
	steps := []struct {
		ev    event
		tick  time.Duration // the clock moves before the step
		wants []string
	}{
		{trainFrom{0}, 0, []string{"start p0/i0 e0 AV_0"}},
		{done(pipeline.KindAV, 0), 0, []string{"start p0/i0 e0 SC_0"}},
		{done(pipeline.KindSC, 0), 0, nil},
		{rowsArrived{peer(pipeline.KindSC, 0)}, 0, []string{"start p0/i0 e0 GA_0"}},
		{done(pipeline.KindGA, 0), 0, []string{"start p0/i0 e0 AV_1"}},
		{done(pipeline.KindAV, 1), 0, []string{"start p0/i0 e0 SC_1"}},
		{done(pipeline.KindSC, 1), 0, nil},
		{rowsArrived{peer(pipeline.KindSC, 1)}, 0, []string{"start p0/i0 e0 GA_1"}},
		{done(pipeline.KindGA, 1), 0, []string{"start p0/i0 e0 AV_2"}},
		{taskDone{task: local(pipeline.KindAV, 2), loss: 0.75}, 0, nil},
		{rowsArrived{peer(pipeline.KindAV, 2)}, 0, []string{"start p0/i0 e0 ∇GA_1"}},
		{done(pipeline.KindBackGA, 1), 0, []string{"start p0/i0 e0 ∇SC_1"}},
		{done(pipeline.KindBackSC, 1), 0, []string{"start p0/i0 e0 ∇AV_1"}},
		{done(pipeline.KindBackAV, 1), 0, nil},
		{rowsArrived{peer(pipeline.KindBackAV, 1)}, 0, []string{"start p0/i0 e0 ∇GA_0"}},
		{done(pipeline.KindBackGA, 0), 0, []string{"start p0/i0 e0 ∇SC_0"}},
		{done(pipeline.KindBackSC, 0), 0, []string{"start p0/i0 e0 ∇AV_0"}},
		{done(pipeline.KindBackAV, 0), 0, []string{"start p0/i0 e0 WU"}},
		{shardMoved{shard: 0, version: 1}, 0, nil},
		{done(pipeline.KindWU, 0), 0, []string{"progress from 0: p0/i0 e0 WU"}},
		{progressed{[]pipeline.Task{peer(pipeline.KindWU, 0)}}, 0, nil},
		{epochReported{rep: &rpc.EpochReport{From: 1, Loss: 0.25, BytesSent: 50}, verdict: verdict}, 1500 * time.Millisecond,
			[]string{"verdict <nil>", "command evaluation 0 at version 1 export false", "run evaluation 0 at version 1 export false"}},
		{evalFinished{1}, 0, nil},
		{evalReported{rep: &rpc.EvalReport{From: 0, Correct: []uint64{2, 1, 1}, Loss: []float64{0.5, 0.25}}}, 0, nil},
		{evalReported{rep: &rpc.EvalReport{From: 1, Correct: []uint64{1, 1, 0}, Loss: []float64{0.25, 0.5}}, verdict: verdict}, 0, []string{
			"verdict <nil>",
			"status epoch 1 loss 1 val 0.5 test 0 outputs [] final false",
			"status epoch 1 loss 1 val 0.5 test 0.25 outputs [] final true",
			`line {"event":"epoch","epoch":1,"loss":1,"val_accuracy":0.5,"seconds":1.5,"bytes":150,"peak_rss_bytes":1048576,"calls":10,"billed_seconds":1,"local_tasks":3}`,
			`line {"event":"result","epoch":1,"val_accuracy":0.5,"calls":10,"billed_seconds":1,"local_tasks":3,"train_accuracy":0.75,"test_accuracy":0.25,"train_loss":0.75,"val_loss":0.75}`,
			"command evaluation 1 at version 1 export true", "run evaluation 1 at version 1 export true"}},
		{evalFinished{1}, 0, nil},
		{evalReported{rep: &rpc.EvalReport{From: 0, Id: 1, Correct: []uint64{2, 1, 1}, Loss: []float64{0.5, 0.25}, Files: files("p0")}}, 0, nil},
		{evalReported{rep: &rpc.EvalReport{From: 1, Id: 1, Correct: []uint64{1, 1, 0}, Loss: []float64{0.25, 0.5}, Files: files("p1")}, verdict: verdict}, 0, []string{
			"verdict <nil>",
			"write model at version 1: files [p0 p1], curve [epoch 1 loss 1 val 0.5 seconds 1.5], result epoch 1"}},
		{exportWritten{x: nil, files: []string{"model.safetensors", "model.json"}}, 0, []string{
			"status epoch 1 loss 1 val 0.5 test 0.25 outputs [model.safetensors model.json] final true",
			`line {"event":"exported","epoch":0,"val_accuracy":0.5,"train_accuracy":0.75,"test_accuracy":0.25,"files":2}`}},
	}
	var x *pendingExport
	for i, s := range steps {
		clock = clock.Add(s.tick)
		if ev, ok := s.ev.(exportWritten); ok {
			ev.x = x
			s.ev = ev
		}
		out, err := l.step(s.ev)
		if err != nil {
			t.Fatalf("step %d (%T %+v): %v", i, s.ev, s.ev, err)
		}
		if out.writeExport != nil {
			x = out.writeExport
		}
		got := describe(t, out)
		if !slices.Equal(got, s.wants) {
			t.Errorf("step %d (%T %+v): effects\n\t%q\nwant\n\t%q", i, s.ev, s.ev, got, s.wants)
		}
	}
	if !l.sched.LocalFinished() {
		t.Error("the epoch is not finished")
	}
}

// trainEpoch steps graph server 1's loop l, through step, through its one epoch of training
// with graph server 0 as its peer: each task done as it starts, the peer's rows and progress as
// the scheduler waits for them.
func trainEpoch(t *testing.T, l *loop, step func(event) []pipeline.Started) {
	t.Helper()
	queue := step(trainFrom{0})
	var last pipeline.Task
	for !l.sched.LocalFinished() {
		if len(queue) == 0 { // the peer's rows or progress of the task last done here
			peer := last
			peer.Partition = 0
			if peer.Kind == pipeline.KindWU {
				queue = step(progressed{[]pipeline.Task{peer}})
			} else {
				queue = step(rowsArrived{peer})
			}
			if len(queue) == 0 {
				t.Fatalf("nothing ready after %v and the peer's", last)
			}
			continue
		}
		last = queue[0].Task
		done := taskDone{task: last}
		if last.Kind == pipeline.KindAV && last.Layer == 2 {
			done.loss = 0.5
		}
		queue = append(queue[1:], step(done)...)
	}
}

// TestStepReportsToTheCoordinator steps graph server 1 of two through its epoch, each task done
// as it starts and the peer's rows and progress as the scheduler waits for them: the only
// messages are its WU's progress to the peer and its epoch report to graph server 0 (the loss
// of its AV_2 and what was measured), which it does not take itself; the coordinator's evaluate
// pins the version and runs the pass here, and the pass's end unpins it.
func TestStepReportsToTheCoordinator(t *testing.T) {
	l := stepLoop(1)
	var sent []string
	step := func(ev event) []pipeline.Started {
		t.Helper()
		out, err := l.step(ev)
		if err != nil {
			t.Fatalf("%T %+v: %v", ev, ev, err)
		}
		tasks := out.runTasks
		out.runTasks = nil
		sent = append(sent, describe(t, out)...)
		return slices.Clone(tasks)
	}
	trainEpoch(t, l, step)
	want := []string{"progress from 1: p1/i0 e0 WU", "report from 1: epoch 0 loss 0.5 bytes 100 calls 10 billed 1000000000 ns local 3 peak 1048576"}
	if !slices.Equal(sent, want) {
		t.Errorf("an epoch sent\n\t%q\nwant\n\t%q", sent, want)
	}
	sent = nil
	step(commanded{&rpc.CommandRequest{Evaluate: &rpc.Evaluate{Version: 1}}})
	if want := []string{"run evaluation 0 at version 1 export false"}; !slices.Equal(sent, want) {
		t.Errorf("evaluate: %q, want %q", sent, want)
	}
	if !slices.Contains(l.keep.load().Pinned, 1) {
		t.Errorf("keep %v during the evaluation of version 1: want it pinned", l.keep.load())
	}
	step(evalFinished{1})
	if slices.Contains(l.keep.load().Pinned, 1) {
		t.Errorf("keep %v after the evaluation of version 1: want it unpinned", l.keep.load())
	}
}
