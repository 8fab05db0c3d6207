package graphserver

import (
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// effects are what one step of the loop asks its driver to carry out (raft's Ready): the step
// itself sends, writes and starts nothing. Each list is in the order the step asked; the lists
// are the loop's and stay valid until its next step.
type effects struct {
	// Tasks to start: the scheduler's (already started in it), the evaluation and export passes
	// to run here, and graph server 0's part of the export once every partition wrote its share.
	runTasks    []pipeline.Started
	runPasses   []*rpc.Evaluate
	writeExport *pendingExport

	// Messages: to every peer, this partition's WUs done and the coordinator's commands; to
	// graph server 0, this partition's epoch reports; to the handler of a peer's report, the
	// coordinator's verdict on it.
	sendProgress []*rpc.ProgressReport
	sendCommands []*rpc.CommandRequest
	sendReports  []*rpc.EpochReport
	answers      []verdict
	// A preemption (preempt.go): its notice to graph server 0, and that its drain began here.
	sendPreempt *rpc.CommandRequest
	drain       bool

	// Reports to write (graph server 0): the progress lines (Config.Events and the metrics),
	// the job's status (Config.Status) and warnings (Config.Log).
	writeLines  []Event
	writeStatus []statusUpdate
	writeLogs   []string
}

// verdict answers the handler of a peer's report: nil (taken) or why not (errRefused).
type verdict struct {
	to  chan<- error
	err error
}

// statusUpdate is a progress for Config.Status; a final one goes without waiting for the
// status interval.
type statusUpdate struct {
	progress jobstatus.Progress
	final    bool
}

// reset empties every list, keeping their room.
func (f *effects) reset() {
	f.runTasks, f.runPasses, f.writeExport = f.runTasks[:0], f.runPasses[:0], nil
	f.sendProgress, f.sendCommands, f.sendReports, f.answers = f.sendProgress[:0], f.sendCommands[:0], f.sendReports[:0], f.answers[:0]
	f.sendPreempt, f.drain = nil, false
	f.writeLines, f.writeStatus, f.writeLogs = f.writeLines[:0], f.writeStatus[:0], f.writeLogs[:0]
}
