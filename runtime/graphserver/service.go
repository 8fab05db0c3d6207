package graphserver

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/pipeline"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// service is the graph server's gRPC service (rpc.GraphServerServer): every handler checks and
// decodes its request — a peer's rows straight into their buffers — and posts what happened
// to the loop as an event.
type service struct {
	rpc.UnimplementedGraphServerServer
	cfg  *Config
	lay  *layout
	eval *evaluator
	post func(event)
}

// Hello lets a peer check that both belong to the same run and agree on the partitioning.
func (v *service) Hello(_ context.Context, r *rpc.HelloRequest) (*rpc.HelloReply, error) {
	c, q := v.cfg, int(r.From)
	switch {
	case r.Run != c.Run:
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d belongs to run %q, not %q", c.Partition, c.Run, r.Run)
	case int(r.Partitions) != c.Partitions || int(r.Intervals) != c.Intervals:
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d runs %d partitions of %d intervals, the caller %d of %d",
			c.Partition, c.Partitions, c.Intervals, r.Partitions, r.Intervals)
	case q < 0 || q >= c.Partitions || q == c.Partition:
		return nil, status.Errorf(codes.InvalidArgument, "graph server %d: hello from partition %d", c.Partition, q)
	case int(r.Ghosts) != len(v.lay.part.SendTo[q]):
		return nil, status.Errorf(codes.FailedPrecondition, "graph server %d holds %d ghosts of partition %d, which would send %d rows: the partition files do not belong together",
			q, r.Ghosts, c.Partition, len(v.lay.part.SendTo[q]))
	}
	return &rpc.HelloReply{}, nil
}

// PushRows stores a peer's rows: those of a training task, then posts rowsArrived; those of an
// evaluation pass, which waits for them itself.
func (v *service) PushRows(_ context.Context, b *rpc.RowsBatch) (*rpc.Ack, error) {
	if err := v.storeRows(b); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "graph server %d: batch from %d: %v", v.cfg.Partition, b.From, err)
	}
	return &rpc.Ack{}, nil
}

func (v *service) storeRows(b *rpc.RowsBatch) error {
	q, t := int(b.From), b.Task
	if q < 0 || q >= v.cfg.Partitions || q == v.cfg.Partition || t == nil || b.Data == nil {
		return fmt.Errorf("malformed batch")
	}
	l := int(t.Layer)
	if l >= v.lay.layers() {
		return fmt.Errorf("layer %d of %d", l, v.lay.layers())
	}
	if err := b.Data.Shape(int(b.Data.Rows), v.lay.widths[l]); err != nil {
		return err
	}
	if b.Flow == rpc.Flow_FLOW_EVAL {
		return v.eval.receive(q, int(t.Epoch), l, b)
	}
	task, err := v.lay.store(b, v.cfg.Epochs)
	if err != nil {
		return err
	}
	v.post(rowsArrived{task})
	return nil
}

// Progress posts the tasks a peer reports done.
func (v *service) Progress(_ context.Context, r *rpc.ProgressReport) (*rpc.Ack, error) {
	var tasks []pipeline.Task
	for _, t := range r.Done {
		task := pipeline.Task{Partition: int(t.Partition), Interval: int(t.Interval), Epoch: int(t.Epoch), Layer: int(t.Layer), Kind: pipeline.Kind(t.Kind)}
		if task.Partition != int(r.From) || task.Partition == v.cfg.Partition {
			return nil, status.Errorf(codes.InvalidArgument, "graph server %d: progress of %v from %d", v.cfg.Partition, task, r.From)
		}
		tasks = append(tasks, task)
	}
	v.post(progressed{tasks})
	return &rpc.Ack{}, nil
}

// Command posts the coordinator's stop or evaluate.
func (v *service) Command(_ context.Context, r *rpc.CommandRequest) (*rpc.Ack, error) {
	v.post(commanded{r})
	return &rpc.Ack{}, nil
}

// EpochDone posts a partition's epoch report (the coordinator only).
func (v *service) EpochDone(_ context.Context, r *rpc.EpochReport) (*rpc.Ack, error) {
	if err := v.coordinating(); err != nil {
		return nil, err
	}
	v.post(epochReported{r})
	return &rpc.Ack{}, nil
}

// EvalDone posts a partition's evaluation report (the coordinator only).
func (v *service) EvalDone(_ context.Context, r *rpc.EvalReport) (*rpc.Ack, error) {
	if err := v.coordinating(); err != nil {
		return nil, err
	}
	v.post(evalReported{r})
	return &rpc.Ack{}, nil
}

func (v *service) coordinating() error {
	if v.cfg.Partition != 0 {
		return status.Errorf(codes.FailedPrecondition, "graph server %d is not the coordinator", v.cfg.Partition)
	}
	return nil
}
