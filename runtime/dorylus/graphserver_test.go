package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestStatusJob: the downward API's job wins over the run config's; outside a job, and on
// the other graph servers, there is no reporter; without an in-cluster API server the
// reporter is off with the reason logged.
func TestStatusJob(t *testing.T) {
	t.Setenv(jobconfig.EnvNamespace, "")
	t.Setenv(jobconfig.EnvJobName, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	o := graphServerOptions{}
	if _, _, ok := jobstatus.Target(o.jobNamespace, o.jobName); ok {
		t.Fatal("a job outside Kubernetes")
	}
	var log bytes.Buffer
	if r := o.statusReporter(&log); r != nil || log.Len() != 0 {
		t.Fatalf("reporter %v, log %q outside a job", r, log.String())
	}
	o.jobNamespace, o.jobName = "ns", "from-config"
	if ns, name, ok := jobstatus.Target(o.jobNamespace, o.jobName); !ok || ns != "ns" || name != "from-config" {
		t.Fatalf("job %s/%s %v, want the run config's", ns, name, ok)
	}
	t.Setenv(jobconfig.EnvNamespace, "team")
	t.Setenv(jobconfig.EnvJobName, "cora")
	if ns, name, ok := jobstatus.Target(o.jobNamespace, o.jobName); !ok || ns != "team" || name != "cora" {
		t.Fatalf("job %s/%s %v, want the downward API's", ns, name, ok)
	}
	if r := o.statusReporter(&log); r != nil || !strings.Contains(log.String(), "team/cora") {
		t.Fatalf("reporter %v, log %q without an API server", r, log.String())
	}
	o.partition = 1
	if r := o.statusReporter(&log); r != nil {
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
		f := serverFlags{advertise: c.flag}
		if got, err := f.advertised(5000); err != nil || got != c.want {
			t.Errorf("--advertise-address %q: %q, %v; want %q", c.flag, got, err, c.want)
		}
	}
	for _, bad := range []string{":5000", "10.1.2.3:", strings.Repeat("a", 260)} {
		f := serverFlags{advertise: bad}
		if got, err := f.advertised(5000); err == nil {
			t.Errorf("--advertise-address %q: %q accepted", bad, got)
		}
	}
}
