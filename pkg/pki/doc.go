// Package pki makes and loads a job's data-plane credentials: a certificate authority of its
// own (ECDSA P-256), one leaf certificate issued by it that every process of the job presents
// as server and as client, and a bearer token for the HTTP function.
//
// The CA is per job and its private key is discarded once the leaf is signed: chaining to the
// job's CA is the authentication, and new credentials (a restart, a resumed job) come from a
// new CA, which also revokes the old set. Every leaf carries the DNS name ServerName, which
// clients verify as the server's name, so that one certificate serves every address of the
// job (pod IPs, Service names, loopback).
//
// On disk the credentials use the kubernetes.io/tls Secret layout plus ca.crt and token:
// CAFile, CertFile, KeyFile and TokenFile in one folder.
package pki
