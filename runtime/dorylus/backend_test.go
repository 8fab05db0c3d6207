package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// writeRunConfig writes a valid run config with backend b and returns its path.
func writeRunConfig(t *testing.T, b jobconfig.Backend) string {
	t.Helper()
	c := &jobconfig.RunConfig{
		Version:      jobconfig.Version,
		Job:          jobconfig.JobRef{Name: "cora", Namespace: "ml", UID: "u-1"},
		Dataset:      jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: "cora"},
		Model:        jobconfig.Model{Architecture: jobconfig.ArchitectureGCN, Layers: 2, Hidden: 16, Dropout: 0.5},
		Training:     jobconfig.Training{Epochs: 200, LearningRate: 0.01, WeightDecay: 5e-4, Staleness: jobconfig.Staleness{Bound: 1}, Seed: 1},
		GraphServers: jobconfig.GraphServers{Replicas: 1, Port: jobconfig.GraphServerPort, Peers: []string{"cora-gs-0.cora-gs.ml.svc:5000"}},
		ParameterServers: jobconfig.ParameterServers{Replicas: 1, Port: jobconfig.ParamServerPort,
			Service: "cora-ps.ml.svc:5100", Shards: []string{"cora-ps-0.cora-ps.ml.svc:5100"}},
		Backend:  b,
		Security: jobconfig.Security{TLSDir: jobconfig.CredentialsDir},
	}
	data, err := jobconfig.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBackendFromConfig reads the lambda and knative backends of a run config into the
// graph-server options and builds them: the concurrency and intervals follow maxConcurrency,
// the Secret's folder supplies the credentials, and the pull data path is chosen (its store
// required).
func TestBackendFromConfig(t *testing.T) {
	creds := t.TempDir()
	for name, v := range map[string]string{"accessKeyID": "AKID", "secretAccessKey": "secret"} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	lam := jobconfig.Backend{Kind: jobconfig.BackendLambda, Lambda: &jobconfig.Lambda{FunctionName: "dorylus-fn", Region: "eu-west-1",
		MemoryMB: 3008, MaxConcurrency: 3, DataPath: jobconfig.DataPathPull, Endpoint: "http://127.0.0.1:9000", CredentialsDir: creds}}
	var o graphServerOptions
	if err := o.fromConfig(writeRunConfig(t, lam)); err != nil {
		t.Fatal(err)
	}
	want := backendOptions{kind: "lambda", lambdaFunction: "dorylus-fn", lambdaRegion: "eu-west-1", lambdaEndpoints: "http://127.0.0.1:9000",
		lambdaCredentials: creds, maxConcurrency: 3, perEndpoint: 3, dataPath: jobconfig.DataPathPull}
	if o.backend != want {
		t.Fatalf("lambda options %+v, want %+v", o.backend, want)
	}
	if _, err := o.backend.build(context.Background(), 8, cpu.Options{}, nil); err == nil || !strings.Contains(err.Error(), "pull") {
		t.Errorf("pull data path without a store: %v, want an error", err)
	}
	store, err := remote.NewStore("127.0.0.1:7000", pki.Identity{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.backend.build(context.Background(), 8, cpu.Options{}, store)
	if err != nil {
		t.Fatal(err)
	}
	if rb, ok := b.(*remote.Backend); !ok || rb.Concurrency() != 3 {
		t.Errorf("backend %T with concurrency %d, want a remote backend of 3", b, b.Concurrency())
	}

	token := filepath.Join(creds, "token")
	if err := os.WriteFile(token, []byte("t0ken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kn := jobconfig.Backend{Kind: jobconfig.BackendKnative, Knative: &jobconfig.Knative{URL: "http://cora-fn.ml.svc.cluster.local", MaxConcurrency: 5, TokenFile: token}}
	o = graphServerOptions{}
	if err := o.fromConfig(writeRunConfig(t, kn)); err != nil {
		t.Fatal(err)
	}
	if want := (backendOptions{kind: "knative", knativeURLs: "http://cora-fn.ml.svc.cluster.local", maxConcurrency: 5, knativeTokenFile: token}); o.backend != want {
		t.Fatalf("knative options %+v, want %+v", o.backend, want)
	}
	if b, err := o.backend.build(context.Background(), 8, cpu.Options{}, nil); err != nil || b.Concurrency() != 5 {
		t.Fatalf("knative backend %v, %v: want concurrency 5", b, err)
	}

	lam.Lambda.CredentialsDir = filepath.Join(creds, "absent")
	o = graphServerOptions{}
	if err := o.fromConfig(writeRunConfig(t, lam)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.backend.build(context.Background(), 8, cpu.Options{}, store); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing credentials folder: %v, want an error naming it", err)
	}
}

// TestBackendArgs passes every backend's options through the run config, as dorylus train
// does for its graph servers, and expects them unchanged.
func TestBackendArgs(t *testing.T) {
	for _, b := range []backendOptions{
		{kind: "cpu", workers: 3, latency: 20 * time.Millisecond},
		{kind: "lambda", dataPath: "pull", lambdaFunction: "arn:aws:lambda:us-east-1:123456789012:function:f", lambdaRegion: "us-east-1", lambdaQualifier: "live",
			lambdaEndpoints: "http://127.0.0.1:1,http://127.0.0.1:2", lambdaCredentials: "/creds", maxConcurrency: 7, perEndpoint: 1,
			callTimeout: 3 * time.Second, stragglerFactor: -1, stragglerFloor: 20 * time.Millisecond},
		{kind: "knative", knativeURLs: "http://fn", knativeTokenFile: "/token", maxConcurrency: 2, stragglerFactor: 2.5, dataPath: "inline"},
	} {
		var flags backendOptions
		fs := pflag.NewFlagSet("train", pflag.ContinueOnError)
		flags.addFlags(fs)
		fs.IntVar(&flags.workers, "workers", 0, "")
		fs.DurationVar(&flags.latency, "inject-latency", 0, "")
		if err := fs.Parse(b.args()); err != nil {
			t.Fatalf("%s: %v", b.kind, err)
		}
		if b.kind == "cpu" {
			flags.lambdaRegion, flags.dataPath = "", "" // the flags' defaults ($AWS_REGION, inline), not passed for cpu
		}
		if flags != b {
			t.Errorf("%s: args %q parse to %+v", b.kind, b.args(), flags)
		}
		c := writeRunConfig(t, b.toConfig(4, 3008))
		var got graphServerOptions
		if err := got.fromConfig(c); err != nil {
			t.Fatalf("%s: %v", b.kind, err)
		}
		if got.backend != b {
			data, _ := os.ReadFile(c)
			t.Errorf("%s: run config\n%s\nreads as %+v, want %+v", b.kind, data, got.backend, b)
		}
	}
}

// TestForGraphServer deals endpoints that serve one call at a time out among the graph
// servers, shares the others, and refuses too few.
func TestForGraphServer(t *testing.T) {
	b := backendOptions{kind: "lambda", lambdaFunction: "f", lambdaRegion: "r", lambdaEndpoints: "e0,e1,e2,e3,e4", perEndpoint: 1}
	for q, want := range []string{"e0,e2,e4", "e1,e3"} {
		got, err := b.forGraphServer(q, 2)
		if err != nil || got.lambdaEndpoints != want {
			t.Errorf("graph server %d: endpoints %q, %v; want %q", q, got.lambdaEndpoints, err, want)
		}
	}
	if _, err := b.forGraphServer(0, 6); err == nil || !strings.Contains(err.Error(), "5 endpoints for 6 graph servers") {
		t.Errorf("6 graph servers on 5 endpoints: %v", err)
	}
	shared := backendOptions{kind: "knative", knativeURLs: "u0,u1"}
	if got, err := shared.forGraphServer(1, 2); err != nil || got.knativeURLs != "u0,u1" {
		t.Errorf("shared URLs: %q, %v", got.knativeURLs, err)
	}
}

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

// args returns the flags of dorylus train that give these options.
func (b *backendOptions) args() []string {
	if !b.remote() {
		return []string{"--backend", jobconfig.BackendCPU, "--workers", strconv.Itoa(b.workers), "--inject-latency", b.latency.String()}
	}
	a := []string{"--backend", b.kind}
	if b.kind == jobconfig.BackendLambda {
		a = append(a, "--lambda-function", b.lambdaFunction, "--lambda-region", b.lambdaRegion, "--lambda-qualifier", b.lambdaQualifier,
			"--lambda-endpoints", b.lambdaEndpoints, "--lambda-credentials-dir", b.lambdaCredentials)
	} else {
		a = append(a, "--knative-urls", b.knativeURLs, "--knative-token-file", b.knativeTokenFile)
	}
	return append(a, "--max-concurrency", strconv.Itoa(b.maxConcurrency), "--endpoint-concurrency", strconv.Itoa(b.perEndpoint),
		"--call-timeout", b.callTimeout.String(), "--straggler-factor", strconv.FormatFloat(b.stragglerFactor, 'g', -1, 64),
		"--straggler-floor", b.stragglerFloor.String(), "--data-path", b.dataPath)
}
