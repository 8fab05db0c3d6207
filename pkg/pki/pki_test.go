package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
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
	for _, name := range []string{CAFile, CertFile, KeyFile, TokenFile, FunctionCertFile, FunctionKeyFile} {
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
	if IsFunction(leaf) {
		t.Error("the leaf is taken for a function certificate")
	}
}

// TestFunctionIdentity loads the function identity of a bundle: a client certificate of the
// job's CA, which no server would accept as its peer's and IsFunction tells apart; its
// credentials trust the job's CA alone.
func TestFunctionIdentity(t *testing.T) {
	b, err := Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	id, err := LoadIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(id.CA) + len(id.Cert) + len(id.Key); n > 1500 {
		t.Errorf("identity of %d bytes, want a small one", n)
	}
	c, err := id.Credentials()
	if err != nil {
		t.Fatal(err)
	}
	fn, err := x509.ParseCertificate(c.cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if !IsFunction(fn) || fn.Subject.CommonName != "ns/job function" || !slices.Equal(fn.DNSNames, []string{FunctionServerName}) || fn.IsCA {
		t.Errorf("function certificate: CN %q, DNS names %v, CA %v, usage %v", fn.Subject.CommonName, fn.DNSNames, fn.IsCA, fn.ExtKeyUsage)
	}
	opts := x509.VerifyOptions{Roots: c.ca, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := fn.Verify(opts); err != nil {
		t.Errorf("as a client: %v", err)
	}
	opts.KeyUsages, opts.DNSName = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, FunctionServerName
	if _, err := fn.Verify(opts); err != nil {
		t.Errorf("as the HTTP function's server: %v", err)
	}
	opts.DNSName = ServerName
	if _, err := fn.Verify(opts); err == nil {
		t.Error("the function certificate verifies as a graph or parameter server's")
	}
	other, err := Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	mixed := id
	mixed.Key = pemDER(t, other.FunctionKey)
	if _, err := mixed.Credentials(); err == nil {
		t.Error("an identity whose key is not its certificate's is accepted")
	}
	mixed.Cert = pemDER(t, other.FunctionCert)
	if _, err := mixed.Credentials(); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("an identity whose certificate is of another CA: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, FunctionKeyFile), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIdentity(dir); err == nil || !strings.Contains(err.Error(), FunctionKeyFile) {
		t.Errorf("bad %s: %v", FunctionKeyFile, err)
	}
}

// pemDER returns the bytes of the first PEM block of b.
func pemDER(t *testing.T, b []byte) []byte {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	return blk.Bytes
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
