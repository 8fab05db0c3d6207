package serve

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/export"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
	"github.com/dorylus-gnn/dorylus/pkg/objstore"
)

// TestStatusJob: the downward API's job wins over the run config's; outside a job, and on
// the other graph servers, there is no reporter; without an in-cluster API server the
// reporter is off with the reason logged.
func TestStatusJob(t *testing.T) {
	t.Setenv(jobconfig.EnvNamespace, "")
	t.Setenv(jobconfig.EnvJobName, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	var log bytes.Buffer
	o := GraphServer{Run: &jobconfig.RunConfig{Job: jobconfig.JobRef{Namespace: "local", Name: "train-1"}}, Stderr: &log}
	if _, _, ok := jobstatus.Target(o.job()); ok {
		t.Fatal("a job outside Kubernetes")
	}
	if r := o.statusReporter(); r != nil || log.Len() != 0 {
		t.Fatalf("reporter %v, log %q outside a job", r, log.String())
	}
	o.Run.Job = jobconfig.JobRef{Namespace: "ns", Name: "from-config", UID: "u-1"}
	if ns, name, ok := jobstatus.Target(o.job()); !ok || ns != "ns" || name != "from-config" {
		t.Fatalf("job %s/%s %v, want the run config's", ns, name, ok)
	}
	t.Setenv(jobconfig.EnvNamespace, "team")
	t.Setenv(jobconfig.EnvJobName, "cora")
	if ns, name, ok := jobstatus.Target(o.job()); !ok || ns != "team" || name != "cora" {
		t.Fatalf("job %s/%s %v, want the downward API's", ns, name, ok)
	}
	if r := o.statusReporter(); r != nil || !strings.Contains(log.String(), "team/cora") {
		t.Fatalf("reporter %v, log %q without an API server", r, log.String())
	}
	o.Partition = 1
	if r := o.statusReporter(); r != nil {
		t.Fatal("a reporter on graph server 1")
	}
}

// TestAdvertised: --advertise-address is a host, which takes the server's port, or a
// host:port; without it there is none; a bad one is refused.
func TestAdvertised(t *testing.T) {
	for _, c := range []struct{ flag, want string }{
		{"", ""},
		{"10.1.2.3", "10.1.2.3:5000"},
		{"10.1.2.3:6000", "10.1.2.3:6000"},
		{"fd00::7", "[fd00::7]:5000"},
		{"gs-0.example:7000", "gs-0.example:7000"},
	} {
		f := Process{Advertise: c.flag}
		if got, err := f.advertised(5000); err != nil || got != c.want {
			t.Errorf("--advertise-address %q: %q, %v; want %q", c.flag, got, err, c.want)
		}
	}
	for _, bad := range []string{":5000", "10.1.2.3:", strings.Repeat("a", 260)} {
		f := Process{Advertise: bad}
		if got, err := f.advertised(5000); err == nil {
			t.Errorf("--advertise-address %q: %q accepted", bad, got)
		}
	}
}

// coraRun is the run config of a GCN on Cora over two graph servers and one parameter-server
// shard on the cpu backend, insecure, exporting into out.
func coraRun(out string) *jobconfig.RunConfig {
	return &jobconfig.RunConfig{
		Version: jobconfig.Version,
		Job:     jobconfig.JobRef{Name: "cora", Namespace: "local"},
		Dataset: jobconfig.Dataset{Source: jobconfig.SourceBuiltin, Name: "cora"},
		Model:   jobconfig.Model{Architecture: jobconfig.ArchitectureGCN, Layers: 2, Hidden: 16, Dropout: 0.5},
		Training: jobconfig.Training{Epochs: 7, LearningRate: 0.01, WeightDecay: 5e-4, Staleness: jobconfig.Sync,
			Intervals: 2, EvalEvery: 1, Patience: 3, Seed: 1},
		GraphServers: jobconfig.GraphServers{Replicas: 2, Port: jobconfig.GraphServerPort,
			Peers: []string{"127.0.0.1:1", "127.0.0.1:2"}},
		ParameterServers: jobconfig.ParameterServers{Replicas: 1, Port: jobconfig.ParamServerPort, Shards: []string{"127.0.0.1:3"}},
		Backend:          jobconfig.Backend{Kind: jobconfig.BackendCPU, CPU: &jobconfig.CPU{Workers: 2}},
		Security:         jobconfig.Security{Insecure: true},
		Output:           &jobconfig.Location{Path: out},
	}
}

// TestAssembleGraphServer builds graph servers 0 and 1 of a run as the graph-server command
// does and checks, field by field, what the process adds to the run config's settings: the
// command line's startup bound and attempt, graph server 0's events, log and start time, the
// metrics registry and health socket when asked, no TLS or pull store on an insecure cpu run,
// the partition, the backend, the export's card, and a trace recorder only with a trace file.
func TestAssembleGraphServer(t *testing.T) {
	t.Setenv(jobconfig.EnvNamespace, "")
	t.Setenv(jobconfig.EnvJobName, "")
	ctx := context.Background()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	started := time.Unix(1700000000, 0)
	g := GraphServer{
		Process: Process{Listen: "127.0.0.1:0", Metrics: "127.0.0.1:0", Health: "127.0.0.1:0"},
		Run:     coraRun(out), Partition: 0, Attempt: 3, Startup: 7 * time.Second,
		TraceFile: "unused", Stdout: &stdout, Stderr: &stderr,
	}
	s, err := g.assemble(ctx, started)
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	defer s.lis.Close()
	c := s.cfg
	switch {
	case c.Partition != 0 || c.Partitions != 2 || c.Intervals != 2 || c.Epochs != 7 || c.Patience != 3:
		t.Errorf("run config's settings: partition %d/%d, %d intervals, %d epochs, patience %d", c.Partition, c.Partitions, c.Intervals, c.Epochs, c.Patience)
	case c.Startup != 7*time.Second || c.Attempt != 3:
		t.Errorf("startup %v, attempt %d; want 7s, 3", c.Startup, c.Attempt)
	case c.Events != &stdout || c.Log != &stderr || !c.Started.Equal(started):
		t.Errorf("graph server 0: events %v, log %v, started %v", c.Events, c.Log, c.Started)
	case c.Metrics == nil || c.Health == nil:
		t.Errorf("metrics %v, health %v with both addresses", c.Metrics, c.Health)
	case c.TLS != nil || c.Pull != nil || c.Status != nil || c.CostBefore != 0 || c.CallsBefore != (cost.Calls{}) || c.Weights != nil:
		t.Errorf("insecure cpu run outside a job: TLS %v, pull %v, status %v, cost before %g, calls before %+v, weights %d", c.TLS, c.Pull, c.Status, c.CostBefore, c.CallsBefore, len(c.Weights))
	case c.Data == nil || c.Data.Part != 0 || c.Data.Parts != 2 || c.Backend == nil:
		t.Errorf("data %+v, backend %v", c.Data, c.Backend)
	case c.Trace == nil:
		t.Error("no trace recorder with a trace file")
	case c.Export == nil:
		t.Fatal("no export with an output location")
	}
	want := export.NewCard("gcn", 2, 16, 0, export.Training{LR: 0.01, WeightDecay: 5e-4, Dropout: 0.5, Patience: 3},
		export.PartitionDataset(c.Data), export.FeatureNormalisation(c.Data.Features))
	if k := c.Export.Card; k.Architecture != want.Architecture || k.Layers != 2 || k.Hidden != 16 || k.Training != want.Training ||
		k.Dataset != want.Dataset || k.Dataset.Name != "cora" || k.Adjacency != export.AdjacencyGCN {
		t.Errorf("export card %+v, want %+v", k, want)
	}
	if s.lis.Addr().String() == "" || s.ctx.Err() != nil {
		t.Errorf("listener %v, context %v", s.lis.Addr(), s.ctx.Err())
	}

	g.Partition, g.Process, g.TraceFile = 1, Process{Listen: "127.0.0.1:0"}, ""
	s1, err := g.assemble(ctx, started)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.stop()
	defer s1.lis.Close()
	c = s1.cfg
	if c.Partition != 1 || c.Data.Part != 1 || c.Events != nil || c.Log != nil || !c.Started.IsZero() ||
		c.Metrics != nil || c.Health != nil || c.Trace != nil || c.Export == nil || c.Startup != 7*time.Second {
		t.Errorf("graph server 1: partition %d (data %d), events %v, log %v, started %v, metrics %v, health %v, trace %v, export %v, startup %v",
			c.Partition, c.Data.Part, c.Events, c.Log, c.Started, c.Metrics, c.Health, c.Trace, c.Export, c.Startup)
	}
	s1.stop()
	if s1.ctx.Err() == nil {
		t.Error("stop left the server's context running")
	}
}

// TestAssembleRefuses: a partition the run config does not have is refused naming the flag,
// and an inherited socket that is none is refused naming --listen-fd.
func TestAssembleRefuses(t *testing.T) {
	g := GraphServer{Run: coraRun(t.TempDir()), Partition: 2, Stderr: &bytes.Buffer{}}
	if _, err := g.assemble(context.Background(), time.Now()); err == nil || !strings.Contains(err.Error(), "--partition 2") {
		t.Errorf("partition 2 of 2: %v", err)
	}
	g.Partition, g.ListenFD = 1, 1<<20
	if _, err := g.assemble(context.Background(), time.Now()); err == nil || !strings.Contains(err.Error(), "--listen-fd") {
		t.Errorf("--listen-fd of no socket: %v", err)
	}
}

// TestParamServerRefusesShard: a shard the run config does not have is refused before
// anything opens.
func TestParamServerRefusesShard(t *testing.T) {
	err := RunParamServer(context.Background(), ParamServer{Run: coraRun(t.TempDir()), Shard: 1, Stderr: &bytes.Buffer{}})
	if err == nil || err.Error() != "--shard 1: the run config has shards 0..0" {
		t.Errorf("shard 1 of 1: %v", err)
	}
}

// TestCheckpoints: the run config's checkpoints become the location each shard's folder is
// under and the S3 settings of an s3:// one.
func TestCheckpoints(t *testing.T) {
	if l, s3 := checkpoints(nil); l != "" || s3 != (objstore.Config{}) {
		t.Errorf("none: %q %+v", l, s3)
	}
	if l, s3 := checkpoints(&jobconfig.Checkpoint{Path: "/ckpt/run"}); l != "/ckpt/run" || s3 != (objstore.Config{}) {
		t.Errorf("folder: %q %+v", l, s3)
	}
	cp := &jobconfig.Checkpoint{S3: &jobconfig.S3{Bucket: "b", Prefix: "runs/7", Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000", CredentialsDir: "/creds"}}
	l, s3 := checkpoints(cp)
	if want := (objstore.Config{Region: "eu-west-1", Endpoint: "http://127.0.0.1:9000", CredentialsDir: "/creds"}); l != "s3://b/runs/7" || s3 != want {
		t.Errorf("s3: %q %+v", l, s3)
	}
}
