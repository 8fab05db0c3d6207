package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// The operator's identity in the envtest suite: the ServiceAccount of a rendering of the
// chart, bound to exactly the rules that rendering grants, which the manager impersonates.

// helmPath finds helm: $HELM, else the cache hack/tools.sh installs into.
func helmPath() (string, error) {
	path := os.Getenv("HELM")
	if path == "" {
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, ".cache", "dorylus", "bin", "helm")
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("helm not found at %s (run hack/tools.sh helm)", path)
	}
	return path, nil
}

// renderChart renders the chart as release into namespace ns ("": helm's default) with
// extra helm template arguments.
func renderChart(release, ns string, args ...string) ([]*unstructured.Unstructured, error) {
	helm, err := helmPath()
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "helm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	full := []string{"template", release, filepath.Join("..", "charts", "dorylus-operator"), "--kube-version", "1.37.2"}
	if ns != "" {
		full = append(full, "--namespace", ns)
	}
	cmd := exec.Command(helm, append(full, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/c", "HELM_CONFIG_HOME="+home+"/f", "HELM_DATA_HOME="+home+"/d")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm template: %v\n%s", err, stderr.String())
	}
	return decodeYAML(out)
}

// decodeYAML splits a multi-document YAML stream into objects.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode YAML: %w", err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

// chartOperator renders the chart as release into namespace ns with extra helm arguments,
// creates ns, and applies the rendering's ServiceAccount and every ClusterRole,
// ClusterRoleBinding, Role and RoleBinding of it (into the namespaces it names) with admin,
// an admin client. It returns a copy of cfg impersonating the operator's ServiceAccount.
func chartOperator(ctx context.Context, admin client.Client, cfg *rest.Config, release, ns string, args ...string) (*rest.Config, error) {
	objs, err := renderChart(release, ns, args...)
	if err != nil {
		return nil, err
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	sa := ""
	for _, u := range objs {
		switch u.GetKind() {
		case "ServiceAccount":
			sa = u.GetName()
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if u.GetKind() != "ClusterRole" && u.GetKind() != "ClusterRoleBinding" && u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		if err := admin.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("envtest"), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("apply %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	if sa == "" {
		return nil, errors.New("the chart renders no ServiceAccount")
	}
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	return out, nil
}

// TestOperatorReadsNoSecret: the suite's operator, the chart's ServiceAccount, may not get
// or list a Secret, in a namespace or across the cluster; a job it starts reaches its
// credentials Secret and its graph servers all the same, and over the whole suite the
// operator has sent no get, list or watch of Secrets (no informer of them).
func TestOperatorReadsNoSecret(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	if err := k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "users"},
		StringData: map[string]string{"secretAccessKey": "x"}}); err != nil {
		t.Fatal(err)
	}
	asOperator, err := client.New(operatorConfig, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := asOperator.Get(ctx, client.ObjectKey{Namespace: ns, Name: "users"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("the operator gets a Secret: %v, want Forbidden", err)
	}
	for _, opts := range [][]client.ListOption{{client.InNamespace(ns)}, nil} {
		if err := asOperator.List(ctx, &corev1.SecretList{}, opts...); !apierrors.IsForbidden(err) {
			t.Errorf("the operator lists Secrets (%v): %v, want Forbidden", opts, err)
		}
	}

	createJob(t, userJob(ns, "cora"))
	job := waitCondition(t, ns, "cora", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, dorylusv1alpha1.ReasonChildrenCreated)
	eventually(t, "the job's credentials and graph servers", func() error {
		job = getJob(t, ns, "cora")
		period := credentialsPeriod(job.Status.StartTime, job.Status.Restarts)
		if err := getObj(t, ns, credentialsSecretName(job, period), &corev1.Secret{}); err != nil {
			return err
		}
		var sts appsv1.StatefulSet
		if err := getObj(t, ns, "cora-gs", &sts); err != nil {
			return err
		}
		if got := sts.Spec.Template.Annotations[AnnotationCredentialsPeriod]; got != period {
			return fmt.Errorf("graph servers of period %q, want %q", got, period)
		}
		return nil
	})
	for k, n := range operatorRequests.snapshot() {
		if k.resource == "secrets" && k.verb != "create" && k.verb != "delete" {
			t.Errorf("the operator sent %d %s requests", n, k)
		}
	}
}
