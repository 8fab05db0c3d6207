package backends

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/dorylus-gnn/dorylus/pkg/dispatch/cpu"
	"github.com/dorylus-gnn/dorylus/pkg/dispatch/remote"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// writeRunConfig writes a valid run config with backend b and returns its path.
func writeRunConfig(t *testing.T, b jobconfig.Backend) string {
	t.Helper()
	c := &jobconfig.RunConfig{
		Version:      jobconfig.Version,
		Job:          jobconfig.JobRef{Name: "cora", Namespace: "ml", UID: "u-1"},
		Dataset:      jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: "cora"},
		Model:        jobconfig.Model{Architecture: jobconfig.ArchitectureGCN, Layers: 2, Hidden: 16, Dropout: 0.5},
		Training:     jobconfig.Training{Epochs: 200, LearningRate: 0.01, WeightDecay: 5e-4, Staleness: jobconfig.Bounded(1), Seed: 1},
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

// fromConfig reads the backend of the run config at path, as a graph server does.
func fromConfig(t *testing.T, path string) Options {
	t.Helper()
	return fromConfigErr(t, path, "")
}

// fromConfigErr is fromConfig, its failure named by name.
func fromConfigErr(t *testing.T, path, name string) Options {
	t.Helper()
	c, err := jobconfig.Load(path)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return FromConfig(c.Backend)
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
	o := fromConfig(t, writeRunConfig(t, lam))
	want := Options{Kind: "lambda", LambdaFunction: "dorylus-fn", LambdaRegion: "eu-west-1", LambdaEndpoints: "http://127.0.0.1:9000",
		LambdaCredentials: creds, MaxConcurrency: 3, PerEndpoint: 3, DataPath: jobconfig.DataPathPull}
	if o != want {
		t.Fatalf("lambda options %+v, want %+v", o, want)
	}
	if _, err := o.Build(context.Background(), 8, cpu.Options{}, nil, nil); err == nil || !strings.Contains(err.Error(), "pull") {
		t.Errorf("pull data path without a store: %v, want an error", err)
	}
	store, err := remote.NewStore("127.0.0.1:7000", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.Build(context.Background(), 8, cpu.Options{}, store, nil)
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
	o = fromConfig(t, writeRunConfig(t, kn))
	if want := (Options{Kind: "knative", KnativeURLs: "http://cora-fn.ml.svc.cluster.local", MaxConcurrency: 5, KnativeTokenFile: token}); o != want {
		t.Fatalf("knative options %+v, want %+v", o, want)
	}
	if b, err := o.Build(context.Background(), 8, cpu.Options{}, nil, nil); err != nil || b.Concurrency() != 5 {
		t.Fatalf("knative backend %v, %v: want concurrency 5", b, err)
	}

	lam.Lambda.CredentialsDir = filepath.Join(creds, "absent")
	o = fromConfig(t, writeRunConfig(t, lam))
	if _, err := o.Build(context.Background(), 8, cpu.Options{}, store, nil); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing credentials folder: %v, want an error naming it", err)
	}
}

// TestBackendArgs passes every backend's options through the run config, as dorylus train
// does for its graph servers, and expects them unchanged.
func TestBackendArgs(t *testing.T) {
	for _, b := range []Options{
		{Kind: "cpu", Workers: 3, Latency: 20 * time.Millisecond},
		{Kind: "lambda", DataPath: "pull", LambdaFunction: "arn:aws:lambda:us-east-1:123456789012:function:f", LambdaRegion: "us-east-1", LambdaQualifier: "live",
			LambdaEndpoints: "http://127.0.0.1:1,http://127.0.0.1:2", LambdaCredentials: "/creds", MaxConcurrency: 7, PerEndpoint: 1,
			CallTimeout: 3 * time.Second, StragglerFactor: -1, StragglerFloor: 20 * time.Millisecond},
		{Kind: "knative", KnativeURLs: "http://fn", KnativeTokenFile: "/token", MaxConcurrency: 2, StragglerFactor: 2.5, DataPath: "inline"},
	} {
		var flags Options
		fs := pflag.NewFlagSet("train", pflag.ContinueOnError)
		flags.AddFlags(fs)
		fs.IntVar(&flags.Workers, "workers", 0, "")
		fs.DurationVar(&flags.Latency, "inject-latency", 0, "")
		if err := fs.Parse(b.Args()); err != nil {
			t.Fatalf("%s: %v", b.Kind, err)
		}
		if b.Kind == "cpu" {
			flags.LambdaRegion, flags.DataPath = "", "" // the flags' defaults ($AWS_REGION, inline), not passed for cpu
		}
		if flags != b {
			t.Errorf("%s: args %q parse to %+v", b.Kind, b.Args(), flags)
		}
		c := writeRunConfig(t, b.ToConfig(4, 3008))
		got := fromConfigErr(t, c, b.Kind)
		if got != b {
			data, _ := os.ReadFile(c)
			t.Errorf("%s: run config\n%s\nreads as %+v, want %+v", b.Kind, data, got, b)
		}
	}
}

// TestForGraphServer deals endpoints that serve one call at a time out among the graph
// servers, shares the others, and refuses too few.
func TestForGraphServer(t *testing.T) {
	b := Options{Kind: "lambda", LambdaFunction: "f", LambdaRegion: "r", LambdaEndpoints: "e0,e1,e2,e3,e4", PerEndpoint: 1}
	for q, want := range []string{"e0,e2,e4", "e1,e3"} {
		got, err := b.ForGraphServer(q, 2)
		if err != nil || got.LambdaEndpoints != want {
			t.Errorf("graph server %d: endpoints %q, %v; want %q", q, got.LambdaEndpoints, err, want)
		}
	}
	if _, err := b.ForGraphServer(0, 6); err == nil || !strings.Contains(err.Error(), "5 endpoints for 6 graph servers") {
		t.Errorf("6 graph servers on 5 endpoints: %v", err)
	}
	shared := Options{Kind: "knative", KnativeURLs: "u0,u1"}
	if got, err := shared.ForGraphServer(1, 2); err != nil || got.KnativeURLs != "u0,u1" {
		t.Errorf("shared URLs: %q, %v", got.KnativeURLs, err)
	}
}
