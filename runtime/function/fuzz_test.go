package function_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/internal/hostile"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/pulltest"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/runtime/function"
)

// maxRequest is the fuzzed handler's request limit.
const maxRequest = 1 << 20

// FuzzHandler posts hostile bodies to the function's HTTP service on loopback, inline requests
// and pull-mode descriptors (which may only name the test's own task source and parameter
// server): every answer is 200 with a result of the request's op or 400 with the bad-request
// error type, memory follows the body's size, and the service answers its health check after
// each.
func FuzzHandler(f *testing.F) {
	h, err := function.NewHandler(function.Faults{}, maxRequest)
	if err != nil {
		f.Fatal(err)
	}
	h.AllowPlaintextPull()
	h.AllowPullNetworks([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}) // the test's servers
	srv := httptest.NewServer(function.HTTPHandler(h, func() bool { return true }))
	f.Cleanup(srv.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	tasks := remotetest.Tasks(1, 4, 6, 3)
	_, pulled := pulltest.Source(f, tasks, nil, nil)
	addr := pulled[0].WeightSource // the task source and the parameter server share it
	for _, r := range append(tasks, remotetest.GATTasks(2, 3, 5, 2)...) {
		f.Add(dispatch.EncodeRequest(&r))
	}
	for i, r := range pulled {
		f.Add(dispatch.EncodeDescriptor(&r, dispatch.Descriptor{Task: uint64(i + 1), Lo: 0, Hi: r.NumRows(), Source: addr, WeightSource: r.WeightSource}))
	}
	budget := hostile.Budget{Fixed: 2 << 20, PerByte: 64, Quadratic: 8}
	f.Fuzz(func(t *testing.T, body []byte) {
		var op dispatch.Op
		if dispatch.IsDescriptor(body) {
			req, d, err := dispatch.DecodeDescriptor(body)
			if err == nil && (d.Source != addr || d.WeightSource != "" && (d.WeightSource != addr || d.WeightVersion != 0)) {
				// Another host, or a weight version that does not exist yet (a pull waits
				// for it): the test talks only to its own servers and never waits.
				t.Skip("descriptor names another server or a future weight version")
			}
			op = req.Op
		} else if req, err := dispatch.DecodeRequest(body); err == nil {
			op = req.Op
		}
		var code int
		var typ string
		var answer []byte
		budget.Check(t, len(body), "POST", func() {
			resp, err := client.Post(srv.URL+"/", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			code, typ = resp.StatusCode, resp.Header.Get(remote.ErrorTypeHeader)
			answer, err = io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
		})
		switch {
		case code == http.StatusOK:
			if _, err := dispatch.DecodeResult(answer, op, dispatch.TaskResult{}); err != nil {
				t.Fatalf("200 with an answer that is not a %v result: %v", op, err)
			}
		case code == http.StatusBadRequest && typ == remote.ErrorTypeBadRequest:
		default:
			t.Fatalf("answered %d (%q): %s", code, typ, answer)
		}
		resp, err := client.Get(srv.URL + "/healthz")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("health check after the call: %v", err)
		}
		resp.Body.Close()
	})
}

// TestOversizeBody posts a body over the handler's limit, with and without a declared length:
// both are refused with 400 without being read whole.
func TestOversizeBody(t *testing.T) {
	h, err := function.NewHandler(function.Faults{}, maxRequest)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(function.HTTPHandler(h, func() bool { return true }))
	defer srv.Close()
	body := make([]byte, maxRequest+1)
	for _, chunked := range []bool{false, true} {
		var r io.Reader = bytes.NewReader(body)
		if chunked {
			r = struct{ io.Reader }{r} // no length: sent chunked
		}
		resp, err := http.Post(srv.URL+"/", "application/octet-stream", r)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(remote.ErrorTypeHeader) != remote.ErrorTypeBadRequest || !bytes.Contains(msg, []byte("too large")) && !bytes.Contains(msg, []byte("over the limit")) {
			t.Errorf("chunked %v: %d %q", chunked, resp.StatusCode, msg)
		}
	}
}
