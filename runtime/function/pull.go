package function

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// fetcher serves the pull data path: it fetches a descriptor's inputs from its graph server
// and its weight from its parameter server over gRPC, keeping one connection per address
// across calls (a warm function reuses them).
type fetcher struct {
	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
	opts    []rpc.Option // how to dial: the job's TLS credentials
	refused error        // set: every pull fails with it (no credentials)
}

// SecurePull makes the pull data path fetch over mutual TLS with the job's credentials c, or,
// with c nil, refuse every pull request for want of them. A handler on which it is never
// called fetches in plaintext (tests, and `dorylus function --insecure`).
func (h *Handler) SecurePull(c *pki.Credentials) {
	h.pull.mu.Lock()
	defer h.pull.mu.Unlock()
	h.pull.opts, h.pull.refused = []rpc.Option{rpc.WithTLS(c)}, nil
	if c == nil {
		h.pull.refused = errors.New("the pull data path needs the job's TLS credentials (--tls-dir or $" + jobconfig.EnvTLSDir + "), or --insecure for a plaintext job")
	}
}

// conn returns the connection to addr, dialing it on first use.
func (f *fetcher) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused != nil {
		return nil, f.refused
	}
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	c, err := rpc.Dial(addr, f.opts...)
	if err != nil {
		return nil, err
	}
	if f.conns == nil {
		f.conns = make(map[string]*grpc.ClientConn)
	}
	f.conns[addr] = c
	return c, nil
}

// request returns the task a descriptor names, with its tensors fetched.
func (f *fetcher) request(ctx context.Context, body []byte) (dispatch.TaskRequest, error) {
	want, d, err := dispatch.DecodeDescriptor(body)
	if err != nil {
		return want, &Error{remote.ErrorTypeBadRequest, err}
	}
	failed := func(format string, args ...any) error {
		return &Error{remote.ErrorTypeFailed, fmt.Errorf("%v layer %d task %d: %s", want.Op, want.Layer, d.Task, fmt.Sprintf(format, args...))}
	}
	gs, err := f.conn(d.Source)
	if err != nil {
		return want, failed("%v", err)
	}
	in, err := rpc.NewTaskSourceClient(gs).Inputs(ctx, &rpc.TaskInputsRequest{Task: d.Task, Lo: uint32(d.Lo), Hi: uint32(d.Hi)})
	if refused(err) {
		return want, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v layer %d task %d: graph server %s refused it: %v", dispatch.ErrRequest, want.Op, want.Layer, d.Task, d.Source, err)}
	}
	if err != nil {
		return want, failed("fetch inputs from graph server %s: %v", d.Source, err)
	}
	req, err := dispatch.DecodeRequest(in.Request)
	if err == nil {
		err = dispatch.CheckInputs(&req, &want, d)
	}
	if err != nil {
		return want, &Error{remote.ErrorTypeBadRequest, err}
	}
	if d.WeightSource == "" {
		return req, nil
	}
	if req.Op.IsGAT() || req.Model.Validate() != nil || req.Model.Layers > dispatch.MaxLayers || req.Layer < 0 || req.Layer >= req.Model.Layers {
		return req, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v layer %d: a weight by version is for the layers of a valid GCN", dispatch.ErrRequest, req.Op, req.Layer)}
	}
	ps, err := f.conn(d.WeightSource)
	if err != nil {
		return req, failed("%v", err)
	}
	// No Keep report: the graph server pinned the version for the task's lifetime.
	w, err := rpc.NewParamServerClient(ps).Pull(ctx, &rpc.PullRequest{Version: d.WeightVersion})
	if refused(err) {
		return req, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v layer %d: parameter server %s refused weight version %d: %v", dispatch.ErrRequest, req.Op, req.Layer, d.WeightSource, d.WeightVersion, err)}
	}
	if err != nil {
		return req, failed("pull weight version %d from parameter server %s: %v", d.WeightVersion, d.WeightSource, err)
	}
	dims := req.Model.Dims()
	for _, lt := range w.Layers {
		if int(lt.Layer) == req.Layer {
			// The shape is checked before the buffer is made: the widths are the request's.
			rows, cols := dims[req.Layer], dims[req.Layer+1]
			if err := lt.Tensor.Shape(rows, cols); err != nil {
				return req, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v layer %d: parameter server %s: %v", dispatch.ErrRequest, req.Op, req.Layer, d.WeightSource, err)}
			}
			req.W = tensor.NewDense(rows, cols)
			if err := lt.Tensor.DecodeInto(req.W); err != nil {
				return req, failed("parameter server %s: layer %d: %v", d.WeightSource, req.Layer, err)
			}
			return req, nil
		}
	}
	return req, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v layer %d: parameter server %s does not hold that layer", dispatch.ErrRequest, req.Op, req.Layer, d.WeightSource)}
}

// refused reports whether a graph or parameter server refused a fetch as asked (an unknown task
// or dropped version, a bad row range): another try cannot help. A server not ready yet
// (FailedPrecondition, while a restarted parameter server waits for its Init) may serve a
// later try, so that is not a refusal.
func refused(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.OutOfRange:
		return true
	}
	return false
}
