package function

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
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
// and its weight from its parameter server over gRPC, with mutual TLS with the credentials it
// holds for the descriptor's CA (identity), keeping a connection per address and credentials
// across calls (a warm function reuses them), at most maxConns, the least recently used closed
// first.
type fetcher struct {
	mu        sync.Mutex
	conns     map[string]*fetchConn                  // by address
	plaintext bool                                   // a descriptor without a CA is fetched in plaintext
	mounted   *pki.Reloader                          // the function certificate of a mounted Secret (nil: none)
	networks  []netip.Prefix                         // what it may dial (AllowPullNetworks)
	key       *ecdsa.PrivateKey                      // made at the first descriptor it has no certificate for
	pub       []byte                                 // key's public key, PKIX DER
	certified map[[sha256.Size]byte]*pki.Credentials // chains for key, by the CA's digest
}

// fetchConn is a connection to one address with one set of credentials.
type fetchConn struct {
	conn *grpc.ClientConn
	id   [sha256.Size]byte // of the credentials (zero: plaintext)
	used time.Time
}

// maxConns bounds the connections a function keeps, and maxCertified the jobs it holds a
// certificate for: it may serve many jobs in turn.
const (
	maxConns     = 64
	maxCertified = 64
)

// AllowPlaintextPull makes the pull data path fetch in plaintext for a descriptor that carries
// no CA (a job marked insecure: tests, and `dorylus function --insecure`). Without it such
// descriptors are refused.
func (h *Handler) AllowPlaintextPull() {
	h.pull.mu.Lock()
	defer h.pull.mu.Unlock()
	h.pull.plaintext = true
}

// UseCredentials makes the pull data path use the function certificate of r (a mounted
// credentials Secret) for descriptors of its CA, before any certificate for a key of its own.
func (h *Handler) UseCredentials(r *pki.Reloader) {
	h.pull.mu.Lock()
	defer h.pull.mu.Unlock()
	h.pull.mounted = r
}

// identity returns the credentials for descriptor d (nil: plaintext): the mounted ones if they
// are of d's CA, else a chain d carries for the function's own key, else one it was given
// before that is not near its end; without any, an error of type
// remote.ErrorTypeNeedCertificate whose message is the function's public key, which the graph
// server certifies and sends back in the next descriptor. f.mu must be held.
func (f *fetcher) identity(d *dispatch.Descriptor) (*pki.Credentials, error) {
	if len(d.CA) == 0 {
		if !f.plaintext {
			return nil, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: the descriptor carries no CA certificate: only a function started with --insecure serves a plaintext job", dispatch.ErrRequest)}
		}
		return nil, nil
	}
	if f.mounted != nil {
		if c := f.mounted.Get(); bytes.Equal(c.CA(), d.CA) {
			return c, nil
		}
	}
	ca := sha256.Sum256(d.CA)
	if len(d.Chain) > 0 && f.key != nil {
		c, err := pki.ChainCredentials(d.CA, d.Chain, f.key)
		switch {
		case err == nil:
			if len(f.certified) >= maxCertified {
				clear(f.certified) // each job asks again once
			}
			f.certified[ca] = c
			return c, nil
		case !errors.Is(err, pki.ErrOtherKey): // another instance's chain is no refusal
			return nil, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: the descriptor's certificate chain: %v", dispatch.ErrRequest, err)}
		}
	}
	if c := f.certified[ca]; c != nil && time.Until(c.NotAfter()) > pki.RenewBefore {
		return c, nil
	}
	if f.key == nil {
		k, pub, err := pki.NewFunctionKey()
		if err != nil {
			return nil, &Error{remote.ErrorTypeFailed, err}
		}
		f.key, f.pub, f.certified = k, pub, make(map[[sha256.Size]byte]*pki.Credentials)
	}
	return nil, &Error{remote.ErrorTypeNeedCertificate, errors.New(base64.StdEncoding.EncodeToString(f.pub))}
}

// conn returns the connection to addr with creds (nil: plaintext), dialing it on first use; it
// replaces a connection to addr made with other credentials (a job's new ones, a renewed
// certificate).
func (f *fetcher) conn(addr string, creds *pki.Credentials) (*grpc.ClientConn, error) {
	var fp [sha256.Size]byte
	if creds != nil {
		fp = creds.Fingerprint()
	}
	if c, ok := f.conns[addr]; ok && c.id == fp {
		c.used = time.Now()
		return c.conn, nil
	}
	conn, err := rpc.Dial(addr, rpc.WithTLS(creds), rpc.WithDialer(dialer(f.networks)))
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

// connsFor returns the connections to a descriptor's graph server and, when it names one, its
// parameter server (else nil).
func (f *fetcher) connsFor(d *dispatch.Descriptor) (gs, ps *grpc.ClientConn, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range []string{d.Source, d.WeightSource} {
		if err := refuseAddr(f.networks, a); a != "" && err != nil {
			return nil, nil, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v", dispatch.ErrRequest, err)}
		}
	}
	creds, err := f.identity(d)
	if err != nil {
		return nil, nil, err
	}
	if gs, err = f.conn(d.Source, creds); err != nil || d.WeightSource == "" {
		return gs, nil, err
	}
	ps, err = f.conn(d.WeightSource, creds)
	return gs, ps, err
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
	gs, ps, err := f.connsFor(&d)
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
		return req, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v layer %d: a weight by version is for the layers of a valid GCN or GraphSAGE network", dispatch.ErrRequest, req.Op, req.Layer)}
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
			// The shape is checked before the buffer is made: the widths are the request's. A
			// GraphSAGE layer's weight is [W_self; W_neigh], twice a GCN's rows.
			rows, cols := dims[req.Layer], dims[req.Layer+1]
			stored := rows
			if req.WeightHalf != dispatch.WeightWhole {
				stored = 2 * rows
			}
			if err := lt.Tensor.Shape(stored, cols); err != nil {
				return req, &Error{remote.ErrorTypeBadRequest, fmt.Errorf("%w: %v layer %d: parameter server %s: %v", dispatch.ErrRequest, req.Op, req.Layer, d.WeightSource, err)}
			}
			w := tensor.NewDense(stored, cols)
			if err := lt.Tensor.DecodeInto(w); err != nil {
				return req, failed("parameter server %s: layer %d: %v", d.WeightSource, req.Layer, err)
			}
			switch req.WeightHalf {
			case dispatch.WeightWhole, dispatch.WeightSelf:
				req.W = w.RowSlice(0, rows)
			default: // WeightNeigh: DecodeDescriptor refused any other
				req.W = w.RowSlice(rows, stored)
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
