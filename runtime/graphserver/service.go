package graphserver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// service is the graph server's gRPC service (rpc.GraphServerServer): every handler checks and
// decodes its request — a peer's rows straight into their buffers — and posts what happened
// to the loop as an event. A request the loop could not apply is refused here, with
// InvalidArgument for what no run could send and FailedPrecondition for what this run cannot
// take now, so that no request ends the run; the coordinator's reports, which depend on what
// was reported before, are checked by the loop, which answers the handler (ask).
type service struct {
	rpc.UnimplementedGraphServerServer
	cfg  *Config
	lay  *layout
	eval *evaluator
	post func(event)
	ask  func(ctx context.Context, ev event, verdict <-chan error) error
}

// Hello lets a peer check that both belong to the same run and agree on the partitioning.
func (v *service) Hello(ctx context.Context, r *rpc.HelloRequest) (*rpc.HelloReply, error) {
	c, q := v.cfg, int(r.From)
	switch {
	case r.Run != c.Run:
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d belongs to run %q, not %q", c.Partition, c.Run, r.Run)
	case int(r.Attempt) != c.Attempt:
		return nil, status.Errorf(codes.Aborted, "graph server %d was started in attempt %d of the run, the caller in attempt %d", c.Partition, c.Attempt, r.Attempt)
	case int(r.Partitions) != c.Partitions || int(r.Intervals) != c.Intervals:
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d runs %d partitions of %d intervals, the caller %d of %d",
			c.Partition, c.Partitions, c.Intervals, r.Partitions, r.Intervals)
	}
	if err := v.peer(ctx, r.From); err != nil {
		return nil, err
	}
	if int(r.Ghosts) != len(v.lay.part.SendTo[q]) {
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d holds %d ghosts of partition %d, which would send %d rows: the partition files do not belong together",
			q, r.Ghosts, c.Partition, len(v.lay.part.SendTo[q]))
	}
	return &rpc.HelloReply{}, nil
}

// peer checks that from names another partition of the run, and that the caller may speak
// as it (sender).
func (v *service) peer(ctx context.Context, from uint32) error {
	if int(from) >= v.cfg.Partitions || int(from) == v.cfg.Partition {
		return status.Errorf(codes.InvalidArgument, "graph server %d: from: partition %d is not a peer of %d partitions", v.cfg.Partition, from, v.cfg.Partitions)
	}
	return v.sender(ctx, from)
}

// sender checks the caller's certificate against the graph server a request claims to come
// from, with codes.PermissionDenied: a certificate that names a server (pki.IdentityOf) may
// speak only as that graph server; one that names none — the leaf all servers of a job share
// when nothing issued one each — as any; a call without a verified certificate (an insecure
// run) as claimed.
func (v *service) sender(ctx context.Context, from uint32) error {
	p, _ := grpcpeer.FromContext(ctx)
	if p == nil {
		return nil
	}
	info, _ := p.AuthInfo.(credentials.TLSInfo)
	if len(info.State.VerifiedChains) == 0 {
		return nil
	}
	id, ok, err := pki.IdentityOf(info.State.VerifiedChains[0][0])
	switch {
	case err != nil:
		return status.Errorf(codes.PermissionDenied, "graph server %d: %v", v.cfg.Partition, err)
	case ok && id != pki.GraphServer(int(from)):
		return status.Errorf(codes.PermissionDenied, "graph server %d: the caller's certificate is %s's: it may not speak as graph server %d", v.cfg.Partition, id, from)
	}
	return nil
}

// training refuses, in an inference, what only training takes (what, named in the error).
func (v *service) training(what string) error {
	if v.cfg.Weights != nil {
		return status.Errorf(codes.FailedPrecondition, "graph server %d runs an inference: no %s", v.cfg.Partition, what)
	}
	return nil
}

// PushRows stores a peer's rows: those of a training task, then posts rowsArrived; those of an
// evaluation pass, which waits for them itself.
func (v *service) PushRows(ctx context.Context, b *rpc.RowsBatch) (*rpc.Ack, error) {
	if err := v.peer(ctx, b.From); err != nil {
		return nil, err
	}
	if b.Flow != rpc.Flow_FLOW_EVAL {
		if err := v.training("training rows"); err != nil {
			return nil, err
		}
	}
	if err := v.storeRows(b); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "graph server %d: batch from %d: %v", v.cfg.Partition, b.From, err)
	}
	return &rpc.Ack{}, nil
}

func (v *service) storeRows(b *rpc.RowsBatch) error {
	q, t := int(b.From), b.Task
	switch {
	case t == nil:
		return errors.New("task: missing")
	case b.Data == nil:
		return errors.New("data: missing")
	}
	l := int(t.Layer)
	if b.Flow != rpc.Flow_FLOW_EVAL {
		l = v.lay.rowsLayer(pipeline.Task{Layer: l, Kind: pipeline.Kind(t.Kind)})
	}
	if l < 0 || l >= v.lay.layers() {
		return fmt.Errorf("task: rows of layer %d of %d", l, v.lay.layers())
	}
	if err := b.Data.Shape(int(b.Data.Rows), v.lay.widths[l]); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if b.Flow == rpc.Flow_FLOW_EVAL {
		if t.Epoch > v.cfg.exportID() {
			return fmt.Errorf("task: evaluation %d of a run of %d epochs", t.Epoch, v.cfg.Epochs)
		}
		return v.eval.receive(q, int(t.Epoch), l, b)
	}
	task, err := v.lay.store(b, v.cfg.Epochs)
	if err != nil {
		return err
	}
	v.post(rowsArrived{task})
	return nil
}

// Progress posts the WU tasks a peer reports done.
func (v *service) Progress(ctx context.Context, r *rpc.ProgressReport) (*rpc.Ack, error) {
	if err := v.peer(ctx, r.From); err != nil {
		return nil, err
	}
	if err := v.training("progress"); err != nil {
		return nil, err
	}
	c := v.cfg
	tasks := make([]pipeline.Task, 0, len(r.Done))
	for _, t := range r.Done {
		task := pipeline.Task{Partition: int(t.Partition), Interval: int(t.Interval), Epoch: int(t.Epoch), Layer: int(t.Layer), Kind: pipeline.Kind(t.Kind)}
		if task.Partition != int(r.From) || task.Interval >= c.Intervals || task.Epoch >= c.Epochs || task.Kind != pipeline.KindWU || task.Layer != 0 {
			return nil, status.Errorf(codes.InvalidArgument, "graph server %d: progress from %d: done: %v is not a WU of the sender's %d intervals and %d epochs",
				c.Partition, r.From, task, c.Intervals, c.Epochs)
		}
		tasks = append(tasks, task)
	}
	v.post(progressed{tasks})
	return &rpc.Ack{}, nil
}

// Command posts the coordinator's stop or evaluate: only graph server 0 sends them.
func (v *service) Command(ctx context.Context, r *rpc.CommandRequest) (*rpc.Ack, error) {
	c := v.cfg
	if c.Partition == 0 {
		if r.Preempt && !r.Stop && r.Evaluate == nil { // a peer's notice (preempt.go)
			if err := v.report(ctx, r.From); err != nil {
				return nil, err
			}
			v.post(preempted{})
			return &rpc.Ack{}, nil
		}
		return nil, status.Errorf(codes.FailedPrecondition, "graph server 0 is the coordinator: it takes no commands but a peer's preemption")
	}
	if err := v.sender(ctx, 0); err != nil {
		return nil, err
	}
	if r.Stop {
		if err := v.training("stop"); err != nil {
			return nil, err
		}
	}
	if ev := r.Evaluate; ev != nil {
		switch {
		case ev.Id > c.exportID():
			return nil, status.Errorf(codes.InvalidArgument, "graph server %d: evaluate: id %d of a run of %d epochs", c.Partition, ev.Id, c.Epochs)
		case ev.Export && c.Export == nil:
			return nil, status.Errorf(codes.FailedPrecondition, "graph server %d: evaluate: export, but the server has no output location", c.Partition)
		}
	}
	v.post(commanded{r})
	return &rpc.Ack{}, nil
}

// EpochDone asks the loop to take a peer's epoch report (the coordinator only).
func (v *service) EpochDone(ctx context.Context, r *rpc.EpochReport) (*rpc.Ack, error) {
	if err := v.report(ctx, r.From); err != nil {
		return nil, err
	}
	if err := v.training("epoch reports"); err != nil {
		return nil, err
	}
	verdict := make(chan error, 1)
	return v.answer(ctx, epochReported{rep: r, verdict: verdict}, verdict)
}

// EvalDone asks the loop to take a peer's evaluation report (the coordinator only).
func (v *service) EvalDone(ctx context.Context, r *rpc.EvalReport) (*rpc.Ack, error) {
	if err := v.report(ctx, r.From); err != nil {
		return nil, err
	}
	verdict := make(chan error, 1)
	return v.answer(ctx, evalReported{rep: r, verdict: verdict}, verdict)
}

// report checks that this server coordinates and that from is a peer.
func (v *service) report(ctx context.Context, from uint32) error {
	if v.cfg.Partition != 0 {
		return status.Errorf(codes.FailedPrecondition, "graph server %d is not the coordinator", v.cfg.Partition)
	}
	return v.peer(ctx, from)
}

// answer posts ev and returns the loop's verdict on it: a report the coordinator cannot take
// now is refused with FailedPrecondition.
func (v *service) answer(ctx context.Context, ev event, verdict <-chan error) (*rpc.Ack, error) {
	err := v.ask(ctx, ev, verdict)
	switch {
	case err == nil:
		return &rpc.Ack{}, nil
	case errors.Is(err, errRefused):
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d: %v", v.cfg.Partition, err)
	}
	return nil, err
}
