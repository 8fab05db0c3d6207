package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// CertifiedValidity is how long a certificate Issuer.Certify signs is valid: a function asks
// again once it nears its end (RenewBefore), so a key that leaks from a function's memory
// serves an hour at most.
const CertifiedValidity = time.Hour

// RenewBefore is how long before its end a certified function certificate is no longer used.
const RenewBefore = 10 * time.Minute

// Issuer signs certificates for the keys functions make themselves: the function issuer of a
// job, a CA below the job's that signs for client use only (its certificates name neither
// ServerName nor FunctionServerName, and chain through it to the job's CA), which servers
// let call only rpc.FunctionMethods. A graph server holds it and certifies the public key a
// function answers with (remote.NeedCertificate): the function's private key never leaves
// it, and no request carries one.
type Issuer struct {
	root     []byte // the job's CA certificate, DER
	cert     *x509.Certificate
	key      crypto.Signer
	job      string
	validity time.Duration
}

// LoadIssuer reads the job's CA and the function issuer from dir.
func LoadIssuer(dir string) (*Issuer, error) {
	f, err := readFiles(dir, CAFile, FunctionCAFile, FunctionCAKeyFile)
	if err != nil {
		return nil, fmt.Errorf("load the function issuer: %w", err)
	}
	b := Bundle{CA: f[0], FunctionCA: f[1], FunctionCAKey: f[2]}
	is, err := b.Issuer()
	if err != nil {
		return nil, fmt.Errorf("load the function issuer from %s: %w", dir, err)
	}
	return is, nil
}

// Issuer returns the bundle's function issuer, checked: its certificate chains to the job's CA
// and is its key's.
func (b *Bundle) Issuer() (*Issuer, error) {
	pair, err := tls.X509KeyPair(b.FunctionCA, b.FunctionCAKey)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", FunctionCAFile, FunctionCAKeyFile, err)
	}
	blk, _ := pem.Decode(b.CA)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", CAFile)
	}
	root, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CAFile, err)
	}
	if err := pair.Leaf.CheckSignatureFrom(root); err != nil || !pair.Leaf.IsCA {
		return nil, fmt.Errorf("%s: not a CA the job's CA signed (%v)", FunctionCAFile, err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", FunctionCAKeyFile)
	}
	return &Issuer{root: blk.Bytes, cert: pair.Leaf, key: key, job: root.Subject.CommonName, validity: CertifiedValidity}, nil
}

// readFiles reads the named files of dir.
func readFiles(dir string, names ...string) ([][]byte, error) {
	out := make([][]byte, len(names))
	for i, n := range names {
		var err error
		if out[i], err = os.ReadFile(filepath.Join(dir, n)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// NewFunctionKey makes a key a function has certified (Issuer.Certify): ECDSA P-256, with its
// public key, PKIX DER.
func NewFunctionKey() (*ecdsa.PrivateKey, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("make a function key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, nil, fmt.Errorf("make a function key: %w", err)
	}
	return k, pub, nil
}

// CA returns the job's CA certificate, DER: what a pull descriptor carries, with which a
// function verifies the servers and finds its certificate for the job.
func (is *Issuer) CA() []byte { return is.root }

// Certify signs a client certificate for the public key pub (PKIX DER, ECDSA P-256), valid
// from a minute ago for CertifiedValidity, and returns its chain: the certificate then the
// issuer's, DER.
func (is *Issuer) Certify(pub []byte) ([]byte, error) {
	k, err := x509.ParsePKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("certify a function key: %w", err)
	}
	if ek, ok := k.(*ecdsa.PublicKey); !ok || ek.Curve.Params().BitSize != 256 {
		return nil, fmt.Errorf("certify a function key: a %T, want ECDSA P-256", k)
	}
	n, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Minute)
	tmpl := &x509.Certificate{
		SerialNumber: n,
		Subject:      pkix.Name{CommonName: "function of " + is.job},
		NotBefore:    now, NotAfter: now.Add(is.validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, is.cert, k, is.key)
	if err != nil {
		return nil, fmt.Errorf("certify a function key: %w", err)
	}
	return append(der, is.cert.Raw...), nil
}

// ErrOtherKey is ChainCredentials' error for a chain certifying another key than the
// function's (another instance's).
var ErrOtherKey = errors.New("function certificate: not for this function's key")

// ChainCredentials returns the credentials of a client of the job whose CA certificate is ca
// (DER), presenting chain (Certify's) with key, the private key of its first certificate: the
// certificate must be key's, valid now for client use and chain to ca.
func ChainCredentials(ca, chain []byte, key crypto.Signer) (*Credentials, error) {
	root, err := x509.ParseCertificate(ca)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	certs, err := x509.ParseCertificates(chain)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("function certificate chain: no certificate (%v)", err)
	}
	leaf := certs[0]
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return nil, ErrOtherKey
	}
	pool, inter := x509.NewCertPool(), x509.NewCertPool()
	pool.AddCert(root)
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("function certificate: %w", err)
	}
	var raw [][]byte
	for _, c := range certs {
		raw = append(raw, c.Raw)
	}
	return &Credentials{cert: tls.Certificate{Certificate: raw, PrivateKey: key, Leaf: leaf}, ca: pool, caDER: bytes.Clone(ca)}, nil
}

// NotAfter returns the end of the credentials' certificate.
func (c *Credentials) NotAfter() time.Time { return c.cert.Leaf.NotAfter }

// Fingerprint identifies the credentials: the digest of the CA and the certificate they
// present.
func (c *Credentials) Fingerprint() [sha256.Size]byte {
	h := sha256.New()
	h.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(c.caDER))))
	h.Write(c.caDER)
	h.Write(c.cert.Certificate[0])
	return [sha256.Size]byte(h.Sum(nil))
}
