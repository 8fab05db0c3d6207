package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestPodTemplatesReachThePods creates a job with a pod template on every
// role and checks each pod template the operator wrote, field by field, and
// that graph server 0 can report progress as the graph servers' own
// ServiceAccount.
func TestPodTemplatesReachThePods(t *testing.T) {
	ns := newNamespace(t)
	gs, ps, fn := fullPodTemplate(), fullPodTemplate(), fullPodTemplate()
	ps.Spec.ServiceAccountName = "ps-identity"
	fn.Spec.ServiceAccountName = "fn-identity"
	createJob(t, userJob(ns, "tmpl", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.GraphServers.PodTemplate = gs
		j.Spec.ParameterServers.PodTemplate = ps
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			Service: &dorylusv1alpha1.KnativeServiceTemplate{PodTemplate: fn}}}
	}))
	waitCondition(t, ns, "tmpl", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")

	var sts appsv1.StatefulSet
	var dep appsv1.Deployment
	ks := &unstructured.Unstructured{}
	ks.SetGroupVersionKind(KnativeServiceGVK)
	for name, obj := range map[string]client.Object{"tmpl-gs": &sts, "tmpl-ps-0": &dep, "tmpl-fn": ks} {
		if err := getObj(t, ns, name, obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var fnPod corev1.PodTemplateSpec
	tmplMap, _, _ := unstructured.NestedMap(ks.Object, "spec", "template")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmplMap, &fnPod); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		role      string
		pod       corev1.PodTemplateSpec
		tmpl      *dorylusv1alpha1.PodTemplate
		ownLabels map[string]string
		ownEnv    int
	}{
		{"graph servers", sts.Spec.Template, gs, map[string]string{LabelJobName: "tmpl", LabelRole: RoleGraphServer}, 6},
		{"parameter servers", dep.Spec.Template, ps, map[string]string{LabelJobName: "tmpl", LabelRole: RoleParamServer, LabelShard: "0"}, 4},
		{"knative function", fnPod, fn, map[string]string{LabelJobName: "tmpl", LabelRole: RoleFunction}, 0},
	} {
		for k, v := range withOwn(c.tmpl.Metadata.Labels, c.ownLabels) {
			if c.pod.Labels[k] != v {
				t.Errorf("%s: label %s=%q, want %q", c.role, k, c.pod.Labels[k], v)
			}
		}
		for k, v := range c.tmpl.Metadata.Annotations {
			if c.pod.Annotations[k] != v {
				t.Errorf("%s: annotation %s=%q, want %q", c.role, k, c.pod.Annotations[k], v)
			}
		}
		s := &c.pod.Spec
		if s.ServiceAccountName != c.tmpl.Spec.ServiceAccountName || s.PriorityClassName != "training" {
			t.Errorf("%s: serviceAccountName %q, priorityClassName %q", c.role, s.ServiceAccountName, s.PriorityClassName)
		}
		if diff := cmp.Diff(pullSecrets(&c.tmpl.Spec), s.ImagePullSecrets); diff != "" {
			t.Errorf("%s: imagePullSecrets (-want +got):\n%s", c.role, diff)
		}
		if diff := cmp.Diff(c.tmpl.Spec.Affinity, s.Affinity); diff != "" {
			t.Errorf("%s: affinity (-want +got):\n%s", c.role, diff)
		}
		if diff := cmp.Diff(c.tmpl.Spec.TopologySpreadConstraints, s.TopologySpreadConstraints); diff != "" {
			t.Errorf("%s: topologySpreadConstraints (-want +got):\n%s", c.role, diff)
		}
		if env := s.Containers[0].Env; len(env) != c.ownEnv+len(c.tmpl.Spec.Env) {
			t.Errorf("%s: env %v, want %d of the operator's then the template's", c.role, env, c.ownEnv)
		} else if diff := cmp.Diff(envVars(&c.tmpl.Spec), env[c.ownEnv:]); diff != "" {
			t.Errorf("%s: env after the operator's (-want +got):\n%s", c.role, diff)
		}
	}

	// What was applied reads back unchanged: a reconcile writes nothing
	// (it may read why the pods are not ready yet).
	settle(t, ns)
	before := operatorRequests.snapshot()
	reconcileNow(t, ns, "tmpl")
	for k := range requestDelta(before, operatorRequests.snapshot(), func(n string) bool { return n == ns }) {
		if verb, _, _ := strings.Cut(k, " "); verb != "get" && verb != "list" {
			t.Errorf("a reconcile of the unchanged job sent %q", k)
		}
	}

	var binding rbacv1.RoleBinding
	if err := getObj(t, ns, "tmpl-runtime", &binding); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "tmpl-runtime", Namespace: ns}, {Kind: "ServiceAccount", Name: "ml-identity", Namespace: ns}}
	if diff := cmp.Diff(want, binding.Subjects); diff != "" {
		t.Errorf("RoleBinding subjects (-want +got):\n%s", diff)
	}
	user, err := testEnv.AddUser(envtest.User{Name: "system:serviceaccount:" + ns + ":ml-identity",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}, restConfig)
	if err != nil {
		t.Fatal(err)
	}
	reporter, err := jobstatus.New(user.Config(), ns, "tmpl")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "report as the graph servers' own ServiceAccount", func() error {
		return reporter.Report(context.Background(), jobstatus.Progress{Epoch: 1, Loss: 1.5})
	})
	if p := getJob(t, ns, "tmpl").Status.Progress; p == nil || p.Epoch != 1 {
		t.Errorf("progress %+v, want epoch 1", p)
	}
}

// podTemplateAt sets a pod template field under each role's podTemplate.
func podTemplateAt(role, path string, v any) edit {
	prefix := map[string]string{
		"gs": "spec.graphServers.podTemplate.",
		"ps": "spec.parameterServers.podTemplate.",
		"fn": "spec.tensorBackend.knative.service.podTemplate.",
	}[role]
	return func(u *unstructured.Unstructured) {
		if role == "fn" {
			set("spec.tensorBackend", obj{"knative": obj{"service": obj{}}})(u)
		}
		set(prefix+path, v)(u)
	}
}

// invalidPodTemplates are refused at admission, naming the field and why.
var invalidPodTemplates = []struct {
	name           string
	edits          []edit
	field, message string
}{
	{"selector label", []edit{podTemplateAt("gs", "metadata.labels", obj{"dorylus.dev/role": "x"})},
		"spec.graphServers.podTemplate.metadata.labels", "labels under dorylus.dev/ and app.kubernetes.io/name, instance, component and managed-by are set by the operator"},
	{"label under a dorylus.dev subdomain", []edit{podTemplateAt("ps", "metadata.labels", obj{"team.dorylus.dev/x": "y"})},
		"spec.parameterServers.podTemplate.metadata.labels", "are set by the operator"},
	{"managed-by label", []edit{podTemplateAt("fn", "metadata.labels", obj{"app.kubernetes.io/managed-by": "me"})},
		"spec.tensorBackend.knative.service.podTemplate.metadata.labels", "are set by the operator"},
	{"label key with a space", []edit{podTemplateAt("gs", "metadata.labels", obj{"bad key": "x"})},
		"spec.graphServers.podTemplate.metadata.labels", "label keys must be"},
	{"label value with a space", []edit{podTemplateAt("gs", "metadata.labels", obj{"team": "a b"})},
		"spec.graphServers.podTemplate.metadata.labels.team", "should match"},
	{"label value too long", []edit{podTemplateAt("ps", "metadata.labels", obj{"team": strings.Repeat("a", 64)})},
		"spec.parameterServers.podTemplate.metadata.labels.team", "may not be more than 63 bytes"},
	{"config-hash annotation", []edit{podTemplateAt("gs", "metadata.annotations", obj{"dorylus.dev/config-hash": "x"})},
		"spec.graphServers.podTemplate.metadata.annotations", "annotations under dorylus.dev/ and autoscaling.knative.dev/min-scale and max-scale are set by the operator"},
	{"knative scale annotation", []edit{podTemplateAt("fn", "metadata.annotations", obj{"autoscaling.knative.dev/max-scale": "3"})},
		"spec.tensorBackend.knative.service.podTemplate.metadata.annotations", "are set by the operator"},
	{"annotation key with a space", []edit{podTemplateAt("ps", "metadata.annotations", obj{"a b": "x"})},
		"spec.parameterServers.podTemplate.metadata.annotations", "annotation keys must be"},
	{"operator env", []edit{podTemplateAt("gs", "spec.env", []any{obj{"name": "DORYLUS_PARTITION", "value": "3"}})},
		"spec.graphServers.podTemplate.spec.env", "environment variables starting with DORYLUS_ are set by the operator"},
	{"duplicate env", []edit{podTemplateAt("ps", "spec.env", []any{obj{"name": "A", "value": "1"}, obj{"name": "A", "value": "2"}})},
		"spec.parameterServers.podTemplate.spec.env[1]", "Duplicate value"},
	{"env without a name", []edit{podTemplateAt("fn", "spec.env", []any{obj{"value": "1"}})},
		"spec.tensorBackend.knative.service.podTemplate.spec.env[0].name", "Required value"},
	{"empty env name", []edit{podTemplateAt("ps", "spec.env", []any{obj{"name": "", "value": "1"}})},
		"spec.parameterServers.podTemplate.spec.env", "environment variable names must not be empty"},
	{"env value and valueFrom", []edit{podTemplateAt("ps", "spec.env", []any{obj{"name": "A", "value": "1",
		"valueFrom": obj{"fieldRef": obj{"fieldPath": "metadata.name"}}}})},
		"spec.parameterServers.podTemplate.spec.env", "an environment variable sets value or valueFrom, not both"},
	{"env from two sources", []edit{podTemplateAt("gs", "spec.env", []any{obj{"name": "A", "valueFrom": obj{
		"fieldRef": obj{"fieldPath": "metadata.name"}, "secretKeyRef": obj{"name": "s", "key": "k"}}}})},
		"spec.graphServers.podTemplate.spec.env", "valueFrom must set exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef"},
	{"env from a file", []edit{podTemplateAt("fn", "spec.env", []any{obj{"name": "A", "valueFrom": obj{
		"fileKeyRef": obj{"volumeName": "v", "path": "p", "key": "k"}}}})},
		"spec.tensorBackend.knative.service.podTemplate.spec.env", "valueFrom must set exactly one of fieldRef, resourceFieldRef, configMapKeyRef, secretKeyRef"},
	{"env from a Secret without a name", []edit{podTemplateAt("gs", "spec.env", []any{obj{"name": "A", "valueFrom": obj{"secretKeyRef": obj{"key": "k"}}}})},
		"spec.graphServers.podTemplate.spec.env", "valueFrom.secretKeyRef.name and valueFrom.configMapKeyRef.name must name a Secret and a ConfigMap"},
	{"env from a ConfigMap with an empty name", []edit{podTemplateAt("ps", "spec.env", []any{obj{"name": "A", "valueFrom": obj{"configMapKeyRef": obj{"name": "", "key": "k"}}}})},
		"spec.parameterServers.podTemplate.spec.env", "valueFrom.secretKeyRef.name and valueFrom.configMapKeyRef.name must name a Secret and a ConfigMap"},
	{"env from a field a pod does not have", []edit{podTemplateAt("gs", "spec.env", []any{obj{"name": "A", "valueFrom": obj{"fieldRef": obj{"fieldPath": "metadata.nme"}}}})},
		"spec.graphServers.podTemplate.spec.env", "valueFrom.fieldRef.fieldPath must be metadata.name"},
	{"env from an unsubscripted label field", []edit{podTemplateAt("fn", "spec.env", []any{obj{"name": "A", "valueFrom": obj{"fieldRef": obj{"fieldPath": "metadata.labels"}}}})},
		"spec.tensorBackend.knative.service.podTemplate.spec.env", "valueFrom.fieldRef.fieldPath must be metadata.name"},
	{"env from a resource a container has not", []edit{podTemplateAt("ps", "spec.env", []any{obj{"name": "A", "valueFrom": obj{"resourceFieldRef": obj{"resource": "limits.gpu"}}}})},
		"spec.parameterServers.podTemplate.spec.env", "valueFrom.resourceFieldRef.resource must be limits or requests of cpu, memory, ephemeral-storage or hugepages-<size>"},
	{"too many env", []edit{podTemplateAt("gs", "spec.env", manyEnv(65))},
		"spec.graphServers.podTemplate.spec.env", "must have at most 64 items"},
	{"empty pull secret", []edit{podTemplateAt("gs", "spec.imagePullSecrets", []any{obj{"name": ""}})},
		"spec.graphServers.podTemplate.spec.imagePullSecrets[0].name", "should be at least 1 chars long"},
	{"duplicate pull secret", []edit{podTemplateAt("ps", "spec.imagePullSecrets", []any{obj{"name": "r"}, obj{"name": "r"}})},
		"spec.parameterServers.podTemplate.spec.imagePullSecrets[1]", "Duplicate value"},
	{"bad service account", []edit{podTemplateAt("gs", "spec.serviceAccountName", "Bad_SA")},
		"spec.graphServers.podTemplate.spec.serviceAccountName", "should match"},
	{"bad priority class", []edit{podTemplateAt("fn", "spec.priorityClassName", "High Priority")},
		"spec.tensorBackend.knative.service.podTemplate.spec.priorityClassName", "should match"},
	{"node affinity without terms", []edit{podTemplateAt("gs", "spec.affinity", obj{"nodeAffinity": obj{"requiredDuringSchedulingIgnoredDuringExecution": obj{}}})},
		"spec.graphServers.podTemplate.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", "Required value"},
	{"spread that may be unsatisfied", []edit{podTemplateAt("ps", "spec.topologySpreadConstraints",
		[]any{obj{"maxSkew": int64(1), "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}})},
		"spec.parameterServers.podTemplate.spec.topologySpreadConstraints", "each topology spread constraint needs"},
	{"spread with no skew", []edit{podTemplateAt("gs", "spec.topologySpreadConstraints",
		[]any{obj{"maxSkew": int64(0), "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}})},
		"spec.graphServers.podTemplate.spec.topologySpreadConstraints", "each topology spread constraint needs"},
	{"lambda role with the graph servers' own service account", []edit{
		set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "us-east-1",
			"credentials": obj{"roleARN": "arn:aws:iam::123456789012:role/r"}}}),
		podTemplateAt("gs", "spec.serviceAccountName", "ml-identity")},
		"spec.graphServers.podTemplate.spec.serviceAccountName", "roleARN annotates the job's own ServiceAccount"},
}

func manyEnv(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = obj{"name": fmt.Sprintf("V%d", i), "value": "x"}
	}
	return out
}

// TestPodTemplateAdmission checks that a full pod template is accepted on
// every role and that each invalid one is refused, naming the field and why.
func TestPodTemplateAdmission(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	full, err := runtime.DefaultUnstructuredConverter.ToUnstructured(fullPodTemplate())
	if err != nil {
		t.Fatal(err)
	}
	valid := manifest(ns, "valid")
	for _, role := range []string{"gs", "ps", "fn"} {
		podTemplateAt(role, "metadata", full["metadata"])(valid)
		podTemplateAt(role, "spec", full["spec"])(valid)
	}
	set("spec.tensorBackend.knative.service.maxScale", int64(5))(valid)
	if err := k8sClient.Create(ctx, valid, client.DryRunAll); err != nil {
		t.Fatalf("a full pod template on every role is refused: %v", err)
	}
	edges := manifest(ns, "env-edges")
	podTemplateAt("gs", "spec.env", []any{
		obj{"name": "my.var-1 x~", "value": ""},
		obj{"name": "LABEL", "valueFrom": obj{"fieldRef": obj{"fieldPath": "metadata.labels['app.kubernetes.io/name']"}}},
		obj{"name": "IPS", "valueFrom": obj{"fieldRef": obj{"fieldPath": "status.podIPs"}}},
		obj{"name": "PAGES", "valueFrom": obj{"resourceFieldRef": obj{"resource": "requests.hugepages-2Mi"}}},
		obj{"name": "CFG", "value": "", "valueFrom": obj{"configMapKeyRef": obj{"name": "c", "key": "k", "optional": true}}},
	})(edges)
	if err := k8sClient.Create(ctx, edges); err != nil {
		t.Fatalf("valid environment edge cases refused: %v", err)
	}
	// The API server also takes the graph servers' StatefulSet with them.
	waitCondition(t, ns, "env-edges", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, dorylusv1alpha1.ReasonChildrenCreated)
	for _, tc := range invalidPodTemplates {
		t.Run(tc.name, func(t *testing.T) { checkRefused(t, ns, tc.edits, tc.field+":", tc.message) })
	}
}

// checkRefused sends the base manifest with edits and checks that the API
// server refuses it as invalid with an error naming field and message.
func checkRefused(t *testing.T, ns string, edits []edit, field, message string) {
	t.Helper()
	u := manifest(ns, "job")
	for _, e := range edits {
		e(u)
	}
	err := k8sClient.Create(context.Background(), u, client.DryRunAll)
	if err == nil {
		t.Fatal("accepted")
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("refused, but not as invalid: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, field) || !strings.Contains(msg, message) {
		t.Errorf("error %q does not name field %q with %q", msg, field, message)
	}
}
