package jobstatus

import "testing"

// TestTarget: the downward API's job wins over the run config's; outside a job there is none.
func TestTarget(t *testing.T) {
	t.Setenv(EnvNamespace, "")
	t.Setenv(EnvJobName, "")
	if _, _, ok := Target("", ""); ok {
		t.Fatal("a job outside Kubernetes")
	}
	if ns, name, ok := Target("ns", "from-config"); !ok || ns != "ns" || name != "from-config" {
		t.Fatalf("job %s/%s %v, want the run config's", ns, name, ok)
	}
	t.Setenv(EnvNamespace, "team")
	if ns, name, ok := Target("ns", "from-config"); !ok || ns != "ns" || name != "from-config" {
		t.Fatalf("job %s/%s %v with a namespace alone from the downward API, want the run config's", ns, name, ok)
	}
	t.Setenv(EnvJobName, "cora")
	if ns, name, ok := Target("ns", "from-config"); !ok || ns != "team" || name != "cora" {
		t.Fatalf("job %s/%s %v, want the downward API's", ns, name, ok)
	}
}
