package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIssueWriteLoad issues a bundle, writes it, loads it back and checks the leaf field by
// field: P-256, server and client use, ServerName, signed by the bundle's CA and by no other.
func TestIssueWriteLoad(t *testing.T) {
	b, err := Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "creds")
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CAFile, CertFile, KeyFile, TokenFile} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v", name, err, st.Mode())
		}
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Errorf("leaf key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if leaf.Subject.CommonName != "ns/job" || len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != ServerName || leaf.IsCA {
		t.Errorf("leaf: CN %q, DNS names %v, CA %v", leaf.Subject.CommonName, leaf.DNSNames, leaf.IsCA)
	}
	opts := x509.VerifyOptions{Roots: c.ca, DNSName: ServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := leaf.Verify(opts); err != nil {
		t.Errorf("as a server: %v", err)
	}
	opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if _, err := leaf.Verify(opts); err != nil {
		t.Errorf("as a client: %v", err)
	}
	other, err := Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	oc, err := other.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	opts.Roots = oc.ca
	if _, err := leaf.Verify(opts); err == nil {
		t.Error("the leaf verifies against another job's CA")
	}
	if len(b.Token) != 64 || b.Token == other.Token {
		t.Errorf("tokens %q and %q", b.Token, other.Token)
	}
	if tok, err := LoadToken(filepath.Join(dir, TokenFile)); err != nil || tok != b.Token {
		t.Errorf("LoadToken: %q, %v", tok, err)
	}
}

// TestLoadErrors expects each missing or bad file to be named.
func TestLoadErrors(t *testing.T) {
	b, err := Issue("job")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file, data, want string
	}{
		{CAFile, "", "ca.crt: no PEM certificate"},
		{KeyFile, "junk", "tls.crt and tls.key"},
		{CertFile, "-", "tls.crt and tls.key"},
	} {
		dir := t.TempDir()
		if err := b.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bad %s: %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), CAFile) {
		t.Errorf("empty folder: %v", err)
	}
	empty := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadToken(empty); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("empty token: %v", err)
	}
}
