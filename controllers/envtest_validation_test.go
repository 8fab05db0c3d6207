package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// manifest is a valid minimal GNNTrainingJob as a user writes it.
func manifest(ns, name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "dorylus.dev/v1alpha1",
		"kind":       "GNNTrainingJob",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec":       map[string]any{"dataset": map[string]any{"builtin": map[string]any{"name": "cora"}}},
	}}
}

// edit is a change to a manifest: set a dotted path to a value, or delete it.
type edit func(u *unstructured.Unstructured)

func set(path string, v any) edit {
	return func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, v, strings.Split(path, ".")...); err != nil {
			panic(err)
		}
	}
}

func del(path string) edit {
	return func(u *unstructured.Unstructured) {
		unstructured.RemoveNestedField(u.Object, strings.Split(path, ".")...)
	}
}

type obj = map[string]any

// invalidManifests are refused at admission; field and message are parts of
// the API server's error that say where and why.
var invalidManifests = []struct {
	name           string
	edits          []edit
	field, message string
}{
	{"no dataset source", []edit{set("spec.dataset", obj{})}, "spec.dataset", "exactly one of builtin, s3, pvc, http"},
	{"two dataset sources", []edit{set("spec.dataset.s3", obj{"bucket": "graphs"})}, "spec.dataset", "exactly one of builtin, s3, pvc, http"},
	{"unknown builtin dataset", []edit{set("spec.dataset.builtin.name", "imagenet")}, "spec.dataset.builtin.name", "Unsupported value"},
	{"pubmed has no features", []edit{set("spec.dataset.builtin.name", "pubmed")}, "spec.dataset.builtin.name", `Unsupported value: "pubmed"`},
	{"bad bucket name", []edit{set("spec.dataset", obj{"s3": obj{"bucket": "Bad_Bucket"}})}, "spec.dataset.s3.bucket", "should match"},
	{"bad dataset format", []edit{set("spec.dataset.format", "CSV")}, "spec.dataset.format", "Unsupported value"},
	{"pvc path escapes", []edit{set("spec.dataset", obj{"pvc": obj{"claimName": "graphs", "path": "a/../../etc"}})}, "spec.dataset.pvc.path", "must not contain '..'"},
	{"ftp dataset url", []edit{set("spec.dataset", obj{"http": obj{"url": "ftp://example.org/cora.tgz"}})}, "spec.dataset.http.url", "should match"},
	{"bad sha256", []edit{set("spec.dataset", obj{"http": obj{"url": "https://example.org/c.tgz", "sha256": "xyz"}})}, "spec.dataset.http.sha256", "should match"},
	{"unknown architecture", []edit{set("spec.model.architecture", "MLP")}, "spec.model.architecture", "Unsupported value"},
	{"zero layers", []edit{set("spec.model.layers", int64(0))}, "spec.model.layers", "greater than or equal to 1"},
	{"too many layers", []edit{set("spec.model.layers", int64(17))}, "spec.model.layers", "less than or equal to 16"},
	{"dropout of one", []edit{set("spec.model.dropout", "1.0")}, "spec.model.dropout", "must be in [0, 1)"},
	{"dropout not a number", []edit{set("spec.model.dropout", "half")}, "spec.model.dropout", "should match"},
	{"heads on a GCN", []edit{set("spec.model.heads", int64(4))}, "spec.model", "heads applies only to architecture GAT"},
	{"zero epochs", []edit{set("spec.training.epochs", int64(0))}, "spec.training.epochs", "greater than or equal to 1"},
	{"zero learning rate", []edit{set("spec.training.learningRate", "0")}, "spec.training.learningRate", "must be greater than 0"},
	{"negative weight decay", []edit{set("spec.training.weightDecay", "-0.1")}, "spec.training.weightDecay", "should match"},
	{"target accuracy above one", []edit{set("spec.training.targetAccuracy", "1.5")}, "spec.training.targetAccuracy", "must be in (0, 1]"},
	{"staleness word", []edit{set("spec.training.staleness", "fast")}, "spec.training.staleness", `must be "sync" or an integer in [0, 16]`},
	{"staleness too large", []edit{set("spec.training.staleness", int64(17))}, "spec.training.staleness", `must be "sync" or an integer in [0, 16]`},
	{"zero intervals", []edit{set("spec.training.intervals", int64(0))}, "spec.training.intervals", "greater than or equal to 1"},
	{"update every 0 intervals", []edit{set("spec.training.staleness", int64(1)), set("spec.training.updateEvery", "0")}, "spec.training.updateEvery",
		`must be "epoch", "interval" or a number of intervals in [1, 65536]`},
	{"update every too many intervals", []edit{set("spec.training.staleness", int64(1)), set("spec.training.updateEvery", "65537")}, "spec.training.updateEvery",
		`must be "epoch", "interval" or a number of intervals in [1, 65536]`},
	{"update granularity of sync", []edit{set("spec.training.updateEvery", "epoch")}, "spec.training.updateEvery", "needs an asynchronous staleness"},
	{"zero graph servers", []edit{set("spec.graphServers.replicas", int64(0))}, "spec.graphServers.replicas", "greater than or equal to 1"},
	{"too many graph servers", []edit{set("spec.graphServers.replicas", int64(300))}, "spec.graphServers.replicas", "less than or equal to 256"},
	{"zero parameter servers", []edit{set("spec.parameterServers.replicas", int64(0))}, "spec.parameterServers.replicas", "greater than or equal to 1"},
	{"two tensor backends", []edit{set("spec.tensorBackend", obj{"cpu": obj{}, "knative": obj{"url": "http://fn"}})}, "spec.tensorBackend", "exactly one of cpu, lambda, knative"},
	{"empty tensor backend", []edit{set("spec.tensorBackend", obj{})}, "spec.tensorBackend", "exactly one of cpu, lambda, knative"},
	{"lambda without credentials", []edit{set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "us-east-1", "credentials": obj{}}})},
		"spec.tensorBackend.lambda.credentials", "exactly one of roleARN, secretRef"},
	{"lambda with two credentials", []edit{set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "us-east-1",
		"credentials": obj{"roleARN": "arn:aws:iam::123456789012:role/r", "secretRef": obj{"name": "aws"}}}})},
		"spec.tensorBackend.lambda.credentials", "exactly one of roleARN, secretRef"},
	{"lambda bad role ARN", []edit{set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "us-east-1",
		"credentials": obj{"roleARN": "role/r"}}})}, "spec.tensorBackend.lambda.credentials.roleARN", "should match"},
	{"lambda bad region", []edit{set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "mars",
		"credentials": obj{"secretRef": obj{"name": "aws"}}}})}, "spec.tensorBackend.lambda.region", "should match"},
	{"lambda too little memory", []edit{set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "us-east-1", "memoryMB": int64(64),
		"credentials": obj{"secretRef": obj{"name": "aws"}}}})}, "spec.tensorBackend.lambda.memoryMB", "greater than or equal to 128"},
	{"lambda without a function", []edit{set("spec.tensorBackend", obj{"lambda": obj{"region": "us-east-1",
		"credentials": obj{"secretRef": obj{"name": "aws"}}}})}, "spec.tensorBackend.lambda.functionName", "Required value"},
	{"knative url and service", []edit{set("spec.tensorBackend", obj{"knative": obj{"url": "http://fn", "service": obj{}}})},
		"spec.tensorBackend.knative", "exactly one of url, service"},
	{"knative neither", []edit{set("spec.tensorBackend", obj{"knative": obj{}})}, "spec.tensorBackend.knative", "exactly one of url, service"},
	{"knative url not http", []edit{set("spec.tensorBackend", obj{"knative": obj{"url": "grpc://fn", "tokenSecretRef": obj{"name": "t"}}})}, "spec.tensorBackend.knative.url", "should match"},
	{"knative url without a token", []edit{set("spec.tensorBackend", obj{"knative": obj{"url": "http://fn"}})},
		"spec.tensorBackend.knative.tokenSecretRef", "tokenSecretRef is required with url"},
	{"knative token Secret without a name", []edit{set("spec.tensorBackend", obj{"knative": obj{"url": "http://fn", "tokenSecretRef": obj{"name": ""}}})},
		"spec.tensorBackend.knative.tokenSecretRef.name", "tokenSecretRef.name must not be empty"},
	{"knative token Secret for a managed function", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{}, "tokenSecretRef": obj{"name": "t"}}})},
		"spec.tensorBackend.knative.tokenSecretRef", "tokenSecretRef is for url only"},
	{"remote placement on the cpu backend", []edit{set("spec.tensorBackend", obj{"cpu": obj{}, "placement": "Remote"})},
		"spec.tensorBackend.placement", "Remote is for lambda and knative"},
	{"unknown placement", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{}}, "placement": "Local"})},
		"spec.tensorBackend.placement", "Unsupported value"},
	{"knative min above max", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{"minScale": int64(5), "maxScale": int64(2)}}})},
		"spec.tensorBackend.knative.service", "minScale must not exceed maxScale"},
	{"checkpoint with two destinations", []edit{set("spec.checkpoint", obj{"pvc": obj{"claimName": "c"}, "s3": obj{"bucket": "ckpt"}})},
		"spec.checkpoint", "exactly one of s3, pvc"},
	{"checkpoint without destination", []edit{set("spec.checkpoint", obj{"intervalEpochs": int64(5)})}, "spec.checkpoint", "exactly one of s3, pvc"},
	{"checkpoint every zero epochs", []edit{set("spec.checkpoint", obj{"intervalEpochs": int64(0), "pvc": obj{"claimName": "c"}})},
		"spec.checkpoint.intervalEpochs", "greater than or equal to 1"},
	{"negative backoff limit", []edit{set("spec.runPolicy.backoffLimit", int64(-1))}, "spec.runPolicy.backoffLimit", "greater than or equal to 0"},
	{"zero deadline", []edit{set("spec.runPolicy.activeDeadlineSeconds", int64(0))}, "spec.runPolicy.activeDeadlineSeconds", "greater than or equal to 1"},
	{"negative ttl", []edit{set("spec.runPolicy.ttlSecondsAfterFinished", int64(-5))}, "spec.runPolicy.ttlSecondsAfterFinished", "greater than or equal to 0"},
	{"negative budget", []edit{set("spec.runPolicy.budgetUSD", "-5")}, "spec.runPolicy.budgetUSD", "should match"},
	{"zero budget", []edit{set("spec.runPolicy.budgetUSD", "0")}, "spec.runPolicy.budgetUSD", "must be greater than 0"},
	{"managedBy not a path", []edit{set("spec.managedBy", "not a controller")}, "spec.managedBy", "should match"},
	{"name too long", []edit{set("metadata.name", strings.Repeat("a", 41))}, "", "metadata.name must be at most 40 characters"},
	{"name starts with a digit", []edit{set("metadata.name", "1cora")}, "", "metadata.name must be a DNS-1035 label"},
	{"no dataset at all", []edit{del("spec.dataset")}, "spec.dataset", "Required value"},
	// What the cluster would only refuse later, when the operator creates the children or
	// the kubelet runs them.
	{"graph server cpu request above its limit", []edit{set("spec.graphServers.resources", obj{"requests": obj{"cpu": "2"}, "limits": obj{"cpu": "1500m"}})},
		"spec.graphServers.resources.requests", "must each be at most its limit"},
	{"parameter server memory request above its limit", []edit{set("spec.parameterServers.resources", obj{"requests": obj{"memory": "2Gi"}, "limits": obj{"memory": "1536Mi"}})},
		"spec.parameterServers.resources.requests", "must each be at most its limit"},
	{"function ephemeral-storage request above its limit", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{"resources": obj{
		"requests": obj{"ephemeral-storage": int64(2)}, "limits": obj{"ephemeral-storage": int64(1)}}}}})},
		"spec.tensorBackend.knative.service.resources.requests", "must each be at most its limit"},
	{"negative cpu request", []edit{set("spec.graphServers.resources.requests", obj{"cpu": "-1"})},
		"spec.graphServers.resources.requests", "resource requests must not be negative"},
	{"negative memory limit", []edit{set("spec.parameterServers.resources.limits", obj{"memory": "-1Gi"})},
		"spec.parameterServers.resources.limits", "resource limits must not be negative"},
	{"request of an unqualified resource", []edit{set("spec.graphServers.resources.requests", obj{"gpu": "1"})},
		"spec.graphServers.resources.requests", "must name cpu, memory, ephemeral-storage, hugepages-<size> or a domain-qualified extended resource"},
	{"resource claims", []edit{set("spec.graphServers.resources.claims", []any{obj{"name": "gpu"}})},
		"spec.graphServers.resources.claims", "resource claims are not supported"},
	{"function resource claims", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{"resources": obj{"claims": []any{obj{"name": "gpu"}}}}}})},
		"spec.tensorBackend.knative.service.resources.claims", "resource claims are not supported"},
	{"lambda secretRef without a name", []edit{set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "us-east-1",
		"credentials": obj{"secretRef": obj{}}}})}, "spec.tensorBackend.lambda.credentials.secretRef.name", "secretRef.name must name a Secret"},
	{"dataset secretRef with an empty name", []edit{set("spec.dataset", obj{"s3": obj{"bucket": "graphs", "secretRef": obj{"name": ""}}})},
		"spec.dataset.s3.secretRef.name", "secretRef.name must name a Secret"},
	{"checkpoint secretRef not a Secret name", []edit{set("spec.checkpoint", obj{"s3": obj{"bucket": "ckpt", "secretRef": obj{"name": "AWS_Creds"}}}),
		set("spec.training.staleness", "sync")}, "spec.checkpoint.s3.secretRef.name", "secretRef.name must name a Secret"},
	{"node selector key not a label key", []edit{set("spec.graphServers.nodeSelector", obj{"pool type": "big"})},
		"spec.graphServers.nodeSelector", "node selector keys must be label keys"},
	{"node selector key with an empty name", []edit{set("spec.parameterServers.nodeSelector", obj{"example.com/": "x"})},
		"spec.parameterServers.nodeSelector", "node selector keys must be label keys"},
	{"too many node selector entries", []edit{set("spec.graphServers.nodeSelector", manyLabels(65))},
		"spec.graphServers.nodeSelector", "must have at most 64 items"},
	{"toleration operator", []edit{set("spec.graphServers.tolerations", []any{obj{"key": "k", "operator": "Maybe"}})},
		"spec.graphServers.tolerations", "a toleration's operator must be Exists, Equal, Lt or Gt"},
	{"toleration effect", []edit{set("spec.parameterServers.tolerations", []any{obj{"key": "k", "operator": "Exists", "effect": "NoRun"}})},
		"spec.parameterServers.tolerations", "a toleration's effect must be NoSchedule, PreferNoSchedule, NoExecute or empty"},
	{"toleration without a key that is not Exists", []edit{set("spec.graphServers.tolerations", []any{obj{"value": "gnn", "effect": "NoSchedule"}})},
		"spec.graphServers.tolerations", "a toleration without a key must have operator Exists"},
	{"toleration Exists with a value", []edit{set("spec.graphServers.tolerations", []any{obj{"key": "k", "operator": "Exists", "value": "v"}})},
		"spec.graphServers.tolerations", "a toleration with operator Exists must have no value"},
	{"tolerationSeconds without NoExecute", []edit{set("spec.graphServers.tolerations", []any{obj{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": int64(30)}})},
		"spec.graphServers.tolerations", "tolerationSeconds applies only to effect NoExecute"},
	{"dataset claim without a name", []edit{set("spec.dataset", obj{"pvc": obj{"claimName": ""}})}, "spec.dataset.pvc.claimName", "should be at least 1 chars long"},
	{"checkpoint claim without a name", []edit{set("spec.checkpoint", obj{"pvc": obj{"claimName": ""}}), set("spec.training.staleness", "sync")},
		"spec.checkpoint.pvc.claimName", "should be at least 1 chars long"},
	{"output claim without a name", []edit{set("spec.output", obj{"pvc": obj{"claimName": ""}})}, "spec.output.pvc.claimName", "should be at least 1 chars long"},
	{"model claim without a name", []edit{set("spec.output", obj{"s3": obj{"bucket": "out"}}), set("spec.inference", obj{"model": obj{"pvc": obj{"claimName": ""}}})},
		"spec.inference.model.pvc.claimName", "should be at least 1 chars long"},
	{"image with a space", []edit{set("spec.image", "registry.example.org/dorylus: v1")}, "spec.image", "should match"},
	{"function image with a space", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{"image": " dorylus"}}})},
		"spec.tensorBackend.knative.service.image", "should match"},
}

// manyLabels returns n distinct node-selector entries.
func manyLabels(n int) obj {
	out := obj{}
	for i := range n {
		out[fmt.Sprintf("example.com/l%d", i)] = "x"
	}
	return out
}

// validManifests are accepted at admission: the edge of every rule above on its
// accepting side.
var validManifests = []struct {
	name  string
	edits []edit
}{
	{"requests equal to limits in other units", []edit{set("spec.graphServers.resources", obj{
		"requests": obj{"cpu": "1", "memory": "1Gi", "ephemeral-storage": int64(1073741824)},
		"limits":   obj{"cpu": "1000m", "memory": "1024Mi", "ephemeral-storage": "1Gi"}})}},
	{"requests below limits, integers and strings", []edit{set("spec.parameterServers.resources", obj{
		"requests": obj{"cpu": "500m", "memory": int64(1000)}, "limits": obj{"cpu": int64(2), "memory": "1k"}})}},
	{"requests without limits and limits without requests", []edit{set("spec.graphServers.resources.requests", obj{"cpu": "0", "memory": "0"}),
		set("spec.parameterServers.resources.limits", obj{"cpu": "4"})}},
	{"extended and hugepages resources", []edit{set("spec.graphServers.resources", obj{
		"requests": obj{"example.com/fpga": int64(1), "hugepages-2Mi": "64Mi"}, "limits": obj{"example.com/fpga": int64(1), "hugepages-2Mi": "64Mi"}})}},
	{"function resources", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{"image": "registry.example.org:5000/dorylus@sha256:" + strings.Repeat("a", 64),
		"resources": obj{"requests": obj{"cpu": "250m"}, "limits": obj{"cpu": "1", "memory": "512Mi"}}}}})}},
	{"secret references", []edit{set("spec.dataset", obj{"s3": obj{"bucket": "graphs", "secretRef": obj{"name": "s3.creds-1"}}}),
		set("spec.checkpoint", obj{"s3": obj{"bucket": "ckpt", "secretRef": obj{"name": "ckpt"}}}), set("spec.training.staleness", "sync"),
		set("spec.tensorBackend", obj{"lambda": obj{"functionName": "f", "region": "us-east-1", "credentials": obj{"secretRef": obj{"name": "aws"}}}})}},
	{"remote placement on knative", []edit{set("spec.tensorBackend", obj{"knative": obj{"service": obj{}}, "placement": "Remote"})}},
	{"auto placement on the cpu backend", []edit{set("spec.tensorBackend", obj{"cpu": obj{}, "placement": "Auto"})}},
	{"node selectors", []edit{set("spec.graphServers.nodeSelector", obj{"kubernetes.io/os": "linux", "pool": "", "a.b-c.example.com/Node_Type.x": "big-1"}),
		set("spec.parameterServers.nodeSelector", manyLabels(64))}},
	{"tolerations", []edit{set("spec.graphServers.tolerations", []any{
		obj{"operator": "Exists"},
		obj{"key": "dedicated", "operator": "Equal", "value": "gnn", "effect": "NoSchedule"},
		obj{"key": "example.com/spot", "value": "true"},
		obj{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int64(30)},
		obj{"key": "k", "operator": "Exists", "effect": ""},
	})}},
	{"image with a registry port and a tag", []edit{set("spec.image", "registry.example.org:5000/dorylus:v1.2")}},
	{"knative url with its token Secret", []edit{set("spec.tensorBackend", obj{"knative": obj{"url": "http://fn", "tokenSecretRef": obj{"name": "fn-token"}}})}},
	{"update granularities of an asynchronous run", []edit{set("spec.training.staleness", int64(0)), set("spec.training.updateEvery", "interval")}},
	{"an update every 65536 intervals", []edit{set("spec.training.staleness", int64(2)), set("spec.training.updateEvery", "65536")}},
}

// TestValidManifestsAreAccepted sends each valid manifest to the API server.
func TestValidManifestsAreAccepted(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	for _, tc := range validManifests {
		t.Run(tc.name, func(t *testing.T) {
			u := manifest(ns, "job")
			for _, e := range tc.edits {
				e(u)
			}
			if err := k8sClient.Create(ctx, u, client.DryRunAll); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// TestInvalidManifestsAreRefused sends each invalid manifest to the API
// server and checks the refusal names the field and the reason.
func TestInvalidManifestsAreRefused(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	if err := k8sClient.Create(ctx, manifest(ns, "valid"), client.DryRunAll); err != nil {
		t.Fatalf("the base manifest is refused: %v", err)
	}
	for _, staleness := range []any{nil, "sync", int64(0), int64(1)} { // nil: the default, sync
		withCheckpoint := manifest(ns, "checkpointed")
		set("spec.checkpoint", map[string]any{"s3": map[string]any{"bucket": "ckpt"}})(withCheckpoint)
		if staleness != nil {
			set("spec.training.staleness", staleness)(withCheckpoint)
		}
		if err := k8sClient.Create(ctx, withCheckpoint, client.DryRunAll); err != nil {
			t.Fatalf("a checkpoint with staleness %v is refused: %v", staleness, err)
		}
	}
	refused := 0
	for _, tc := range invalidManifests {
		t.Run(tc.name, func(t *testing.T) {
			checkRefused(t, ns, tc.edits, tc.field, tc.message)
			refused++
		})
	}
	t.Logf("invalid manifests refused at admission: %d of %d", refused, len(invalidManifests))
}

// TestSpecFreezesOnceTrainingStarted checks the transition rules: what may
// not change after status.startTime is set, and what may.
func TestSpecFreezesOnceTrainingStarted(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "frozen"))
	eventually(t, "training started", func() error {
		if getJob(t, ns, "frozen").Status.StartTime == nil {
			return errNotYet
		}
		return nil
	})
	refusals := []struct {
		name    string
		mutate  func(*dorylusv1alpha1.GNNTrainingJob)
		message string
	}{
		{"dataset", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Dataset.Builtin.Name = "citeseer" }, "spec.dataset is immutable once training has started"},
		{"model", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Model.Layers = 3 }, "spec.model is immutable once training has started"},
		{"training", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.Epochs = 10 }, "spec.training is immutable once training has started"},
		{"backend", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{URL: "http://fn"}}
		}, "spec.tensorBackend is immutable once training has started"},
		{"checkpoint", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "c"}}
		}, "spec.checkpoint is immutable once training has started"},
		{"partitions", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.GraphServers.Replicas = 4 }, "spec.graphServers.replicas (the partition count) is immutable"},
		{"shards", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.ParameterServers.Replicas = 2 }, "spec.parameterServers.replicas (the shard count) is immutable"},
		{"managedBy", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.ManagedBy = ptr.To("example.com/other") }, "spec.managedBy is immutable"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			err := updateJob(t, ns, "frozen", tc.mutate)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("update of %s: got %v, want an Invalid error with %q", tc.name, err, tc.message)
			}
		})
	}
	if err := updateJob(t, ns, "frozen", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.Suspend = ptr.To(true)
		j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](60)
		j.Spec.GraphServers.NodeSelector = map[string]string{"pool": "big"}
	}); err != nil {
		t.Errorf("run policy and scheduling changes after the start were refused: %v", err)
	}
	waitCondition(t, ns, "frozen", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, "")
}

var errNotYet = apierrors.NewServiceUnavailable("not yet")
