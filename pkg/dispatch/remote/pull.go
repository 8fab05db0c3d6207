package remote

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// Store holds the tasks a Backend in pull mode (Options.Pull) has in flight and serves their
// inputs to the functions as rpc.TaskSource, which the graph server registers on its gRPC
// server. A task's tensors are encoded when a function asks for them: they stay the caller's
// buffers, which it leaves unchanged until Run returns, and Run does not return while a fetch
// of its task is being encoded.
type Store struct {
	rpc.UnimplementedTaskSourceServer
	addr   string
	issuer *pki.Issuer
	mu     sync.Mutex
	next   uint64
	tasks  map[uint64]*heldTask
}

// heldTask is a task in flight; mu is held for reading while its inputs are encoded.
type heldTask struct {
	mu   sync.RWMutex
	req  *dispatch.TaskRequest
	gone bool // Run has returned
}

// NewStore returns a store whose functions reach it at addr, the graph server's advertised gRPC
// address; issuer, the job's function issuer (nil: a plaintext job), certifies the keys of
// functions that have no certificate of the job's (NeedCertificate).
func NewStore(addr string, issuer *pki.Issuer) (*Store, error) {
	if addr == "" || len(addr) > dispatch.MaxAddress {
		return nil, fmt.Errorf("pull data path: graph server address %q: want a host:port the functions can reach", addr)
	}
	return &Store{addr: addr, issuer: issuer, tasks: make(map[uint64]*heldTask)}, nil
}

// certify returns body, a descriptor, carrying a certificate chain for the public key a
// function answered with.
func (s *Store) certify(body []byte, nc *NeedCertificate) ([]byte, error) {
	if s.issuer == nil {
		return nil, fmt.Errorf("%w: the function asks for a certificate of a plaintext job", dispatch.ErrRequest)
	}
	chain, err := s.issuer.Certify(nc.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", dispatch.ErrRequest, err)
	}
	return dispatch.WithChain(body, chain)
}

// add holds req until remove and returns its id.
func (s *Store) add(req *dispatch.TaskRequest) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	s.tasks[s.next] = &heldTask{req: req}
	return s.next
}

// remove forgets a task once no fetch of it is being encoded.
func (s *Store) remove(id uint64) {
	s.mu.Lock()
	t := s.tasks[id]
	delete(s.tasks, id)
	s.mu.Unlock()
	t.mu.Lock()
	t.gone = true
	t.mu.Unlock()
}

// Inputs implements rpc.TaskSourceServer: the wire bytes of rows [lo, hi) of a task in flight,
// without its weight when the function pulls that by version.
func (s *Store) Inputs(_ context.Context, in *rpc.TaskInputsRequest) (*rpc.TaskInputsReply, error) {
	s.mu.Lock()
	t := s.tasks[in.Task]
	s.mu.Unlock()
	if t != nil {
		t.mu.RLock()
		defer t.mu.RUnlock()
	}
	if t == nil || t.gone {
		return nil, status.Errorf(codes.NotFound, "graph server at %s: no task %d in flight (it has returned)", s.addr, in.Task)
	}
	req := t.req
	lo, hi := int(in.Lo), int(in.Hi)
	if n := req.NumRows(); hi > n || lo > hi || (lo != 0 || hi != n) && req.Op.IsGAT() {
		return nil, status.Errorf(codes.InvalidArgument, "graph server at %s: task %d (%v layer %d) has %d rows, asked for [%d, %d)", s.addr, in.Task, req.Op, req.Layer, n, lo, hi)
	}
	r := rowRange(req, lo, hi)
	if r.WeightSource != "" {
		r.W = nil
	}
	return &rpc.TaskInputsReply{Request: dispatch.EncodeRequest(&r)}, nil
}

// descriptor returns the encoder of the calls of task id: their descriptors.
func (s *Store) descriptor(id uint64) encoder {
	return func(r *dispatch.TaskRequest, lo, hi int) []byte {
		d := dispatch.Descriptor{Task: id, Lo: lo, Hi: hi, Source: s.addr, WeightVersion: r.WeightVersion, WeightSource: r.WeightSource}
		if s.issuer != nil {
			d.CA = s.issuer.CA()
		}
		return dispatch.EncodeDescriptor(r, d)
	}
}

// encoder returns the body of the call that computes rows [lo, hi) of a task; r is their
// request (rowRange).
type encoder func(r *dispatch.TaskRequest, lo, hi int) []byte

// inline is the encoder of the inline data path: the tensors travel in the request.
func inline(r *dispatch.TaskRequest, _, _ int) []byte { return dispatch.EncodeRequest(r) }
