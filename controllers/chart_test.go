package controllers

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	helmBinary(t)
	objs, err := renderChart("dorylus", "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
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

// operatorGrants says what each verb the chart grants the operator's ServiceAccount is for,
// by "group/resource verb" (the core group as "core"). TestChartRBAC fails on a grant that
// is not here, and on an entry here that the chart does not grant.
var operatorGrants = map[string]string{
	"dorylus.dev/gnntrainingjobs get":                  "the jobs (cache; a fresh read before a status write)",
	"dorylus.dev/gnntrainingjobs list":                 "the jobs (cache)",
	"dorylus.dev/gnntrainingjobs watch":                "the jobs (cache)",
	"dorylus.dev/gnntrainingjobs delete":               "a finished job at its TTL (ttl.go)",
	"dorylus.dev/gnntrainingjobs/status get":           "granted to the job's pods by its Role (RBAC grants only what the granter holds)",
	"dorylus.dev/gnntrainingjobs/status patch":         "the status (server-side apply); granted to the job's pods by its Role",
	"dorylus.dev/gnntrainingjobs/finalizers update":    "blockOwnerDeletion in the children's owner references, where OwnerReferencesPermissionEnforcement admits it only so",
	"core/configmaps get":                              "the run config <job>-config (cache)",
	"core/configmaps list":                             "the run config (cache)",
	"core/configmaps watch":                            "the run config (cache)",
	"core/configmaps create":                           "the run config (server-side apply of a new object)",
	"core/configmaps patch":                            "the run config (server-side apply)",
	"core/services get":                                "the servers' headless Services (cache)",
	"core/services list":                               "the servers' Services (cache)",
	"core/services watch":                              "the servers' Services (cache)",
	"core/services create":                             "the servers' Services (server-side apply of a new object)",
	"core/services patch":                              "the servers' Services (server-side apply)",
	"core/serviceaccounts get":                         "the pods' ServiceAccount <job>-runtime (cache)",
	"core/serviceaccounts list":                        "the pods' ServiceAccount (cache)",
	"core/serviceaccounts watch":                       "the pods' ServiceAccount (cache)",
	"core/serviceaccounts create":                      "the pods' ServiceAccount (server-side apply of a new object)",
	"core/serviceaccounts patch":                       "the pods' ServiceAccount (server-side apply)",
	"core/pods get":                                    "the servers' pods: failures and why one cannot start (cache)",
	"core/pods list":                                   "the servers' pods (cache; the partition step's, uncached)",
	"core/pods watch":                                  "the servers' pods (cache)",
	"core/pods delete":                                 "the pods of an earlier run at a restart (restarts.go)",
	"core/secrets create":                              "each credentials period's Secret, and <job>-credentials of a function at a url (credentials.go)",
	"core/secrets delete":                              "the previous period's credentials, and <job>-credentials before it is written again",
	"core/events list":                                 "the events that say why a pod cannot start (podstart.go, uncached)",
	"core/events create":                               "leader election's events (the release's namespace)",
	"core/events patch":                                "leader election's events (the release's namespace)",
	"events.k8s.io/events create":                      "the operator's events about jobs",
	"events.k8s.io/events patch":                       "the operator's events about jobs (a series)",
	"apps/statefulsets get":                            "the graph servers (cache)",
	"apps/statefulsets list":                           "the graph servers (cache)",
	"apps/statefulsets watch":                          "the graph servers (cache)",
	"apps/statefulsets create":                         "the graph servers (server-side apply of a new object)",
	"apps/statefulsets patch":                          "the graph servers (server-side apply)",
	"apps/deployments get":                             "the parameter shards (cache)",
	"apps/deployments list":                            "the parameter shards (cache)",
	"apps/deployments watch":                           "the parameter shards (cache)",
	"apps/deployments create":                          "the parameter shards (server-side apply of a new object)",
	"apps/deployments patch":                           "the parameter shards (server-side apply)",
	"apps/deployments delete":                          "shards above the replica count (pruneChildren)",
	"batch/jobs get":                                   "the partition step (cache)",
	"batch/jobs list":                                  "the partition step (cache)",
	"batch/jobs watch":                                 "the partition step (cache)",
	"batch/jobs create":                                "the partition step (server-side apply of a new object)",
	"batch/jobs patch":                                 "the partition step (server-side apply)",
	"batch/jobs delete":                                "the partition step once it reported (pruneChildren)",
	"rbac.authorization.k8s.io/roles get":              "the pods' Role (cache)",
	"rbac.authorization.k8s.io/roles list":             "the pods' Role (cache)",
	"rbac.authorization.k8s.io/roles watch":            "the pods' Role (cache)",
	"rbac.authorization.k8s.io/roles create":           "the pods' Role (server-side apply of a new object)",
	"rbac.authorization.k8s.io/roles patch":            "the pods' Role (server-side apply)",
	"rbac.authorization.k8s.io/rolebindings get":       "the pods' RoleBinding (cache)",
	"rbac.authorization.k8s.io/rolebindings list":      "the pods' RoleBinding (cache)",
	"rbac.authorization.k8s.io/rolebindings watch":     "the pods' RoleBinding (cache)",
	"rbac.authorization.k8s.io/rolebindings create":    "the pods' RoleBinding (server-side apply of a new object)",
	"rbac.authorization.k8s.io/rolebindings patch":     "the pods' RoleBinding (server-side apply)",
	"networking.k8s.io/networkpolicies get":            "the job's NetworkPolicies (cache)",
	"networking.k8s.io/networkpolicies list":           "the job's NetworkPolicies (cache)",
	"networking.k8s.io/networkpolicies watch":          "the job's NetworkPolicies (cache)",
	"networking.k8s.io/networkpolicies create":         "the job's NetworkPolicies (server-side apply of a new object)",
	"networking.k8s.io/networkpolicies patch":          "the job's NetworkPolicies (server-side apply)",
	"serving.knative.dev/services get":                 "a managed Knative function (cache)",
	"serving.knative.dev/services list":                "a managed Knative function (cache)",
	"serving.knative.dev/services watch":               "a managed Knative function (cache)",
	"serving.knative.dev/services create":              "a managed Knative function (server-side apply of a new object)",
	"serving.knative.dev/services patch":               "a managed Knative function (server-side apply)",
	"serving.knative.dev/services delete":              "a Knative function the spec no longer asks for (pruneChildren)",
	"kueue.x-k8s.io/workloads get":                     "a queued job's Workload (cache)",
	"kueue.x-k8s.io/workloads list":                    "a queued job's Workload (cache)",
	"kueue.x-k8s.io/workloads watch":                   "a queued job's Workload (cache)",
	"kueue.x-k8s.io/workloads create":                  "a queued job's Workload (server-side apply of a new object)",
	"kueue.x-k8s.io/workloads patch":                   "a queued job's Workload (server-side apply)",
	"kueue.x-k8s.io/workloads delete":                  "the Workload of a job no longer queued (pruneChildren)",
	"kueue.x-k8s.io/workloads/status update":           "a finished job's Workload marked Finished (kueue.go)",
	"kueue.x-k8s.io/resourceflavors get":               "the flavors an admission names: node labels, tolerations (cache)",
	"kueue.x-k8s.io/resourceflavors list":              "the flavors (cache)",
	"kueue.x-k8s.io/resourceflavors watch":             "the flavors (cache)",
	"kueue.x-k8s.io/workloadpriorityclasses get":       "a queued job's priority class (cache)",
	"kueue.x-k8s.io/workloadpriorityclasses list":      "the priority classes (cache)",
	"kueue.x-k8s.io/workloadpriorityclasses watch":     "the priority classes (cache)",
	"authentication.k8s.io/tokenreviews create":        "the secure metrics endpoint: who scrapes",
	"authorization.k8s.io/subjectaccessreviews create": "the secure metrics endpoint: may they GET /metrics",
	"coordination.k8s.io/leases get":                   "leader election (the release's namespace)",
	"coordination.k8s.io/leases create":                "leader election: the first lease",
	"coordination.k8s.io/leases update":                "leader election: renewing and releasing the lease",
}

// clusterWideGrants are the grants of operatorGrants on cluster-scoped resources: all that
// the chart grants cluster-wide when it is given watchNamespaces.
var clusterWideGrants = []string{
	"authentication.k8s.io/tokenreviews create", "authorization.k8s.io/subjectaccessreviews create",
	"kueue.x-k8s.io/resourceflavors get", "kueue.x-k8s.io/resourceflavors list", "kueue.x-k8s.io/resourceflavors watch",
	"kueue.x-k8s.io/workloadpriorityclasses get", "kueue.x-k8s.io/workloadpriorityclasses list", "kueue.x-k8s.io/workloadpriorityclasses watch",
}

// releaseGrants are the grants of operatorGrants of leader election, in the release's
// namespace alone.
var releaseGrants = []string{"coordination.k8s.io/leases get", "coordination.k8s.io/leases create",
	"coordination.k8s.io/leases update", "core/events create", "core/events patch"}

// TestChartRBAC renders the chart cluster-wide (the default) and for two namespaces
// (watchNamespaces) and collects every verb granted to the operator's ServiceAccount, by
// each binding that names it: each is in operatorGrants, which says what it is for, and
// each of operatorGrants is granted; no wildcard; no get, list or watch of Secrets anywhere.
// Leader election's grants are in the release's namespace alone, the same as config/rbac's; with watchNamespaces,
// everything else is granted only in the two namespaces, but for the cluster-scoped
// clusterWideGrants, granted cluster-wide (and in the two namespaces by the manager's
// ClusterRole, where a RoleBinding gives them no effect).
func TestChartRBAC(t *testing.T) {
	const release, sa = "dorylus-system", "dorylus-dorylus-operator"
	for _, mode := range []struct {
		name   string
		args   []string
		scopes []string // where the manager's namespaced grants hold ("": cluster-wide)
	}{
		{"cluster-wide", nil, []string{""}},
		{"watchNamespaces", []string{"--set", "watchNamespaces={ml,research}"}, []string{"ml", "research"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			helmBinary(t)
			objs, err := renderChart("dorylus", release, mode.args...)
			if err != nil {
				t.Fatal(err)
			}
			roles := map[string][]rbacv1.PolicyRule{} // "ClusterRole/name" or "Role/ns/name"
			for _, u := range objs {
				switch u.GetKind() {
				case "ClusterRole":
					roles["ClusterRole/"+u.GetName()] = toTyped[rbacv1.ClusterRole](t, u.Object).Rules
				case "Role":
					roles["Role/"+u.GetNamespace()+"/"+u.GetName()] = toTyped[rbacv1.Role](t, u.Object).Rules
				}
			}
			// The chart and config/rbac (kustomize) grant leader election alike.
			data, err := os.ReadFile(filepath.Join("..", "config", "rbac", "leader_election_role.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			kustomized := toTyped[rbacv1.Role](t, decodeAll(t, data)[0].Object).Rules
			if diff := cmp.Diff(kustomized, roles["Role/"+release+"/"+sa+"-leader-election"]); diff != "" {
				t.Errorf("leader election: config/rbac (-) and the chart (+) differ:\n%s", diff)
			}
			granted := map[string][]string{} // grant -> the scopes it holds in, sorted
			for _, u := range objs {
				var subjects []rbacv1.Subject
				var ref rbacv1.RoleRef
				scope := ""
				switch u.GetKind() {
				case "ClusterRoleBinding":
					b := toTyped[rbacv1.ClusterRoleBinding](t, u.Object)
					subjects, ref = b.Subjects, b.RoleRef
				case "RoleBinding":
					b := toTyped[rbacv1.RoleBinding](t, u.Object)
					subjects, ref, scope = b.Subjects, b.RoleRef, b.Namespace
				default:
					continue
				}
				if !slices.Contains(subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: sa, Namespace: release}) {
					continue
				}
				key := "ClusterRole/" + ref.Name
				if ref.Kind == "Role" {
					key = "Role/" + scope + "/" + ref.Name
				}
				rules, ok := roles[key]
				if !ok {
					t.Fatalf("%s %s binds %s, which the chart does not render", u.GetKind(), u.GetName(), key)
				}
				for _, r := range rules {
					if len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
						t.Errorf("%s: rule %+v names URLs or resource names", key, r)
					}
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							for _, v := range r.Verbs {
								if g == "*" || res == "*" || v == "*" {
									t.Errorf("%s grants a wildcard: %+v", key, r)
								}
								group := g
								if group == "" {
									group = "core"
								}
								if res == "secrets" && (v == "get" || v == "list" || v == "watch") {
									t.Errorf("%s grants %s on secrets: the operator reads no Secret", key, v)
								}
								grant := group + "/" + res + " " + v
								if _, ok := operatorGrants[grant]; !ok {
									t.Errorf("%s grants %q, which operatorGrants does not say what for", key, grant)
								}
								if !slices.Contains(granted[grant], scope) {
									granted[grant] = append(granted[grant], scope)
									slices.Sort(granted[grant])
								}
							}
						}
					}
				}
			}
			for grant := range operatorGrants {
				scopes, ok := granted[grant]
				want := mode.scopes
				switch {
				case slices.Contains(releaseGrants, grant):
					want = []string{release}
				case slices.Contains(clusterWideGrants, grant): // also in the manager's rules, to no effect in a RoleBinding
					want = slices.Compact(slices.Sorted(slices.Values(append([]string{""}, mode.scopes...))))
				}
				if !ok {
					t.Errorf("%q (%s) is not granted", grant, operatorGrants[grant])
				} else if !slices.Equal(scopes, want) {
					t.Errorf("%q granted in %q, want %q (\"\": cluster-wide)", grant, scopes, want)
				}
			}
		})
	}
}
