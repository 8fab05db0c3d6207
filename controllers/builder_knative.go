package controllers

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// KnativeServiceGVK is serving.knative.dev/v1 Service, written as
// unstructured so that the operator needs no Knative module.
var KnativeServiceGVK = schema.GroupVersionKind{Group: "serving.knative.dev", Version: "v1", Kind: "Service"}

// Knative autoscaling annotations on the revision template.
const (
	annotationMinScale = "autoscaling.knative.dev/min-scale"
	annotationMaxScale = "autoscaling.knative.dev/max-scale"
)

// buildKnativeService is the managed Knative Service <job>-fn running
// `dorylus function`, with no ServiceAccount token (the function never calls
// the Kubernetes API), requiring the job's bearer token, which it alone of
// the job's credentials mounts (period names them). While the job is stopped
// (suspended or finished) its lower scale bound is 0, so the function scales
// to zero.
func buildKnativeService(job *dorylusv1alpha1.GNNTrainingJob, image, period string, running bool) *unstructured.Unstructured {
	t := job.Spec.Backend().Knative.Service
	if t.Image != "" {
		image = t.Image
	}
	concurrency := int32(1)
	if t.ContainerConcurrency != nil {
		concurrency = *t.ContainerConcurrency
	}
	minScale := t.MinScale
	if !running {
		minScale = 0
	}
	container := map[string]any{
		"name":    RoleFunction,
		"image":   image,
		"command": []any{jobconfig.Command},
		"args":    []any{"function", "--listen", ":" + strconv.Itoa(jobconfig.FunctionPort), "--token-file", credentialsFile(pki.TokenFile)},
		"volumeMounts": []any{map[string]any{
			"name": volumeCredentials, "mountPath": jobconfig.CredentialsDir, "readOnly": true,
		}},
		// Knative reads the protocol from the port's name (http1 or h2c);
		// TCP is what its schema defaults, written out so that what the
		// API server stores is what the operator applies.
		"ports": []any{map[string]any{"name": "http1", "containerPort": int64(jobconfig.FunctionPort), "protocol": "TCP"}},
		"securityContext": map[string]any{
			"allowPrivilegeEscalation": false,
			"readOnlyRootFilesystem":   true,
			"runAsNonRoot":             true,
			"capabilities":             map[string]any{"drop": []any{"ALL"}},
			"seccompProfile":           map[string]any{"type": "RuntimeDefault"},
		},
	}
	if r := resourceMap(t.Resources.Requests); r != nil {
		container["resources"] = map[string]any{"requests": r}
	}
	if r := resourceMap(t.Resources.Limits); r != nil {
		res, _ := container["resources"].(map[string]any)
		if res == nil {
			res = map[string]any{}
		}
		res["limits"] = r
		container["resources"] = res
	}
	tmpl := templateOf(t.PodTemplate)
	podSpec, env := unstructuredPodTemplate(tmpl)
	if env != nil {
		container["env"] = env
	}
	podSpec["automountServiceAccountToken"] = false
	podSpec["containerConcurrency"] = int64(concurrency)
	podSpec["containers"] = []any{container}
	podSpec["volumes"] = []any{map[string]any{"name": volumeCredentials, "secret": map[string]any{
		"secretName": credentialsSecretName(job, period),
		"items":      []any{map[string]any{"key": pki.TokenFile, "path": pki.TokenFile}},
	}}}
	own := childLabels(job, RoleFunction)
	labels := anyMap(own)
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name":      knativeServiceName(job),
			"namespace": job.Namespace,
			"labels":    labels,
			"ownerReferences": []any{map[string]any{
				"apiVersion":         dorylusv1alpha1.GroupVersion.String(),
				"kind":               "GNNTrainingJob",
				"name":               job.Name,
				"uid":                string(job.UID),
				"controller":         true,
				"blockOwnerDeletion": true,
			}},
		},
		"spec": map[string]any{
			"template": map[string]any{
				"metadata": map[string]any{
					"labels": anyMap(withOwn(tmpl.Metadata.Labels, own)),
					"annotations": anyMap(withOwn(tmpl.Metadata.Annotations, map[string]string{
						annotationMinScale:          strconv.Itoa(int(minScale)),
						annotationMaxScale:          strconv.Itoa(int(t.MaxScale)),
						AnnotationCredentialsPeriod: period,
					})),
				},
				"spec": podSpec,
			},
		},
	}}
	u.SetGroupVersionKind(KnativeServiceGVK)
	return u
}

func resourceMap(m corev1.ResourceList) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[string(k)] = v.String()
	}
	return out
}

// anyMap is m in unstructured form.
func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
