package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// File names in a credentials folder (a mounted Secret's keys).
const (
	CAFile    = "ca.crt"  // the job's CA certificate, PEM
	CertFile  = "tls.crt" // the leaf certificate, PEM
	KeyFile   = "tls.key" // the leaf's private key, PEM (PKCS #8)
	TokenFile = "token"   // the HTTP function's bearer token

	FunctionCertFile = "function.crt" // the HTTP function's certificate, PEM
	FunctionKeyFile  = "function.key" // its private key, PEM (PKCS #8)

	FunctionCAFile    = "function-ca.crt" // the function issuer's CA certificate, PEM
	FunctionCAKeyFile = "function-ca.key" // its private key, PEM (PKCS #8)
)

// ServerName is the DNS name in every leaf certificate, which clients verify as the server's
// name: the CA is the job's own, so a certificate chaining to it is one of the job's.
const ServerName = "dorylus-data-plane"

// FunctionServerName is the DNS name in the HTTP function's certificate, which the graph
// servers verify as the function's name. Only the servers' certificates name ServerName: a
// verified client certificate without it is a function's (IsFunction).
const FunctionServerName = "dorylus-function"

// Validity is how long issued certificates are valid: they are replaced whenever the job
// restarts, so this bounds only one uninterrupted run.
const Validity = 365 * 24 * time.Hour

// Bundle is a job's credentials in their on-disk form.
type Bundle struct {
	CA, Cert, Key []byte // PEM
	// FunctionCert and FunctionKey are the HTTP function's: it serves HTTPS with them as
	// FunctionServerName and fetches with them on the pull data path, where servers let it
	// call nothing but the fetches of a task's inputs and weights (rpc.FunctionMethods).
	FunctionCert, FunctionKey []byte // PEM
	// FunctionCA and FunctionCAKey are the function issuer (Issuer): a CA below the job's that
	// signs certificates for client use only, naming neither ServerName nor
	// FunctionServerName, for the keys functions make themselves (Lambda, which mounts no
	// Secret). The graph servers of a pull job hold it.
	FunctionCA, FunctionCAKey []byte // PEM
	Token                     string // hex, 256 random bits
	// Servers are the certificates of one server each, with its Identity in the URI SAN
	// beside ServerName, when Issue was given identities.
	Servers []ServerCert
}

// ServerCert is the certificate and key of one server (Bundle.ForServer).
type ServerCert struct {
	ID        Identity
	Cert, Key []byte // PEM
}

// Issue makes a new CA named for the job, signs with it one leaf certificate (server and client
// use, DNS name ServerName), one for each of servers (the same, naming its Identity too), one
// function certificate (server and client use, DNS name FunctionServerName, identity function
// 0) and the function issuer's CA, all valid from a minute ago for Validity, discards the CA's
// key and draws a token.
func Issue(job string, servers ...Identity) (*Bundle, error) {
	now := time.Now().Add(-time.Minute) // clocks of the job's nodes may lag a little
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	caTmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "dorylus job CA " + job},
		NotBefore: now, NotAfter: now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true, MaxPathLen: 1, // the function issuer below it, no further
	}
	if caTmpl.SerialNumber, err = serial(); err != nil {
		return nil, err
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	b := &Bundle{CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	leaf := &x509.Certificate{
		Subject:   pkix.Name{CommonName: job},
		DNSNames:  []string{ServerName},
		NotBefore: now, NotAfter: now.Add(Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if b.Cert, b.Key, err = sign(leaf, ca, caKey); err != nil {
		return nil, fmt.Errorf("leaf: %w", err)
	}
	for _, id := range servers {
		own := *leaf
		own.Subject = pkix.Name{CommonName: job + " " + id.String()}
		own.URIs = []*url.URL{id.uri()}
		sc := ServerCert{ID: id}
		if sc.Cert, sc.Key, err = sign(&own, ca, caKey); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		b.Servers = append(b.Servers, sc)
	}
	fn := &x509.Certificate{
		Subject:   pkix.Name{CommonName: job + " function"},
		DNSNames:  []string{FunctionServerName},
		URIs:      []*url.URL{Identity{RoleFunction, 0}.uri()},
		NotBefore: now, NotAfter: now.Add(Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if b.FunctionCert, b.FunctionKey, err = sign(fn, ca, caKey); err != nil {
		return nil, fmt.Errorf("function certificate: %w", err)
	}
	issuer := &x509.Certificate{
		Subject:   pkix.Name{CommonName: "dorylus job function issuer " + job},
		NotBefore: now, NotAfter: now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, // nothing it signs serves
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
		ExcludedDNSDomains: []string{ServerName, FunctionServerName},
	}
	if b.FunctionCA, b.FunctionCAKey, err = sign(issuer, ca, caKey); err != nil {
		return nil, fmt.Errorf("function issuer: %w", err)
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	b.Token = hex.EncodeToString(tok)
	return b, nil
}

// sign issues tmpl with a new P-256 key, signed by ca: the certificate and key, PEM.
func sign(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (cert, key []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	if tmpl.SerialNumber, err = serial(); err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, nil, fmt.Errorf("key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n, nil
}

// Files returns the bundle as the contents of a credentials folder, by file name.
func (b *Bundle) Files() map[string][]byte {
	return map[string][]byte{CAFile: b.CA, CertFile: b.Cert, KeyFile: b.Key, TokenFile: []byte(b.Token),
		FunctionCertFile: b.FunctionCert, FunctionKeyFile: b.FunctionKey, FunctionCAFile: b.FunctionCA, FunctionCAKeyFile: b.FunctionCAKey}
}

// ForServer is the bundle as server id holds it: its own certificate and key in place of the
// shared leaf, and no other server's.
func (b *Bundle) ForServer(id Identity) (*Bundle, error) {
	for _, sc := range b.Servers {
		if sc.ID == id {
			out := *b
			out.Cert, out.Key, out.Servers = sc.Cert, sc.Key, nil
			return &out, nil
		}
	}
	return nil, fmt.Errorf("no certificate issued for %s", id)
}

// WriteDir writes the bundle into dir (created if missing), readable by the owner only.
func (b *Bundle) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	for name, data := range b.Files() {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("write credentials: %w", err)
		}
	}
	return nil
}

// Credentials are the TLS part of a job's credentials, parsed.
type Credentials struct {
	cert  tls.Certificate
	ca    *x509.CertPool
	caDER []byte // the job's CA certificate
}

// Load reads the CA, certificate and key from dir.
func Load(dir string) (*Credentials, error) { return loadPair(dir, CertFile, KeyFile) }

// LoadFunction reads the HTTP function's credentials from dir: the CA, FunctionCertFile and
// FunctionKeyFile.
func LoadFunction(dir string) (*Credentials, error) {
	return loadPair(dir, FunctionCertFile, FunctionKeyFile)
}

// loadPair reads the CA and the certificate and key of the given file names from dir.
func loadPair(dir, certFile, keyFile string) (*Credentials, error) {
	f, err := readFiles(dir, CAFile, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS credentials: %w", err)
	}
	c, err := credentials(f[0], f[1], f[2], certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS credentials from %s: %w", dir, err)
	}
	return c, nil
}

// Credentials parses the bundle's CA, certificate and key.
func (b *Bundle) Credentials() (*Credentials, error) {
	return credentials(b.CA, b.Cert, b.Key, CertFile, KeyFile)
}

// credentials parses a CA and a certificate and key, all PEM, named certFile and keyFile in
// errors.
func credentials(caPEM, certPEM, keyPEM []byte, certFile, keyFile string) (*Credentials, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	blk, _ := pem.Decode(caPEM)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no PEM certificate", CAFile)
	}
	ca, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CAFile, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &Credentials{cert: cert, ca: pool, caDER: blk.Bytes}, nil
}

// CA returns the job's CA certificate, DER.
func (c *Credentials) CA() []byte { return c.caDER }

// ServerConfig is the TLS configuration of a server: TLS 1.3, presenting the job's
// certificate, and requiring a client certificate that chains to the job's CA.
func (c *Credentials) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.ca,
	}
}

// ClientConfig is the TLS configuration of a client: TLS 1.3, presenting the job's
// certificate, and accepting only a server whose certificate chains to the job's CA and names
// ServerName.
func (c *Credentials) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.cert},
		RootCAs:      c.ca,
		ServerName:   ServerName,
	}
}

// FunctionClientConfig is the TLS configuration of a caller of the HTTP function: TLS 1.3,
// accepting only a server whose certificate chains to the job's CA and names
// FunctionServerName. It presents no certificate: the job's bearer token authenticates the
// caller.
func (c *Credentials) FunctionClientConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: c.ca, ServerName: FunctionServerName}
}

// IsFunction reports whether cert, a verified client certificate, is a function's: one that
// does not name ServerName.
func IsFunction(cert *x509.Certificate) bool {
	return !slices.Contains(cert.DNSNames, ServerName)
}

// LoadToken reads a bearer token from path; an empty file is an error.
func LoadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("load token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("load token: " + path + " is empty")
	}
	return tok, nil
}
