//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/controllers"
	"github.com/dorylus-gnn/dorylus/pkg/pki"
)

// knativeIntervals is how many intervals TestCiteseerGATKnative's graph
// server cuts its partition in: as many tensor calls of each kind an epoch.
const knativeIntervals = 4

// functionPort is where `dorylus function` serves HTTP in its pod.
const functionPort = 8080

// secretDir is where TestCiteseerGATKnative's function mounts its Secrets.
const secretDir = "/var/run/secrets/e2e"

// runtimeImage is the image `make image` writes: the chart's default.
func runtimeImage(t *testing.T) string {
	raw, err := os.ReadFile(filepath.Join(root, "charts/dorylus-operator/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	return "docker.io/dorylus-gnn/dorylus:" + chart.AppVersion
}

// hostVolume makes a PersistentVolume on host folder dir (under the cluster's
// state folder, owned by the pods' user 65532), filled by a copy of src if
// not empty, and a PersistentVolumeClaim claim bound to it; all are removed
// at the end of the test.
func hostVolume(t *testing.T, c client.Client, claim, src string) string {
	t.Helper()
	dir := filepath.Join(clusterDir, "volumes", ns, claim)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if src != "" {
		if out, err := exec.Command("cp", "-a", src+"/.", dir).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v: %s", src, err, out)
		}
	}
	if out, err := exec.Command("chown", "-R", "65532:65532", dir).CombinedOutput(); err != nil {
		t.Fatalf("chown %s: %v: %s", dir, err, out)
	}
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      size,
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              "",
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: ptr.To(corev1.HostPathDirectory)},
			},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: size},
		},
	}
	ctx := context.Background()
	for _, o := range []client.Object{pv, pvc} {
		_ = c.Delete(ctx, o) // left by an earlier run
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), pvc)
		_ = c.Delete(context.Background(), pv)
	})
	return dir
}

// TestCiteseerGATKnative runs the Knative sample where no Knative is
// installed: `dorylus function` serves HTTPS from the runtime image as a
// Deployment and Service, named by URL, with the function certificate of the
// job's credentials Secret, requiring the token of a Secret the test makes
// and the job names (tokenSecretRef); the dataset (text CiteSeer) and the
// checkpoints are on PersistentVolumes. GAT on CiteSeer through an HTTP
// function takes seconds an epoch on this machine, so the job trains 20 of
// the sample's 300 epochs, cut in knativeIntervals intervals instead of one
// per call of the sample's maxConcurrency (64): on the inline data path every
// call carries its layer's weights (about 1 MB in the first layer), and the
// one function pod of the test, not a Knative Service of up to 50, spent
// most of an epoch decoding 64 copies of them. Its accuracy must match
// `dorylus train` with one graph server and the same intervals, synchronous
// as the sample, and the checkpoints must be on the volume.
func TestCiteseerGATKnative(t *testing.T) {
	t.Parallel()
	const name, epochs = "citeseer-gat-knative", 20
	c := setup(t, name)
	hostVolume(t, c, "graph-datasets", filepath.Join(root, "datasets"))
	checkpoints := hostVolume(t, c, "dorylus-checkpoints", "")
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "dorylus-function-token", Namespace: ns},
		StringData: map[string]string{"token": rand.Text()}}
	if err := c.Create(context.Background(), token); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), token) })
	// The function serves HTTPS with the function certificate of the job's CA,
	// from the job's credentials Secret, as a Deployment of the job's user
	// would: its pod starts once the operator has issued them, and the graph
	// servers wait for it (backends.ReadyTimeout) and verify it. Its label
	// puts it under the job's NetworkPolicy <job>-function.
	createServePod(t, c, "dorylus-function", runtimeImage(t), functionPort, map[string]string{controllers.LabelFunctionOf: name}, []secretMount{
		{secret: token.Name, dir: secretDir + "/token"},
		{secret: name + "-credentials", dir: secretDir + "/job", keys: []string{pki.CAFile, pki.FunctionCertFile, pki.FunctionKeyFile}},
	}, "/dorylus", "function", "--listen", ":8080", "--token-file", secretDir+"/token/token", "--credentials-dir", secretDir+"/job")
	runSample(t, c, "knative_citeseer.yaml", name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Epochs = epochs
		j.Spec.Training.Intervals = ptr.To[int32](knativeIntervals)
		j.Spec.TensorBackend.Knative.Service = nil
		j.Spec.TensorBackend.Knative.URL = "https://dorylus-function." + ns + ".svc.cluster.local:8080/"
		j.Spec.TensorBackend.Knative.TokenSecretRef = &corev1.LocalObjectReference{Name: token.Name}
	}, 900*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) float64 {
		return trainAccuracy(t, trainArgs(job, filepath.Join(root, "datasets/citeseer"))...)
	})
	files, _ := filepath.Glob(filepath.Join(checkpoints, "citeseer-gat", "*"))
	if len(files) == 0 {
		t.Errorf("no checkpoint on the volume under %s/citeseer-gat", checkpoints)
	}
	t.Logf("checkpoints on the volume: %v", files)
}
