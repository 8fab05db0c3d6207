package function

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote/remotetest"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// TestPullCertificate hands a function with no credentials of its own the descriptors of a
// job: the first is answered with its public key (NeedCertificate), the same again while no
// chain comes; a chain for another key (another instance's) gets the same answer; a chain for
// its key from another job's issuer is refused as a bad request; the job's chain is taken (the
// call goes on to fetch, and fails there: nothing serves the source), and is kept, so a
// descriptor without a chain goes on too.
func TestPullCertificate(t *testing.T) {
	h, err := NewHandler(Faults{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	h.AllowPullNetworks([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	_, _, job := remotetest.NewJob(t)
	_, _, other := remotetest.NewJob(t)
	req := remotetest.Tasks(1, 4, 6, 3)[0]
	d := dispatch.Descriptor{Task: 1, Hi: req.NumRows(), Source: "127.0.0.1:1", CA: job.CA()}
	call := func(chain []byte) error {
		d := d
		d.Chain = chain
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := h.Handle(ctx, dispatch.EncodeDescriptor(&req, d))
		return err
	}
	errType := func(err error) string {
		var e *Error
		if !errors.As(err, &e) {
			return ""
		}
		return e.Type
	}
	err = call(nil)
	if errType(err) != remote.ErrorTypeNeedCertificate {
		t.Fatalf("first descriptor: %v, want %s", err, remote.ErrorTypeNeedCertificate)
	}
	nc, perr := remote.ParseNeedCertificate(err.Error())
	if perr != nil {
		t.Fatal(perr)
	}
	if again := call(nil); errType(again) != remote.ErrorTypeNeedCertificate || again.Error() != err.Error() {
		t.Errorf("second descriptor without a chain: %v, want the same key again", again)
	}
	certify := func(is *pki.Issuer, pub []byte) []byte {
		chain, err := is.Certify(pub)
		if err != nil {
			t.Fatal(err)
		}
		return chain
	}
	_, otherPub, err := pki.NewFunctionKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := call(certify(job, otherPub)); errType(err) != remote.ErrorTypeNeedCertificate {
		t.Errorf("a chain for another key: %v, want %s", err, remote.ErrorTypeNeedCertificate)
	}
	if err := call(certify(other, nc.PublicKey)); errType(err) != remote.ErrorTypeBadRequest || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("a chain of another job's issuer: %v, want a bad request, unknown authority", err)
	}
	for _, c := range []struct {
		name  string
		chain []byte
	}{{"the job's chain", certify(job, nc.PublicKey)}, {"then none", nil}} {
		if err := call(c.chain); errType(err) != remote.ErrorTypeFailed || !strings.Contains(err.Error(), "fetch inputs from graph server 127.0.0.1:1") {
			t.Errorf("%s: %v, want the fetch to fail", c.name, err)
		}
	}
}
