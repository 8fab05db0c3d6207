//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// functionCPU is the CPU a servePod pod requests: twice a server's, since
// it runs the tensor tasks of the job's servers.
const functionCPU = "200m"

// emulatorPort is where the sample lambda_cora_emulator.yaml expects the
// Lambda runtime interface emulator (http://lambda-emulator:9000).
const emulatorPort = 9000

// emulatorImage is the image `make emulator-image` writes and `make e2e`
// imports into the local cluster: aws-lambda-rie and dorylus, both static.
const emulatorImage = "docker.io/dorylus-gnn/lambda-emulator:local"

// nodeAddress is the node's address on the pod network (the pods' hostIP),
// read from the operator's pod.
func nodeAddress(t *testing.T, c client.Client) string {
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace(operatorNS)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.HostIP != "" {
			return p.Status.HostIP
		}
	}
	t.Fatalf("no pod in %s reports a hostIP", operatorNS)
	return ""
}

// secretMount mounts keys of a Secret (all of them if none) read-only at dir.
type secretMount struct {
	secret, dir string
	keys        []string
}

// servePod runs command from image as a one-replica Deployment named name,
// restricted like the jobs' pods, behind a Service of the same name on port,
// and waits until it is available; both are deleted at the end of the test.
// The server runs a job's tensor tasks: it requests functionCPU, not to be
// BestEffort (requestCPU).
func servePod(t *testing.T, c client.Client, name, image string, port int32, secrets []secretMount, command ...string) {
	t.Helper()
	createServePod(t, c, name, image, port, nil, secrets, command...)
	run(t, kubectl, "wait", "-n", ns, "deployment/"+name, "--for=condition=Available", "--timeout=120s")
}

// createServePod creates servePod's Deployment and Service without waiting,
// its pods labelled podLabels too, with secrets mounted.
func createServePod(t *testing.T, c client.Client, name, image string, port int32, podLabels map[string]string, secrets []secretMount, command ...string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/name": name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: withLabels(labels, podLabels)},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "server", Image: image, ImagePullPolicy: corev1.PullNever, Command: command,
						Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: port}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}}, PeriodSeconds: 1},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
						Resources:    corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(functionCPU)}},
					}},
					Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
	for i, m := range secrets {
		p := &dep.Spec.Template.Spec
		vol := fmt.Sprintf("secret-%d", i)
		src := &corev1.SecretVolumeSource{SecretName: m.secret}
		for _, k := range m.keys {
			src.Items = append(src.Items, corev1.KeyToPath{Key: k, Path: k})
		}
		p.Volumes = append(p.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{Secret: src}})
		p.Containers[0].VolumeMounts = append(p.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: m.dir, ReadOnly: true})
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromInt32(port)}}}}
	for _, o := range []client.Object{dep, svc} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() {
			_ = c.Delete(context.Background(), o, client.PropagationPolicy(metav1.DeletePropagationForeground))
		})
	}
}

// withLabels returns a copy of a with b's labels added.
func withLabels(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

// startEmulator runs aws-lambda-rie with `dorylus function` in a pod behind
// the Service lambda-emulator, and creates the credentials Secret the sample
// names (the emulator checks no signature).
func startEmulator(t *testing.T, c client.Client) {
	credentialsSecret(t, c, "lambda-emulator-credentials", "e2e", "e2e-secret")
	servePod(t, c, "lambda-emulator", emulatorImage, emulatorPort, nil, "/aws-lambda-rie",
		"--runtime-interface-emulator-address", fmt.Sprintf("0.0.0.0:%d", emulatorPort),
		"--runtime-api-address", "127.0.0.1:9001", "/dorylus", "function")
}

// TestCoraLambdaEmulator applies the lambda sample pointed at the Lambda
// runtime emulator: the graph server invokes `dorylus function` in
// aws-lambda-rie for every tensor task, and the job must succeed with the
// single-process run's accuracy.
func TestCoraLambdaEmulator(t *testing.T) {
	t.Parallel()
	const name = "cora-gcn-lambda-emulator"
	c := setup(t, name)
	startEmulator(t, c)
	runSample(t, c, "lambda_cora_emulator.yaml", name, nil, 600*time.Second, func(*dorylusv1alpha1.GNNTrainingJob) float64 { return singleProcessAccuracy(t) })
	logs := run(t, kubectl, "logs", "-n", ns, "deployment/lambda-emulator", "--tail=-1")
	invokes := strings.Count(logs, "START RequestId: ")
	job, _ := sampleJob(t, "lambda_cora_emulator.yaml", name, nil)
	t.Logf("the emulator served %d invokes", invokes)
	if invokes < int(job.Spec.Training.Epochs) {
		t.Errorf("the emulator served %d invokes for %d epochs: the tensor tasks did not run on it", invokes, job.Spec.Training.Epochs)
	}
}
