package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBackendFlagErrors: bad backend flags fail with an error naming the flag, before any
// process starts.
func TestBackendFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--backend", "lambda", "--lambda-function", "f", "--lambda-region", "us-east-1"}, "--backend lambda needs --graph-servers"},
		{[]string{"train", "--graph-servers", "2", "--backend", "gpu"}, `--backend "gpu"`},
		{[]string{"train", "--graph-servers", "2", "--backend", "lambda", "--lambda-region", "us-east-1"}, "--lambda-function"},
		{[]string{"train", "--graph-servers", "2", "--backend", "knative"}, "--knative-urls is required"},
		{[]string{"train", "--graph-servers", "2", "--backend", "knative", "--knative-urls", "http://fn", "--endpoint-concurrency", "1"}, "1 endpoints for 2 graph servers"},
		{[]string{"train", "--graph-servers", "2", "--backend", "knative", "--knative-urls", "http://fn", "--max-concurrency", "-1"}, "--max-concurrency -1"},
		{[]string{"train", "--graph-servers", "2", "--backend", "knative", "--knative-urls", "http://fn"}, "--knative-token-file is required"},
	} {
		cmd := newRootCommand()
		cmd.SetArgs(c.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("dorylus %s: %v, want an error with %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
