package controllers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/cost"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

func TestResolveRunConfig(t *testing.T) {
	base := func() *jobconfig.RunConfig {
		return &jobconfig.RunConfig{
			Version:  1,
			Job:      jobconfig.JobRef{Name: "cora", Namespace: "ml", UID: "uid-1"},
			Dataset:  jobconfig.Dataset{Source: "builtin", Name: "cora"},
			Model:    jobconfig.Model{Architecture: "GCN", Layers: 2, Hidden: 16, Dropout: 0.5},
			Training: jobconfig.Training{Epochs: 200, LearningRate: 0.01, WeightDecay: 0.0005, Seed: 1},
			GraphServers: jobconfig.GraphServers{Replicas: 1, Port: 5000, DeadAfter: jobconfig.Duration(15 * time.Second),
				Peers: []string{"cora-gs-0.cora-gs.ml.svc:5000"}},
			ParameterServers: jobconfig.ParameterServers{Replicas: 1, Port: 5100, Service: "cora-ps.ml.svc:5100",
				Shards: []string{"cora-ps-0.cora-ps.ml.svc:5100"}},
			Backend:  jobconfig.Backend{Kind: "cpu", CPU: &jobconfig.CPU{}},
			Cost:     &jobconfig.Cost{GraphServerInstance: cost.DefaultGraphServerInstance, ParameterServerInstance: cost.DefaultParameterServerInstance},
			Security: jobconfig.Security{TLSDir: "/var/run/secrets/dorylus/job"},
		}
	}
	secret := &dorylusv1alpha1.SecretReference{Name: "aws"}
	tests := []struct {
		name string
		job  func(*dorylusv1alpha1.GNNTrainingJob)
		want func(*jobconfig.RunConfig)
	}{
		{"defaults", nil, nil},
		{"GAT gets 8 heads by default", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Model.Architecture = dorylusv1alpha1.ArchitectureGAT
		}, func(c *jobconfig.RunConfig) { c.Model.Architecture, c.Model.Heads = "GAT", 8 }},
		{"GAT heads from the spec", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Model.Architecture, j.Spec.Model.Heads = dorylusv1alpha1.ArchitectureGAT, ptr.To[int32](4)
		}, func(c *jobconfig.RunConfig) { c.Model.Architecture, c.Model.Heads = "GAT", 4 }},
		{"sync staleness", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Training.Staleness = intstr.FromString("sync")
		}, func(c *jobconfig.RunConfig) { c.Training.Staleness = jobconfig.Sync }},
		{"bound, target, intervals, decimals with exponents", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Training.Staleness = intstr.FromInt32(2)
			j.Spec.Training.TargetAccuracy = ptr.To[dorylusv1alpha1.Decimal]("0.81")
			j.Spec.Training.Intervals = ptr.To[int32](32)
			j.Spec.Training.WeightDecay = "5e-4"
		}, func(c *jobconfig.RunConfig) {
			c.Training.Staleness, c.Training.TargetAccuracy, c.Training.Intervals, c.Training.WeightDecay = jobconfig.Bounded(2), 0.81, 32, 5e-4
		}},
		{"an update every 4 intervals", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Training.Staleness, j.Spec.Training.UpdateEvery = intstr.FromInt32(1), "4"
		}, func(c *jobconfig.RunConfig) {
			c.Training.Staleness, c.Training.UpdateEvery = jobconfig.Bounded(1), jobconfig.UpdateIntervals(4)
		}},
		{"s3 dataset with a secret", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Dataset = dorylusv1alpha1.DatasetSource{Format: dorylusv1alpha1.DatasetFormatText, S3: &dorylusv1alpha1.S3Location{
				Bucket: "graphs", Prefix: "cora/", Region: "us-east-1", Endpoint: "http://127.0.0.1:9000", SecretRef: secret}}
		}, func(c *jobconfig.RunConfig) {
			c.Dataset = jobconfig.Dataset{Source: "s3", Format: "text", S3: &jobconfig.S3{Bucket: "graphs", Prefix: "cora/",
				Region: "us-east-1", Endpoint: "http://127.0.0.1:9000", CredentialsDir: "/var/run/secrets/dorylus/dataset"}}
		}},
		{"pvc dataset", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Dataset = dorylusv1alpha1.DatasetSource{Format: dorylusv1alpha1.DatasetFormatPrepared,
				PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "graphs", Path: "rmat/1m"}}
		}, func(c *jobconfig.RunConfig) {
			c.Dataset = jobconfig.Dataset{Source: "pvc", Format: "prepared", Path: "/data/dataset/rmat/1m"}
		}},
		{"http dataset", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Dataset = dorylusv1alpha1.DatasetSource{Format: dorylusv1alpha1.DatasetFormatPrepared,
				HTTP: &dorylusv1alpha1.HTTPLocation{URL: "https://example.org/cora.tar.gz", SHA256: "ab"}}
		}, func(c *jobconfig.RunConfig) {
			c.Dataset = jobconfig.Dataset{Source: "http", Format: "prepared", URL: "https://example.org/cora.tar.gz", SHA256: "ab"}
		}},
		{"three graph servers, two shards", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.GraphServers.Replicas, j.Spec.ParameterServers.Replicas = 3, 2
		}, func(c *jobconfig.RunConfig) {
			c.GraphServers.Replicas = 3
			c.GraphServers.Peers = []string{"cora-gs-0.cora-gs.ml.svc:5000", "cora-gs-1.cora-gs.ml.svc:5000", "cora-gs-2.cora-gs.ml.svc:5000"}
			c.ParameterServers.Replicas = 2
			c.ParameterServers.Shards = []string{"cora-ps-0.cora-ps.ml.svc:5100", "cora-ps-1.cora-ps.ml.svc:5100"}
		}},
		{"cpu workers", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend.CPU.Workers = ptr.To[int32](6)
		}, func(c *jobconfig.RunConfig) { c.Backend.CPU.Workers = 6 }},
		{"lambda with a secret", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Lambda: &dorylusv1alpha1.LambdaBackend{
				FunctionName: "dorylus-fn", Region: "eu-west-1", MemoryMB: 3008, MaxConcurrency: 100,
				DataPath: dorylusv1alpha1.DataPathInline, Endpoint: "http://127.0.0.1:9001",
				Credentials: dorylusv1alpha1.AWSCredentials{SecretRef: secret}}}
		}, func(c *jobconfig.RunConfig) {
			c.Backend = jobconfig.Backend{Kind: "lambda", Lambda: &jobconfig.Lambda{FunctionName: "dorylus-fn", Region: "eu-west-1",
				MemoryMB: 3008, MaxConcurrency: 100, DataPath: "inline", Endpoint: "http://127.0.0.1:9001",
				CredentialsDir: "/var/run/secrets/dorylus/lambda"}}
		}},
		{"lambda with IRSA has no credentials folder", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Lambda: &dorylusv1alpha1.LambdaBackend{
				FunctionName: "f", Region: "us-west-2", MemoryMB: 128, MaxConcurrency: 1, DataPath: dorylusv1alpha1.DataPathPull,
				Credentials: dorylusv1alpha1.AWSCredentials{RoleARN: "arn:aws:iam::123456789012:role/dorylus"}}}
		}, func(c *jobconfig.RunConfig) {
			c.Backend = jobconfig.Backend{Kind: "lambda", Lambda: &jobconfig.Lambda{FunctionName: "f", Region: "us-west-2",
				MemoryMB: 128, MaxConcurrency: 1, DataPath: "pull"}}
		}},
		{"knative by url", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
				URL: "http://fn.default.svc.cluster.local", MaxConcurrency: 50, TokenSecretRef: &corev1.LocalObjectReference{Name: "fn-token"}}}
		}, func(c *jobconfig.RunConfig) {
			c.Backend = jobconfig.Backend{Kind: "knative", Knative: &jobconfig.Knative{URL: "http://fn.default.svc.cluster.local", MaxConcurrency: 50,
				TokenFile: "/var/run/secrets/dorylus/function-token/token"}}
		}},
		{"managed knative", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
				Service: &dorylusv1alpha1.KnativeServiceTemplate{MaxScale: 10}, MaxConcurrency: 100}}
		}, func(c *jobconfig.RunConfig) {
			c.Backend = jobconfig.Backend{Kind: "knative", Knative: &jobconfig.Knative{URL: "http://cora-fn.ml.svc.cluster.local",
				MaxConcurrency: 100, Managed: true, TokenFile: "/var/run/secrets/dorylus/job/token"}}
		}},
		{"pvc checkpoints", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 5, PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "ckpt", Path: "cora"}}
		}, func(c *jobconfig.RunConfig) {
			c.Checkpoint = &jobconfig.Checkpoint{IntervalEpochs: 5, RunID: "uid-1", Path: "/data/checkpoint/cora/run-uid-1"}
		}},
		{"s3 checkpoints with a secret", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10, S3: &dorylusv1alpha1.S3Location{Bucket: "ckpt", SecretRef: secret}}
		}, func(c *jobconfig.RunConfig) {
			c.Checkpoint = &jobconfig.Checkpoint{IntervalEpochs: 10, RunID: "uid-1", S3: &jobconfig.S3{Bucket: "ckpt", Prefix: "run-uid-1", CredentialsDir: "/var/run/secrets/dorylus/checkpoint"}}
		}},
		{"s3 output with a secret, overwriting", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Output = &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models", Prefix: "cora/gcn", SecretRef: secret}},
				Overwrite: true}
		}, func(c *jobconfig.RunConfig) {
			c.Output = &jobconfig.Location{S3: &jobconfig.S3{Bucket: "models", Prefix: "cora/gcn", CredentialsDir: "/var/run/secrets/dorylus/output"}}
			c.OverwriteOutput = true
		}},
		{"inference: pvc model, pvc output, no parameter servers", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Output = &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "out", Path: "pred"}}}
			j.Spec.Inference = &dorylusv1alpha1.InferenceSpec{Model: dorylusv1alpha1.OutputLocation{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "models", Path: "cora"}}}
		}, func(c *jobconfig.RunConfig) {
			c.Output = &jobconfig.Location{Path: "/data/output/pred"}
			c.Inference = &jobconfig.Inference{Model: jobconfig.Location{Path: "/data/model/cora"}}
			c.ParameterServers = jobconfig.ParameterServers{}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			if tc.job != nil {
				tc.job(job)
			}
			want := base()
			if tc.want != nil {
				tc.want(want)
			}
			got, err := resolveRunConfig(job, &Pricing{})
			if err != nil {
				t.Fatalf("resolveRunConfig: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("run config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveRunConfigRefusesBadDecimals(t *testing.T) {
	job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Model.Dropout = "half" })
	if _, err := resolveRunConfig(job, &Pricing{}); err == nil {
		t.Fatal("resolveRunConfig accepted dropout \"half\"")
	}
}

func TestBuildConfigMap(t *testing.T) {
	got := toTyped[corev1.ConfigMap](t, buildConfigMap(testJob(), []byte(`{"version":1}`)))
	want := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cora-config", Namespace: "ml", Labels: wantLabels("runtime"), OwnerReferences: wantOwner()},
		Data:       map[string]string{"run.json": `{"version":1}`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}
	if a, b := configHash([]byte("a")), configHash([]byte("b")); a == b || len(a) != 16 || a != configHash([]byte("a")) {
		t.Errorf("configHash: %q, %q: want 16 hex digits, stable, different per input", a, b)
	}
}

// wantGraphStatefulSet is the StatefulSet of testJob().
func wantGraphStatefulSet(replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "cora-gs", Namespace: "ml", Labels: wantLabels("graph-server"), OwnerReferences: wantOwner()},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         "cora-gs",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"dorylus.dev/job-name": "cora", "dorylus.dev/role": "graph-server"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: wantPodLabels("graph-server"), Annotations: map[string]string{"dorylus.dev/config-hash": "h", "dorylus.dev/credentials-period": "p"}},
				Spec: corev1.PodSpec{
					ServiceAccountName:           "cora-runtime",
					AutomountServiceAccountToken: ptr.To(true),
					EnableServiceLinks:           ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name:    "graph-server",
						Image:   "img:1",
						Command: []string{"/dorylus"},
						Args:    []string{"graph-server", "--config", "/etc/dorylus/run.json", "--partition", "$(DORYLUS_PARTITION)", "--startup-timeout", "0", "--metrics-address", ":9090", "--health-address", ":5001"},
						Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 5000, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
							{Name: "health", ContainerPort: 5001, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{
							{Name: "DORYLUS_JOB_NAME", Value: "cora"},
							{Name: "DORYLUS_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
							{Name: "DORYLUS_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
							{Name: "DORYLUS_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
							{Name: "DORYLUS_PARTITION", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['apps.kubernetes.io/pod-index']"}}},
							{Name: "DORYLUS_ATTEMPT", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['dorylus.dev/run']"}}},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 5001}},
							PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 3,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/dorylus", ReadOnly: true},
							{Name: "tmp", MountPath: "/tmp"},
							{Name: "credentials", MountPath: "/var/run/secrets/dorylus/job", ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "cora-config"},
							Items:                []corev1.KeyToPath{{Key: "run.json", Path: "run.json"}},
						}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						wantCredentialsVolume("ca.crt", "tls.crt", "tls.key"),
					},
				},
			},
		},
	}
}

// wantCredentialsSecret is the name of testJob's credentials Secret of period "p": the first
// 10 hex digits of the SHA-256 of "uid-1\np".
const wantCredentialsSecret = "cora-credentials-8f7e5c43b4"

// wantCredentialsVolume is the volume of the job's credentials Secret of period "p" with the
// given keys.
func wantCredentialsVolume(keys ...string) corev1.Volume {
	var items []corev1.KeyToPath
	for _, k := range keys {
		items = append(items, corev1.KeyToPath{Key: k, Path: k})
	}
	return corev1.Volume{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: wantCredentialsSecret, Items: items}}}
}

func TestBuildGraphStatefulSet(t *testing.T) {
	secret := &dorylusv1alpha1.SecretReference{Name: "aws"}
	tests := []struct {
		name     string
		job      func(*dorylusv1alpha1.GNNTrainingJob)
		replicas int32
		want     func(*appsv1.StatefulSet)
	}{
		{name: "defaults", replicas: 1},
		{name: "stopped job has zero replicas", replicas: 0},
		{name: "image override, scheduling and resources", replicas: 4, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Image = "mine:2"
			j.Spec.GraphServers.Replicas = 4
			j.Spec.GraphServers.NodeSelector = map[string]string{"pool": "graph"}
			j.Spec.GraphServers.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gnn", Effect: corev1.TaintEffectNoSchedule}}
			j.Spec.GraphServers.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
			}
		}, want: func(s *appsv1.StatefulSet) {
			p := &s.Spec.Template.Spec
			p.Containers[0].Image = "mine:2"
			p.NodeSelector = map[string]string{"pool": "graph"}
			p.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gnn", Effect: corev1.TaintEffectNoSchedule}}
			p.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")},
			}
		}},
		{name: "output mounted read-write, inference model read-only, their secrets", replicas: 1, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Output = &dorylusv1alpha1.OutputSpec{OutputLocation: dorylusv1alpha1.OutputLocation{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "out"}}}
			j.Spec.Inference = &dorylusv1alpha1.InferenceSpec{Model: dorylusv1alpha1.OutputLocation{S3: &dorylusv1alpha1.S3Location{Bucket: "models", SecretRef: secret}}}
		}, want: func(s *appsv1.StatefulSet) {
			p := &s.Spec.Template.Spec
			p.Volumes = append(p.Volumes,
				corev1.Volume{Name: "output", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "out"}}},
				corev1.Volume{Name: "secret-model", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "aws"}}})
			p.Containers[0].VolumeMounts = append(p.Containers[0].VolumeMounts,
				corev1.VolumeMount{Name: "output", MountPath: "/data/output"},
				corev1.VolumeMount{Name: "secret-model", MountPath: "/var/run/secrets/dorylus/model", ReadOnly: true})
		}},
		{name: "managed knative: the function's token too", replicas: 1, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{Service: &dorylusv1alpha1.KnativeServiceTemplate{}}}
		}, want: func(s *appsv1.StatefulSet) {
			s.Spec.Template.Spec.Volumes[2] = wantCredentialsVolume("ca.crt", "tls.crt", "tls.key", "token")
		}},
		{name: "knative url: the token Secret the spec names", replicas: 1, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{URL: "http://fn",
				TokenSecretRef: &corev1.LocalObjectReference{Name: "fn-token"}}}
		}, want: func(s *appsv1.StatefulSet) {
			p := &s.Spec.Template.Spec
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "secret-function-token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "fn-token"}}})
			p.Containers[0].VolumeMounts = append(p.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "secret-function-token", MountPath: "/var/run/secrets/dorylus/function-token", ReadOnly: true})
		}},
		{name: "pvc dataset is mounted read-only", replicas: 1, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Dataset = dorylusv1alpha1.DatasetSource{PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "graphs"}}
		}, want: func(s *appsv1.StatefulSet) {
			p := &s.Spec.Template.Spec
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "dataset", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "graphs", ReadOnly: true}}})
			p.Containers[0].VolumeMounts = append(p.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "dataset", MountPath: "/data/dataset", ReadOnly: true})
		}},
		{name: "s3 and lambda secrets are mounted, never in env; lambda pull: the function issuer", replicas: 1, job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Dataset = dorylusv1alpha1.DatasetSource{S3: &dorylusv1alpha1.S3Location{Bucket: "graphs", SecretRef: &dorylusv1alpha1.SecretReference{Name: "s3"}}}
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Lambda: &dorylusv1alpha1.LambdaBackend{
				FunctionName: "f", Region: "us-east-1", MemoryMB: 128, MaxConcurrency: 1, DataPath: dorylusv1alpha1.DataPathPull,
				Credentials: dorylusv1alpha1.AWSCredentials{SecretRef: secret}}}
		}, want: func(s *appsv1.StatefulSet) {
			p := &s.Spec.Template.Spec
			p.Volumes[2] = wantCredentialsVolume("ca.crt", "tls.crt", "tls.key", "function-ca.crt", "function-ca.key")
			p.Volumes = append(p.Volumes,
				corev1.Volume{Name: "secret-dataset", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s3"}}},
				corev1.Volume{Name: "secret-lambda", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "aws"}}})
			p.Containers[0].VolumeMounts = append(p.Containers[0].VolumeMounts,
				corev1.VolumeMount{Name: "secret-dataset", MountPath: "/var/run/secrets/dorylus/dataset", ReadOnly: true},
				corev1.VolumeMount{Name: "secret-lambda", MountPath: "/var/run/secrets/dorylus/lambda", ReadOnly: true})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			if tc.job != nil {
				tc.job(job)
			}
			want := wantGraphStatefulSet(tc.replicas)
			if tc.want != nil {
				tc.want(want)
			}
			got := toTyped[appsv1.StatefulSet](t, buildGraphStatefulSet(job, runtimeImage(job, "img:1"), "h", "p", tc.replicas))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("StatefulSet (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildParamDeployment(t *testing.T) {
	shardLabels := wantLabels("param-server")
	shardLabels["dorylus.dev/shard"] = "1"
	podLabels := wantPodLabels("param-server")
	podLabels["dorylus.dev/shard"] = "1"
	want := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "cora-ps-1", Namespace: "ml", Labels: shardLabels, OwnerReferences: wantOwner()},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{
				"dorylus.dev/job-name": "cora", "dorylus.dev/role": "param-server", "dorylus.dev/shard": "1"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: map[string]string{"dorylus.dev/config-hash": "h", "dorylus.dev/credentials-period": "p"}},
				Spec: corev1.PodSpec{
					Hostname:                     "cora-ps-1",
					Subdomain:                    "cora-ps",
					ServiceAccountName:           "cora-runtime",
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					// cora's GCN of 16 hidden: the drain, the exit, no time to speak of for its
					// checkpoint; Kubernetes' default 30 s at least
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name:    "param-server",
						Image:   "img:1",
						Command: []string{"/dorylus"},
						Args: []string{"param-server", "--config", "/etc/dorylus/run.json", "--shard", "1", "--metrics-address", ":9090", "--health-address", ":5001",
							"--drain-timeout", "20s"},
						Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 5100, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
							{Name: "health", ContainerPort: 5001, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{
							{Name: "DORYLUS_JOB_NAME", Value: "cora"},
							{Name: "DORYLUS_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}},
							{Name: "DORYLUS_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
							{Name: "DORYLUS_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 5001}},
							PeriodSeconds: 5, TimeoutSeconds: 5, FailureThreshold: 3,
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/dorylus", ReadOnly: true},
							{Name: "tmp", MountPath: "/tmp"},
							{Name: "credentials", MountPath: "/var/run/secrets/dorylus/job", ReadOnly: true},
							{Name: "checkpoint", MountPath: "/data/checkpoint"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "cora-config"},
							Items:                []corev1.KeyToPath{{Key: "run.json", Path: "run.json"}},
						}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
						wantCredentialsVolume("ca.crt", "tls.crt", "tls.key"),
						{Name: "checkpoint", VolumeSource: corev1.VolumeSource{
							PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ckpt"}}},
					},
				},
			},
		},
	}
	job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.ParameterServers.Replicas = 2
		j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10, PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "ckpt"}}
	})
	got := toTyped[appsv1.Deployment](t, buildParamDeployment(job, "img:1", "h", "p", 1, 1))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Deployment (-want +got):\n%s", diff)
	}
}

func TestBuildServices(t *testing.T) {
	svc := func(name, role string, port int32) *corev1.Service {
		return &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Labels: wantLabels(role), OwnerReferences: wantOwner()},
			Spec: corev1.ServiceSpec{
				ClusterIP:                "None",
				PublishNotReadyAddresses: true,
				Selector:                 map[string]string{"dorylus.dev/job-name": "cora", "dorylus.dev/role": role},
				Ports: []corev1.ServicePort{{Name: "grpc", Protocol: corev1.ProtocolTCP, Port: port,
					TargetPort: intstr.FromString("grpc")}},
			},
		}
	}
	if diff := cmp.Diff(svc("cora-gs", "graph-server", 5000), toTyped[corev1.Service](t, buildGraphService(testJob()))); diff != "" {
		t.Errorf("graph Service (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(svc("cora-ps", "param-server", 5100), toTyped[corev1.Service](t, buildParamService(testJob()))); diff != "" {
		t.Errorf("parameter Service (-want +got):\n%s", diff)
	}
}

func TestBuildRBAC(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "cora-runtime", Namespace: "ml", Labels: wantLabels("runtime"), OwnerReferences: wantOwner()}
	tests := []struct {
		name string
		job  func(*dorylusv1alpha1.GNNTrainingJob)
		want map[string]string
	}{
		{name: "cpu: no annotation"},
		{name: "lambda by role: IRSA annotation", job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Lambda: &dorylusv1alpha1.LambdaBackend{
				Credentials: dorylusv1alpha1.AWSCredentials{RoleARN: "arn:aws:iam::123456789012:role/dorylus"}}}
		}, want: map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/dorylus"}},
		{name: "lambda by secret: no annotation", job: func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Lambda: &dorylusv1alpha1.LambdaBackend{
				Credentials: dorylusv1alpha1.AWSCredentials{SecretRef: &dorylusv1alpha1.SecretReference{Name: "aws"}}}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			if tc.job != nil {
				tc.job(job)
			}
			wantSA := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: *meta.DeepCopy()}
			wantSA.Annotations = tc.want
			if diff := cmp.Diff(wantSA, toTyped[corev1.ServiceAccount](t, buildServiceAccount(job))); diff != "" {
				t.Errorf("ServiceAccount (-want +got):\n%s", diff)
			}
		})
	}
	wantRole := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"dorylus.dev"}, Resources: []string{"gnntrainingjobs/status"},
			ResourceNames: []string{"cora"}, Verbs: []string{"get", "patch"},
		}},
	}
	if diff := cmp.Diff(wantRole, toTyped[rbacv1.Role](t, buildRole(testJob()))); diff != "" {
		t.Errorf("Role (-want +got):\n%s", diff)
	}
	wantBinding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "cora-runtime"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "cora-runtime", Namespace: "ml"}},
	}
	if diff := cmp.Diff(wantBinding, toTyped[rbacv1.RoleBinding](t, buildRoleBinding(testJob()))); diff != "" {
		t.Errorf("RoleBinding (-want +got):\n%s", diff)
	}
}

func TestBuildKnativeService(t *testing.T) {
	job := testJob(func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.TensorBackend = &dorylusv1alpha1.TensorBackendSpec{Knative: &dorylusv1alpha1.KnativeBackend{
			MaxConcurrency: 100,
			Service: &dorylusv1alpha1.KnativeServiceTemplate{ContainerConcurrency: ptr.To[int32](3), MinScale: 2, MaxScale: 50,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}},
		}}
	})
	labels := map[string]any{}
	for k, v := range wantLabels("function") {
		labels[k] = v
	}
	want := func(minScale string) map[string]any {
		return map[string]any{
			"apiVersion": "serving.knative.dev/v1",
			"kind":       "Service",
			"metadata": map[string]any{
				"name": "cora-fn", "namespace": "ml", "labels": labels,
				"ownerReferences": []any{map[string]any{"apiVersion": "dorylus.dev/v1alpha1", "kind": "GNNTrainingJob",
					"name": "cora", "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}},
			},
			"spec": map[string]any{"template": map[string]any{
				"metadata": map[string]any{"labels": labels, "annotations": map[string]any{
					"autoscaling.knative.dev/min-scale": minScale, "autoscaling.knative.dev/max-scale": "50",
					"dorylus.dev/credentials-period": "p"}},
				"spec": map[string]any{
					"automountServiceAccountToken": false,
					"containerConcurrency":         int64(3),
					"volumes": []any{map[string]any{"name": "credentials", "secret": map[string]any{"secretName": wantCredentialsSecret,
						"items": []any{map[string]any{"key": "token", "path": "token"}}}}},
					"containers": []any{map[string]any{
						"name": "function", "image": "img:1",
						"command":      []any{"/dorylus"},
						"args":         []any{"function", "--listen", ":8080", "--token-file", "/var/run/secrets/dorylus/job/token"},
						"volumeMounts": []any{map[string]any{"name": "credentials", "mountPath": "/var/run/secrets/dorylus/job", "readOnly": true}},
						"ports":        []any{map[string]any{"name": "http1", "containerPort": int64(8080), "protocol": "TCP"}},
						"resources": map[string]any{"requests": map[string]any{"cpu": "1"},
							"limits": map[string]any{"memory": "2Gi"}},
						"securityContext": map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
							"runAsNonRoot": true, "capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
					}},
				},
			}},
		}
	}
	if diff := cmp.Diff(want("2"), buildKnativeService(job, "img:1", "p", true).Object); diff != "" {
		t.Errorf("running Knative Service (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want("0"), buildKnativeService(job, "img:1", "p", false).Object); diff != "" {
		t.Errorf("stopped Knative Service (-want +got):\n%s", diff)
	}
}
