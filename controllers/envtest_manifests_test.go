package controllers

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"

	"github.com/dorylus-gnn/dorylus/internal/testenv"
)

// decodeAll splits a multi-document YAML stream into objects.
func decodeAll(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	out, err := decodeYAML(data)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// applyAll server-side-applies objects, into ns when they are namespaced
// and name none. Admission policies are applied as a dry run: the API server
// checks them, but applied they would bind every later test's requests
// (envtest_statuswriter_test.go installs its own, bound to one namespace).
func applyAll(t *testing.T, objs []*unstructured.Unstructured, ns string) {
	t.Helper()
	for _, u := range objs {
		if ns != "" && u.GetNamespace() == "" && u.GetKind() != "Namespace" && !clusterScoped(u.GetKind()) {
			u.SetNamespace(ns)
		}
		opts := []client.ApplyOption{client.FieldOwner("manifest-test"), client.ForceOwnership}
		if strings.HasPrefix(u.GetAPIVersion(), "admissionregistration.k8s.io/") {
			opts = append(opts, client.DryRunAll)
		}
		if err := k8sClient.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
			t.Errorf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func clusterScoped(kind string) bool {
	switch kind {
	case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
		return true
	}
	return false
}

// TestSamplesAreAccepted creates every sample of config/samples and
// config/samples/aws (one per tensor backend at least) and waits for the
// operator to create its children.
func TestSamplesAreAccepted(t *testing.T) {
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join("..", "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	aws, err := filepath.Glob(filepath.Join("..", "config", "samples", "aws", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, aws...)
	backends := map[string]bool{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var job dorylusv1alpha1.GNNTrainingJob
		if err := yaml.UnmarshalStrict(data, &job); err != nil {
			t.Fatalf("%s does not decode strictly: %v", f, err)
		}
		job.Namespace = ns
		if err := k8sClient.Create(context.Background(), &job); err != nil {
			t.Errorf("%s refused: %v", f, err)
			continue
		}
		b := job.Spec.Backend()
		backends[map[bool]string{b.CPU != nil: "cpu", b.Lambda != nil: "lambda", b.Knative != nil: "knative"}[true]] = true
		waitCondition(t, ns, job.Name, dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, dorylusv1alpha1.ReasonChildrenCreated)
	}
	if !backends["cpu"] || !backends["lambda"] || !backends["knative"] {
		t.Errorf("samples cover backends %v, want cpu, lambda and knative", backends)
	}
}

// helmBinary finds helm (helmPath).
func helmBinary(t *testing.T) string {
	t.Helper()
	path, err := helmPath()
	if err != nil {
		testenv.Missing(t, err.Error())
	}
	return path
}

// TestHelmChartApplies renders the chart with helm and applies it to the API
// server, then writes a job's children and status as the chart's
// ServiceAccount, proving its ClusterRole is enough for the operator.
func TestHelmChartApplies(t *testing.T) {
	helmBinary(t)
	ns := newNamespace(t)
	objs, err := renderChart("dorylus", ns)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
	}
	want := map[string]int{"CustomResourceDefinition": 1, "ServiceAccount": 1, "ClusterRole": 4, "ClusterRoleBinding": 1,
		"Role": 1, "RoleBinding": 1, "Deployment": 1, "Service": 1, "ConfigMap": 1, // the ConfigMap: the dashboard
		"ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("rendered kinds (-want +got):\n%s", diff)
	}
	applyAll(t, objs, ns)

	var dep appsv1.Deployment
	if err := getObj(t, ns, "dorylus-dorylus-operator", &dep); err != nil {
		t.Fatalf("operator Deployment: %v", err)
	}
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--leader-elect=true") ||
		!strings.Contains(args, "--metrics-secure=true") {
		t.Errorf("operator args %q lack leader election or secure metrics", args)
	}
	if dep.Spec.Template.Spec.Containers[0].SecurityContext.ReadOnlyRootFilesystem == nil {
		t.Error("operator container has no read-only root file system")
	}
	var role rbacv1.ClusterRole
	if err := k8sClient.Get(context.Background(), client.ObjectKey{Name: "dorylus-dorylus-operator-manager"}, &role); err != nil {
		t.Fatal(err)
	}
	generated, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var markerRole rbacv1.ClusterRole
	if err := yaml.Unmarshal(generated, &markerRole); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(markerRole.Rules, role.Rules); diff != "" {
		t.Errorf("chart ClusterRole differs from the +kubebuilder:rbac markers (-markers +chart):\n%s", diff)
	}

	// Act as the chart's ServiceAccount on a job no manager watches.
	sa := fmt.Sprintf("system:serviceaccount:%s:dorylus-dorylus-operator", ns)
	user, err := testEnv.AddUser(envtest.User{Name: sa, Groups: []string{"system:serviceaccounts", "system:authenticated"}}, restConfig)
	if err != nil {
		t.Fatal(err)
	}
	asOperator, err := client.New(user.Config(), client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	jobNS := newNamespace(t)
	job := createJob(t, userJob(jobNS, "rbac", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.ManagedBy = ptr.To("dorylus.dev/chart-test")
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			Service: &dorylusv1alpha1.KnativeServiceTemplate{MaxScale: 5}}}
	}))
	job = getJob(t, jobNS, job.Name)
	r := &GNNTrainingJobReconciler{Client: asOperator, Clock: fakeClock, RuntimeImage: testImage, KnativeAvailable: true}
	eventually(t, "apply children as the chart's ServiceAccount", func() error {
		return r.applyChildren(context.Background(), job, true, "p")
	})
	if _, err := r.observe(context.Background(), job); err != nil {
		t.Errorf("observe as the chart's ServiceAccount: %v", err)
	}
	st := computeStatus(job, statusInput{obs: observation{knativeReady: true}, now: metav1.NewTime(fakeClock.Now()).Rfc3339Copy()})
	if err := r.writeStatus(context.Background(), job, st); err != nil {
		t.Errorf("write status as the chart's ServiceAccount: %v", err)
	}
}

// TestKustomizeDefaultApplies builds config/default with kubectl's kustomize
// and applies it.
func TestKustomizeDefaultApplies(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		testenv.Missing(t, "kubectl not in PATH (hack/local-cluster/build.sh builds it)")
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join("..", "config", "default")).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	objs := decodeAll(t, out)
	if len(objs) != 12 {
		t.Errorf("config/default has %d objects, want 12", len(objs))
	}
	applyAll(t, objs, "")
	var dep appsv1.Deployment
	if err := getObj(t, "dorylus-system", "dorylus-controller-manager", &dep); err != nil {
		t.Fatalf("kustomized operator Deployment: %v", err)
	}
}
