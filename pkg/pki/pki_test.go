package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
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

// TestFunctionCertificate checks the HTTP function's certificate: a server's for
// FunctionServerName and a client's of the job's CA, which IsFunction tells apart from the
// servers' and which no client takes for a server's (ServerName).
func TestFunctionCertificate(t *testing.T) {
	b, err := Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	c, err := (&Bundle{CA: b.CA, Cert: b.FunctionCert, Key: b.FunctionKey}).Credentials()
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
}

// TestFunctionIssuer certifies a function's key with the job's function issuer: the chain is
// a client's of the job's CA only, a function's (IsFunction), for that key alone; the issuer
// cannot make a server's certificate (its usage and name constraints), another job's issuer's
// chain does not chain to the job's CA, and a broken issuer key is refused naming its file.
func TestFunctionIssuer(t *testing.T) {
	b, err := Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := b.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	is, err := LoadIssuer(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := func() *ecdsa.PrivateKey {
		k, _, err := NewFunctionKey()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	certify := func(is *Issuer, k *ecdsa.PrivateKey) []byte {
		pub, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		chain, err := is.Certify(pub)
		if err != nil {
			t.Fatal(err)
		}
		return chain
	}
	fn := key()
	chain := certify(is, fn)
	c, err := ChainCredentials(is.CA(), chain, fn)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(c.NotAfter()); d > CertifiedValidity || d < CertifiedValidity-2*time.Minute {
		t.Errorf("certified for %v, want %v", d, CertifiedValidity)
	}
	certs, err := x509.ParseCertificates(chain)
	if err != nil || len(certs) != 2 {
		t.Fatalf("chain of %d certificates (%v), want the function's and the issuer's", len(certs), err)
	}
	leaf := certs[0]
	if !IsFunction(leaf) || len(leaf.DNSNames) != 0 || leaf.IsCA {
		t.Errorf("certified: DNS names %v, CA %v", leaf.DNSNames, leaf.IsCA)
	}
	inter := x509.NewCertPool()
	inter.AddCert(certs[1])
	opts := x509.VerifyOptions{Roots: c.ca, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := leaf.Verify(opts); err == nil {
		t.Error("a certified function key verifies as a server's")
	}
	// the issuer's key cannot make a certificate that names a server, whatever it asks
	for _, name := range []string{ServerName, FunctionServerName} {
		n, _ := serial()
		tmpl := &x509.Certificate{SerialNumber: n, DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, &fn.PublicKey, is.key)
		if err != nil {
			t.Fatal(err)
		}
		forged, _ := x509.ParseCertificate(der)
		for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := forged.Verify(x509.VerifyOptions{Roots: c.ca, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}}); err == nil {
				t.Errorf("the issuer made a certificate naming %s that verifies for %v", name, u)
			}
		}
	}
	if _, err := ChainCredentials(is.CA(), chain, key()); !errors.Is(err, ErrOtherKey) {
		t.Errorf("a chain for another key: %v, want ErrOtherKey", err)
	}
	other, err := Issue("ns/job")
	if err != nil {
		t.Fatal(err)
	}
	ois, err := other.Issuer()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ChainCredentials(is.CA(), certify(ois, fn), fn); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("another job's issuer's chain: %v, want unknown authority", err)
	}
	if _, err := is.Certify([]byte("junk")); err == nil {
		t.Error("a junk public key was certified")
	}
	if err := os.WriteFile(filepath.Join(dir, FunctionCAKeyFile), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadIssuer(dir); err == nil || !strings.Contains(err.Error(), FunctionCAKeyFile) {
		t.Errorf("bad %s: %v", FunctionCAKeyFile, err)
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

// TestServerIdentities: Issue with identities signs one certificate per server, naming
// ServerName and its identity (dorylus:<role>/<ordinal>), valid for server and client use
// under the job's CA; ForServer puts it in place of the shared leaf, which names no identity,
// and holds no other server's; the function certificate is function 0's. A certificate that
// names two identities, or a malformed one, names none that may be trusted.
func TestServerIdentities(t *testing.T) {
	ids := []Identity{GraphServer(0), GraphServer(1), ParamServer(0)}
	b, err := Issue("ns/job", ids...)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(p []byte) *x509.Certificate {
		t.Helper()
		blk, _ := pem.Decode(p)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	roots := x509.NewCertPool()
	roots.AddCert(parse(b.CA))
	if len(b.Servers) != len(ids) {
		t.Fatalf("%d server certificates, want %d", len(b.Servers), len(ids))
	}
	for _, id := range ids {
		own, err := b.ForServer(id)
		if err != nil {
			t.Fatal(err)
		}
		cert := parse(own.Cert)
		if got, ok, err := IdentityOf(cert); err != nil || !ok || got != id {
			t.Errorf("%s's certificate names %v %v %v", id, got, ok, err)
		}
		for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: ServerName, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
				t.Errorf("%s's certificate for %v: %v", id, use, err)
			}
		}
		if _, err := own.Credentials(); err != nil || own.Servers != nil || string(own.Files()[CertFile]) != string(own.Cert) || string(own.Cert) == string(b.Cert) {
			t.Errorf("%s's bundle: %v, %d server certificates; want its own pair alone", id, err, len(own.Servers))
		}
	}
	if _, ok, err := IdentityOf(parse(b.Cert)); ok || err != nil {
		t.Errorf("the shared leaf names an identity (%v, %v)", ok, err)
	}
	if got, ok, err := IdentityOf(parse(b.FunctionCert)); !ok || err != nil || got != (Identity{RoleFunction, 0}) {
		t.Errorf("the function certificate names %v %v %v, want function 0", got, ok, err)
	}
	if _, err := b.ForServer(GraphServer(5)); err == nil || err.Error() != "no certificate issued for graph-server 5" {
		t.Errorf("ForServer of a server not issued: %v", err)
	}
	for name, uris := range map[string][]string{
		"two identities": {"dorylus:graph-server/0", "dorylus:graph-server/1"},
		"no ordinal":     {"dorylus:graph-server/x"},
		"no role":        {"dorylus:/1"},
	} {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: name}}
		for _, u := range uris {
			parsed, err := url.Parse(u)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = append(c.URIs, parsed)
		}
		if _, ok, err := IdentityOf(c); ok || err == nil {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
}
