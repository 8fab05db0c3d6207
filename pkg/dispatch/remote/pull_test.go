package remote

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
	"github.com/dorylus-gnn/dorylus/pkg/rpc"
)

// TestStoreInputs serves rows of a held task, leaves out a weight named by version, refuses
// rows the task does not have, and forgets the task once it is removed.
func TestStoreInputs(t *testing.T) {
	if _, err := NewStore("", nil); err == nil {
		t.Error("store without an address: no error")
	}
	st, err := NewStore("127.0.0.1:7000", nil)
	if err != nil {
		t.Fatal(err)
	}
	req := remotetest.Tasks(3, 20, 12, 4)[4] // ∇AV_1
	req.WeightVersion, req.WeightSource = 4, "127.0.0.1:7100"
	id := st.add(&req)
	ctx := context.Background()
	r, err := st.Inputs(ctx, &rpc.TaskInputsRequest{Task: id, Lo: 5, Hi: 9})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dispatch.DecodeRequest(r.Request)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.RowIDs, req.RowIDs[5:9]) {
		t.Errorf("rows [5, 9): row ids %v, want %v", got.RowIDs, req.RowIDs[5:9])
	}
	if got.W != nil || got.RowOffset != req.RowOffset+5 || got.Z.Rows != 4 || got.DP.Rows != 4 || got.Z.Data[0] != req.Z.Row(5)[0] || got.DP.Data[0] != req.DP.Row(5)[0] {
		t.Errorf("rows [5, 9): offset %d, W %v, Z %dx%d, dP %dx%d: want the task's rows 5..8 without W", got.RowOffset, got.W, got.Z.Rows, got.Z.Cols, got.DP.Rows, got.DP.Cols)
	}
	if _, err := st.Inputs(ctx, &rpc.TaskInputsRequest{Task: id, Lo: 5, Hi: 21}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("rows past the task's: %v, want InvalidArgument", err)
	}
	st.remove(id)
	if _, err := st.Inputs(ctx, &rpc.TaskInputsRequest{Task: id, Hi: 20}); status.Code(err) != codes.NotFound {
		t.Errorf("removed task: %v, want NotFound", err)
	}
}

// TestDescriptorHoldsNoKey encodes the descriptors a store of a secure job sends, before and
// after it certifies a function's key: they carry the job's CA certificate and then a chain
// for that key, which verifies for client use, and no PEM block, PKCS #8 key or private
// scalar of any key of the job's credentials or of the function.
func TestDescriptorHoldsNoKey(t *testing.T) {
	b, _, is := remotetest.NewJob(t)
	st, err := NewStore("127.0.0.1:7000", is)
	if err != nil {
		t.Fatal(err)
	}
	req := remotetest.Tasks(3, 20, 12, 4)[4]
	first := st.descriptor(st.add(&req))(&req, 0, req.NumRows())
	fn, pub, err := pki.NewFunctionKey()
	if err != nil {
		t.Fatal(err)
	}
	second, err := st.certify(first, &NeedCertificate{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	fnKey, err := x509.MarshalPKCS8PrivateKey(fn)
	if err != nil {
		t.Fatal(err)
	}
	secrets := [][]byte{fnKey, raw(t, fn)}
	for _, k := range [][]byte{b.Key, b.FunctionKey, b.FunctionCAKey} {
		blk, _ := pem.Decode(k)
		key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, blk.Bytes, raw(t, key.(*ecdsa.PrivateKey)))
	}
	for name, body := range map[string][]byte{"first": first, "certified": second} {
		_, d, err := dispatch.DecodeDescriptor(body)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.CA, is.CA()) {
			t.Errorf("%s descriptor: no CA certificate of the job's", name)
		}
		if bytes.Contains(body, []byte("-----BEGIN")) || bytes.Contains(body, []byte("PRIVATE KEY")) {
			t.Errorf("%s descriptor holds PEM", name)
		}
		for i, s := range secrets {
			if bytes.Contains(body, s) {
				t.Errorf("%s descriptor holds private key material %d", name, i)
			}
		}
		if name == "certified" {
			if _, err := pki.ChainCredentials(d.CA, d.Chain, fn); err != nil {
				t.Errorf("certified chain: %v", err)
			}
		}
	}
	if _, err := (&Store{addr: "x:1"}).certify(first, &NeedCertificate{PublicKey: pub}); !errors.Is(err, dispatch.ErrRequest) {
		t.Errorf("a plaintext store certifying: %v, want a refusal", err)
	}
}

// raw returns the private scalar of k.
func raw(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := k.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
