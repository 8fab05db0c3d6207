package pki

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Roles of an Identity.
const (
	RoleGraphServer = "graph-server"
	RoleParamServer = "param-server"
	RoleFunction    = "function"
)

// identityScheme is the scheme of the URI that names a certificate's Identity.
const identityScheme = "dorylus"

// Identity is the one server a certificate belongs to: its role and ordinal (a graph server's
// partition, a parameter server's shard; 0 for the function). It is carried in the
// certificate as the URI SAN dorylus:<role>/<ordinal>; a certificate without one (the leaf
// every server of a job shares, when nothing issued one per server) names no server.
type Identity struct {
	Role    string
	Ordinal int
}

// GraphServer is the identity of graph server p.
func GraphServer(p int) Identity { return Identity{RoleGraphServer, p} }

// ParamServer is the identity of parameter-server shard s.
func ParamServer(s int) Identity { return Identity{RoleParamServer, s} }

func (id Identity) String() string { return fmt.Sprintf("%s %d", id.Role, id.Ordinal) }

// uri is the identity's URI SAN.
func (id Identity) uri() *url.URL {
	return &url.URL{Scheme: identityScheme, Opaque: id.Role + "/" + strconv.Itoa(id.Ordinal)}
}

// IdentityOf returns the identity a verified certificate names, and false when it names none.
// A certificate naming more than one, or one that does not parse, names none the caller may
// trust: an error.
func IdentityOf(cert *x509.Certificate) (Identity, bool, error) {
	var out []Identity
	for _, u := range cert.URIs {
		if u.Scheme != identityScheme {
			continue
		}
		role, ord, ok := strings.Cut(u.Opaque, "/")
		n, err := strconv.Atoi(ord)
		if !ok || err != nil || n < 0 || role == "" {
			return Identity{}, false, fmt.Errorf("certificate %q: identity %q is not %s:<role>/<ordinal>", cert.Subject.CommonName, u, identityScheme)
		}
		out = append(out, Identity{role, n})
	}
	switch len(out) {
	case 0:
		return Identity{}, false, nil
	case 1:
		return out[0], true, nil
	}
	return Identity{}, false, fmt.Errorf("certificate %q names %d identities %v", cert.Subject.CommonName, len(out), out)
}
