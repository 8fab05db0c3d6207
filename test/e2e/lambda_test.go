//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// emulatorPort is where the sample lambda_cora_emulator.yaml expects the
// Lambda runtime interface emulator (http://lambda-emulator:9000).
const emulatorPort = 9000

// rieBinary finds aws-lambda-rie: on PATH, else where hack/tools.sh installs it.
func rieBinary(t *testing.T) string {
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	p := filepath.Join(envOr("DORYLUS_TOOLS_BIN", filepath.Join(os.Getenv("HOME"), ".cache/dorylus/bin")), "aws-lambda-rie")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("aws-lambda-rie is neither on PATH nor at %s: hack/tools.sh aws-lambda-rie", p)
	}
	return p
}

// nodeAddress is the node's address on the pod network (the pods' hostIP),
// read from the operator's pod.
func nodeAddress(t *testing.T, c client.Client) string {
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods, client.InNamespace("dorylus-system")); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.HostIP != "" {
			return p.Status.HostIP
		}
	}
	t.Fatal("no pod in dorylus-system reports a hostIP")
	return ""
}

// startEmulator runs aws-lambda-rie with `dorylus function` on the node's
// pod-network address and puts the Service lambda-emulator (an
// EndpointSlice to that address) and the credentials Secret the sample
// names in front of it. Everything is removed at the end of the test.
func startEmulator(t *testing.T, c client.Client) {
	addr := nodeAddress(t, c)
	api, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := api.Addr().String()
	api.Close()
	logPath := filepath.Join(clusterDir, "logs", "lambda-emulator.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(rieBinary(t), "--runtime-interface-emulator-address", net.JoinHostPort(addr, strconv.Itoa(emulatorPort)),
		"--runtime-api-address", apiAddr, filepath.Join(root, "bin/dorylus"), "function")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(addr, strconv.Itoa(emulatorPort)))
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(logPath)
			t.Fatalf("aws-lambda-rie at %s not answering after 30 s: %v\n%s", url, err, raw)
		}
		time.Sleep(50 * time.Millisecond)
	}

	ctx := context.Background()
	port := int32(emulatorPort)
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "lambda-emulator-credentials", Namespace: ns},
			StringData: map[string]string{"accessKeyID": "e2e", "secretAccessKey": "e2e-secret"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lambda-emulator", Namespace: ns},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: []corev1.ServicePort{{Name: "http", Port: port}}}},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "lambda-emulator", Namespace: ns, Labels: map[string]string{
				discoveryv1.LabelServiceName: "lambda-emulator", discoveryv1.LabelManagedBy: "dorylus-e2e"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}}},
			Ports:       []discoveryv1.EndpointPort{{Name: new("http"), Port: &port}},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
}

// TestCoraLambdaEmulator applies the lambda sample pointed at the Lambda
// runtime emulator: the graph server invokes `dorylus function` in
// aws-lambda-rie for every tensor task, and the job must succeed with the
// single-process run's accuracy.
func TestCoraLambdaEmulator(t *testing.T) {
	const name = "cora-gcn-lambda-emulator"
	c := setup(t, name)
	startEmulator(t, c)
	job, _ := sampleJob(t, "lambda_cora_emulator.yaml", name, nil)
	start := time.Now()
	run(t, kubectl, "apply", "-n", ns, "-f", filepath.Join(root, "config/samples/lambda_cora_emulator.yaml"))
	tl := watchJob(c, name, int(job.Spec.GraphServers.Replicas+job.Spec.ParameterServers.Replicas), start)
	defer tl.close()
	job = waitJob(t, c, name, "Succeeded", 600*time.Second, succeeded)
	tl.wait(t, msGone, 60*time.Second)
	t.Logf("timeline %s", tl.report())
	if job.Status.Progress == nil || job.Status.Progress.TestAccuracy == nil {
		t.Fatalf("no status.progress.testAccuracy: %s", conditions(job))
	}
	acc, err := strconv.ParseFloat(string(*job.Status.Progress.TestAccuracy), 64)
	if err != nil {
		t.Fatal(err)
	}
	want := singleProcessAccuracy(t)
	t.Logf("test accuracy: lambda emulator job %.4f, single process %.4f", acc, want)
	if math.Abs(acc-want) > 0.01 {
		t.Errorf("test accuracy in .status %.4f, single-process run %.4f: more than 1 point apart", acc, want)
	}
	raw, _ := os.ReadFile(filepath.Join(clusterDir, "logs", "lambda-emulator.log"))
	invokes := bytes.Count(raw, []byte("\nSTART RequestId: "))
	t.Logf("the emulator served %d invokes", invokes)
	if invokes < int(job.Spec.Training.Epochs) {
		t.Errorf("the emulator served %d invokes for %d epochs: the tensor tasks did not run on it", invokes, job.Spec.Training.Epochs)
	}
	deleteJob(t, name, tl.processes())
}
