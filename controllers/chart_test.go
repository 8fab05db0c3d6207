package controllers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dorylus-gnn/dorylus/pkg/cost"
)

// helmTemplate renders the chart with helm and extra arguments.
func helmTemplate(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	helm := helmBinary(t)
	home := t.TempDir()
	cmd := exec.Command(helm, append([]string{"template", "dorylus", filepath.Join("..", "charts", "dorylus-operator"), "--kube-version", "1.37.2"}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/c", "HELM_CONFIG_HOME="+home+"/f", "HELM_DATA_HOME="+home+"/d")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return decodeAll(t, out)
}

// TestChartPrices renders the chart with a price list in cost.prices and
// reads the operator's --prices file from the rendered ConfigMap as the
// operator does: the override replaces its instance type, the rest of the
// built-in list stays.
func TestChartPrices(t *testing.T) {
	objs := helmTemplate(t, "--set-json", `cost.prices={"source":"spot","asOf":"2026-12-01","instances":{"c5n.2xlarge":{"vcpus":8,"memoryGiB":21,"hourUSD":0.15}}}`,
		"--set", "cost.graphServerInstanceType=c5n.2xlarge")
	var data, args, mount string
	for _, u := range objs {
		switch {
		case u.GetKind() == "ConfigMap" && u.GetName() == "dorylus-dorylus-operator-prices":
			data, _, _ = unstructured.NestedString(u.Object, "data", "prices.json")
		case u.GetKind() == "Deployment":
			var dep appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dep); err != nil {
				t.Fatal(err)
			}
			c := dep.Spec.Template.Spec.Containers[0]
			args = strings.Join(c.Args, " ")
			for _, m := range c.VolumeMounts {
				if m.Name == "prices" {
					mount = m.MountPath
				}
			}
		}
	}
	if want := "--prices=" + mount + "/prices.json"; mount == "" || !strings.Contains(args, want) {
		t.Errorf("operator args %q, prices mounted at %q: want %s", args, mount, want)
	}
	p, err := cost.ReadPrices(strings.NewReader(data))
	if err != nil {
		t.Fatalf("prices.json %q: %v", data, err)
	}
	if p.Source != "spot" || p.AsOf != "2026-12-01" || p.Instances["c5n.2xlarge"].HourUSD != 0.15 ||
		p.Instances["c5.xlarge"] != cost.Default.Instances["c5.xlarge"] || p.LambdaGBSecondUSD != cost.Default.LambdaGBSecondUSD {
		t.Errorf("prices read from the chart: %+v", p)
	}
	pricing := Pricing{Prices: p, GraphServerInstance: "c5n.2xlarge", ParameterServerInstance: "c5.xlarge"}
	if err := pricing.Validate(); err != nil {
		t.Error(err)
	}
}

// TestChartPodMonitor: the chart ships a PodMonitor only where the cluster serves the CRD,
// and it selects the operator's graph and parameter server pods and their metrics port.
func TestChartPodMonitor(t *testing.T) {
	for _, u := range helmTemplate(t) {
		if u.GetKind() == "PodMonitor" {
			t.Fatal("a PodMonitor without the monitoring.coreos.com/v1 API")
		}
	}
	var pm *unstructured.Unstructured
	for _, u := range helmTemplate(t, "--api-versions", "monitoring.coreos.com/v1/PodMonitor") {
		if u.GetKind() == "PodMonitor" {
			pm = u
		}
	}
	if pm == nil {
		t.Fatal("no PodMonitor with the monitoring.coreos.com/v1 API")
	}
	var spec struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port string `json:"port"`
		} `json:"podMetricsEndpoints"`
	}
	raw, _, _ := unstructured.NestedMap(pm.Object, "spec")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&spec.Selector)
	if err != nil || len(spec.Endpoints) != 1 {
		t.Fatalf("PodMonitor spec %+v: %v", spec, err)
	}
	job := testJob()
	gs := toTyped[appsv1.StatefulSet](t, buildGraphStatefulSet(job, "img:1", "h", "p", 1)).Spec.Template
	ps := toTyped[appsv1.Deployment](t, buildParamDeployment(job, "img:1", "h", "p", 0, 1)).Spec.Template
	km := toTyped[corev1.ConfigMap](t, buildConfigMap(job, nil))
	for name, tpl := range map[string]corev1.PodTemplateSpec{"graph server": gs, "parameter server": ps} {
		if !sel.Matches(labels.Set(tpl.Labels)) {
			t.Errorf("the PodMonitor does not select the %s pods %v", name, tpl.Labels)
		}
		found := false
		for _, p := range tpl.Spec.Containers[0].Ports {
			found = found || p.Name == spec.Endpoints[0].Port
		}
		if !found || !strings.Contains(strings.Join(tpl.Spec.Containers[0].Args, " "), "--metrics-address") {
			t.Errorf("the %s container has no port %q serving metrics", name, spec.Endpoints[0].Port)
		}
	}
	if sel.Matches(labels.Set(km.Labels)) {
		t.Errorf("the PodMonitor selects other children's labels %v", km.Labels)
	}
}

// TestChartWatchNamespaces renders the chart scoped to two namespaces: the
// manager's rules are bound in each by a RoleBinding instead of cluster-wide,
// the manager watches only those, and the cluster-scoped resources among its
// rules (by the API server's discovery) are exactly what the ClusterRoleBindings
// left grant. The default rendering binds cluster-wide.
func TestChartWatchNamespaces(t *testing.T) {
	type rendered struct {
		args            string
		roleBindings    []string // namespace/role of RoleBindings to a ClusterRole
		clusterBindings []string // roles of ClusterRoleBindings
		roles           map[string][]rbacv1.PolicyRule
	}
	render := func(args ...string) rendered {
		out := rendered{roles: map[string][]rbacv1.PolicyRule{}}
		for _, u := range helmTemplate(t, args...) {
			switch u.GetKind() {
			case "Deployment":
				out.args = strings.Join(toTyped[appsv1.Deployment](t, u.Object).Spec.Template.Spec.Containers[0].Args, " ")
			case "RoleBinding":
				if b := toTyped[rbacv1.RoleBinding](t, u.Object); b.RoleRef.Kind == "ClusterRole" {
					out.roleBindings = append(out.roleBindings, b.Namespace+"/"+b.RoleRef.Name)
				}
			case "ClusterRoleBinding":
				out.clusterBindings = append(out.clusterBindings, toTyped[rbacv1.ClusterRoleBinding](t, u.Object).RoleRef.Name)
			case "ClusterRole":
				out.roles[u.GetName()] = toTyped[rbacv1.ClusterRole](t, u.Object).Rules
			}
		}
		return out
	}
	const manager, metricsAuth, kueueReader = "dorylus-dorylus-operator-manager", "dorylus-dorylus-operator-metrics-auth", "dorylus-dorylus-operator-kueue"

	all := render()
	if diff := cmp.Diff([]string{manager}, all.clusterBindings); diff != "" || all.roleBindings != nil || strings.Contains(all.args, "--watch-namespaces") {
		t.Errorf("cluster-wide: ClusterRoleBindings (-want +got):\n%s RoleBindings %v, args %q", diff, all.roleBindings, all.args)
	}

	scoped := render("--set", "watchNamespaces={ml,research}")
	if diff := cmp.Diff([]string{"ml/" + manager, "research/" + manager}, scoped.roleBindings); diff != "" {
		t.Errorf("RoleBindings to the manager's ClusterRole (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{metricsAuth, kueueReader}, scoped.clusterBindings); diff != "" {
		t.Errorf("ClusterRoleBindings (-want +got):\n%s", diff)
	}
	if !strings.Contains(scoped.args, "--watch-namespaces=ml,research") {
		t.Errorf("operator args %q lack --watch-namespaces=ml,research", scoped.args)
	}
	clusterScoped := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					gvk, err := k8sClient.RESTMapper().KindFor(schema.GroupVersionResource{Group: g, Resource: strings.Split(res, "/")[0]})
					if err != nil {
						t.Fatalf("resource %s/%s: %v", g, res, err)
					}
					m, err := k8sClient.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
					if err != nil {
						t.Fatal(err)
					}
					if m.Scope.Name() == meta.RESTScopeNameRoot {
						out = append(out, fmt.Sprintf("%s/%s %v", g, res, r.Verbs))
					}
				}
			}
		}
		sort.Strings(out)
		return out
	}
	need, granted := clusterScoped(scoped.roles[manager]), clusterScoped(append(scoped.roles[metricsAuth], scoped.roles[kueueReader]...))
	if diff := cmp.Diff(need, granted); diff != "" || len(need) == 0 {
		t.Errorf("cluster-scoped rules the manager needs (-need +granted cluster-wide):\n%s", diff)
	}
}
