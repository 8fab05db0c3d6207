package function

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
	"github.com/dorylus-gnn/dorylus/pkg/tensor"
)

// fetcher serves the pull data path: it fetches a descriptor's inputs from its graph server
// and its weight from its parameter server over gRPC, with mutual TLS as the descriptor's
// identity says, keeping a connection per address and identity across calls (a warm function
// reuses them), at most maxConns, the least recently used closed first.
type fetcher struct {
	mu        sync.Mutex
	conns     map[string]*fetchConn // by address
	plaintext bool                  // a descriptor without an identity is fetched in plaintext
}

// fetchConn is a connection to one address with one identity.
type fetchConn struct {
	conn *grpc.ClientConn
	id   [sha256.Size]byte // of the identity (zero: plaintext)
	used time.Time
}

// maxConns bounds the connections a function keeps: it may serve many jobs in turn.
const maxConns = 64

// AllowPlaintextPull makes the pull data path fetch in plaintext for a descriptor that carries
// no identity (a job marked insecure: tests, and `dorylus function --insecure`). Without it
// such descriptors are refused.
func (h *Handler) AllowPlaintextPull() {
	h.pull.mu.Lock()
	defer h.pull.mu.Unlock()
	h.pull.plaintext = true
}

// fingerprint identifies an identity (zero for none): a connection made with one is never
// used for a descriptor carrying another.
func fingerprint(id pki.Identity) [sha256.Size]byte {
	if len(id.CA) == 0 {
		return [sha256.Size]byte{}
	}
	h := sha256.New()
	for _, p := range [][]byte{id.CA, id.Cert, id.Key} {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(p))))
		h.Write(p)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// conn returns the connection to addr with identity id, dialing it on first use; it replaces a
// connection to addr made with another identity (a job's new credentials).
func (f *fetcher) conn(addr string, id pki.Identity) (*grpc.ClientConn, error) {
	fp := fingerprint(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(id.CA) == 0 && !f.plaintext {
		return nil, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: the descriptor carries no TLS identity: only a function started with --insecure serves a plaintext job", dispatch.ErrRequest)}
	}
	if c, ok := f.conns[addr]; ok && c.id == fp {
		c.used = time.Now()
		return c.conn, nil
	}
	var creds *pki.Credentials
	if len(id.CA) > 0 {
		var err error
		if creds, err = id.Credentials(); err != nil {
			return nil, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: the descriptor's TLS identity: %v", dispatch.ErrRequest, err)}
		}
	}
	conn, err := rpc.Dial(addr, rpc.WithTLS(creds))
	if err != nil {
		return nil, &Error{remote.ErrorTypeFailed, err}
	}
	if f.conns == nil {
		f.conns = make(map[string]*fetchConn)
	}
	if old, ok := f.conns[addr]; ok {
		_ = old.conn.Close()
		delete(f.conns, addr)
	}
	if len(f.conns) >= maxConns {
		oldest := ""
		for a, c := range f.conns {
			if oldest == "" || c.used.Before(f.conns[oldest].used) {
				oldest = a
			}
		}
		_ = f.conns[oldest].conn.Close()
		delete(f.conns, oldest)
	}
	f.conns[addr] = &fetchConn{conn: conn, id: fp, used: time.Now()}
	return conn, nil
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
	gs, err := f.conn(d.Source, d.Identity)
	if err != nil {
		return want, err
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
	ps, err := f.conn(d.WeightSource, d.Identity)
	if err != nil {
		return req, err
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
