// Package pki makes and loads a job's data-plane credentials: a certificate authority of its
// own (ECDSA P-256), one leaf certificate issued by it that every server of the job presents
// as server and as client, a function certificate with which the HTTP function serves HTTPS
// (DNS name FunctionServerName) and fetches on the pull data path, and a bearer token for the
// HTTP function. A Reloader keeps the function's credentials up to date with a mounted Secret.
//
// The CA is per job and its private key is discarded once the certificates are signed:
// chaining to the job's CA is the authentication, and new credentials (a restart, a resumed
// job) come from a new CA, which also revokes the old set. Every leaf carries the DNS name
// ServerName, which clients verify as the server's name, so that one certificate serves every
// address of the job (pod IPs, Service names, loopback). A function that mounts no Secret
// (Lambda) makes a key of its own, and a graph server certifies it with the job's function
// issuer (Issuer), a CA below the job's that signs client certificates naming no server: no
// private key travels. Servers let a function's certificate (one that does not name
// ServerName, IsFunction) fetch a task's inputs and weights and nothing else. Issue given
// identities also signs one certificate per server naming its role and ordinal (Identity, a
// URI SAN), with which a server checks the sender a request claims (IdentityOf).
//
// On disk the credentials use the kubernetes.io/tls Secret layout plus ca.crt, token,
// function.crt, function.key, function-ca.crt and function-ca.key: CAFile, CertFile, KeyFile,
// TokenFile, FunctionCertFile, FunctionKeyFile, FunctionCAFile and FunctionCAKeyFile in one
// folder.
package pki
