package launcher

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// TestIssueCredentialsPerServer: a launched run's credentials hold, beside the job's bundle, a
// folder per graph server and parameter server whose certificate names that server alone
// (pki.IdentityOf) and loads as its credentials; no folder holds another server's key.
func TestIssueCredentialsPerServer(t *testing.T) {
	dir, own, err := issueCredentials(t.TempDir(), 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Load(dir); err != nil {
		t.Errorf("the job's bundle: %v", err)
	}
	want := []pki.Identity{pki.GraphServer(0), pki.GraphServer(1), pki.ParamServer(0)}
	if len(own) != len(want) {
		t.Fatalf("%d server folders %v, want %v", len(own), own, want)
	}
	keys := map[string]pki.Identity{}
	for _, id := range want {
		sub, ok := own[id]
		if !ok || filepath.Dir(sub) != dir {
			t.Fatalf("%s's folder %q, want one in %s", id, sub, dir)
		}
		if _, err := pki.Load(sub); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		data, err := os.ReadFile(filepath.Join(sub, pki.CertFile))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(data)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok, err := pki.IdentityOf(cert); !ok || err != nil || got != id {
			t.Errorf("%s's certificate names %v (%v, %v)", id, got, ok, err)
		}
		key, err := os.ReadFile(filepath.Join(sub, pki.KeyFile))
		if err != nil {
			t.Fatal(err)
		}
		if other, seen := keys[string(key)]; seen {
			t.Errorf("%s holds %s's key", id, other)
		}
		keys[string(key)] = id
	}
}
