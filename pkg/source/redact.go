package source

import "strings"

// redactedMark stands in for a secret in what Redact and Fetch's errors print.
const redactedMark = "REDACTED"

// Redact returns spec as errors, logs and status may print it: a URL's password and its whole
// query (where a presigned URL carries its signature and credential) replaced by REDACTED.
// Anything else is returned as it is.
func Redact(spec string) string {
	for _, s := range urlSecrets(spec) {
		spec = strings.ReplaceAll(spec, s.raw, s.shown)
	}
	return spec
}

// secret is a piece of a URL that must not be printed, and what is printed instead.
type secret struct{ raw, shown string }

// urlSecrets returns the secrets of spec when it is a URL, read from its text so that a URL that
// does not parse keeps them too: its user info's password (with the separators around it, so
// that no other text matches) and its query.
func urlSecrets(spec string) []secret {
	_, rest, ok := strings.Cut(spec, "://")
	if !ok {
		return nil
	}
	var out []secret
	authority, _, _ := strings.Cut(rest, "/")
	authority, _, _ = strings.Cut(authority, "?")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if _, pw, ok := strings.Cut(authority[:at], ":"); ok && pw != "" {
			out = append(out, secret{":" + pw + "@", ":" + redactedMark + "@"})
		}
	}
	if q := strings.Index(rest, "?"); q >= 0 {
		query, _, _ := strings.Cut(rest[q:], "#")
		if len(query) > 1 {
			out = append(out, secret{query, "?" + redactedMark})
		}
	}
	return out
}

// redactedError is an error whose message has the secrets of a dataset URL replaced, whatever
// layer wrote them into it (the HTTP client's own errors print the URL with its query); it
// unwraps to the original, so callers still branch on its kind.
type redactedError struct {
	err     error
	secrets []secret
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s.raw, s.shown)
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// redactErr returns err with the secrets of spec kept out of its message; nil stays nil.
func redactErr(err error, spec string) error {
	secrets := urlSecrets(spec)
	if err == nil || len(secrets) == 0 {
		return err
	}
	return &redactedError{err: err, secrets: secrets}
}
