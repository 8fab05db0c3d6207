//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/controllers"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// probeImage is the image of test/e2e/netprobe, which probeImageOnce builds
// and imports into the node's containerd.
const probeImage = "docker.io/dorylus-gnn/netprobe:local"

var (
	probeOnce sync.Once
	probeErr  error
)

// importProbeImage builds netprobe (static), packs it with hack/image and
// imports it into the cluster (hack/local-cluster/cluster.sh import), once.
func importProbeImage(t *testing.T) {
	t.Helper()
	probeOnce.Do(func() {
		dir := filepath.Join(clusterDir, "images")
		bin, tar := filepath.Join(dir, "netprobe"), filepath.Join(dir, "netprobe.tar")
		for _, args := range [][]string{
			{"go", "build", "-trimpath", "-o", bin, "./test/e2e/netprobe"},
			{"go", "run", "./hack/image", "custom", "--name", probeImage, "--add", bin + "=/netprobe", "--entrypoint", "/netprobe", "--out", tar},
			{"hack/local-cluster/cluster.sh", "import", tar},
		} {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				probeErr = fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if probeErr != nil {
		t.Fatal(probeErr)
	}
}

// probePod runs netprobe in a bare pod name with labels (none: nil),
// restricted like the jobs' pods, waits until it is Ready and returns its IP.
func probePod(t *testing.T, c client.Client, name string, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: probeImage, ImagePullPolicy: corev1.PullNever,
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	_ = c.Delete(ctx, pod, client.GracePeriodSeconds(0)) // left by an earlier run
	run(t, kubectl, "wait", "-n", ns, "pod/"+name, "--for=delete", "--timeout=60s")
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	run(t, kubectl, "wait", "-n", ns, "pod/"+name, "--for=condition=Ready", "--timeout=120s")
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil || pod.Status.PodIP == "" {
		t.Fatalf("pod %s: no IP (%v)", name, err)
	}
	return pod.Status.PodIP
}

// dial is one connection a netprobe is asked to open: from the probe at
// probeIP to addr.
type dial struct{ probeIP, addr string }

// dialAll asks the netprobes to open every connection of dials at once (a
// dropped one takes the probe's whole 3 s timeout: one after the other, the
// test's 20 took a minute) and returns what each saw, in the order of dials:
// open, refused, timeout or error: ….
func dialAll(t *testing.T, dials []dial) []string {
	t.Helper()
	got, errs := make([]string, len(dials)), make([]error, len(dials))
	var wg sync.WaitGroup
	for i, d := range dials {
		wg.Go(func() { got[i], errs[i] = dialFrom(d.probeIP, d.addr) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return got
}

// dialFrom asks the netprobe at probeIP to open a TCP connection to addr and
// returns what it saw.
func dialFrom(probeIP, addr string) (string, error) {
	hc := http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + net.JoinHostPort(probeIP, "8080") + "/dial?addr=" + url.QueryEscape(addr))
	if err != nil {
		return "", fmt.Errorf("netprobe %s: %w", probeIP, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("netprobe %s, dial %s: %s: %s", probeIP, addr, resp.Status, body)
	}
	return strings.TrimSpace(string(body)), nil
}

// TestNetworkPolicyEnforced runs a job under the enforcer of the local
// cluster (kube-router's firewall, hack/local-cluster) beside a pod labelled
// as another job's graph server and a pod with no labels, both running
// netprobe, and an HTTP function labelled as the job's (LabelFunctionOf). At
// epoch 5, with the job's graph servers, parameter server and function
// serving (the node, whose traffic policy does not cover, opens each of
// their ports), neither pod may open any of them: the data ports, the
// health and metrics ports and the function's (refused or timed out); each
// probe pod opens the other's port, so the probes themselves work. The
// job's own pods, which reach each other under the same policy, must train
// to Succeeded.
func TestNetworkPolicyEnforced(t *testing.T) {
	t.Parallel()
	const name = "cora-netpol"
	c := setup(t, name)
	importProbeImage(t)
	createServePod(t, c, name+"-function", runtimeImage(t), functionPort, map[string]string{controllers.LabelFunctionOf: name}, nil,
		"/dorylus", "function", "--listen", fmt.Sprintf(":%d", functionPort), "--insecure")
	probes := map[string]string{
		"another job's graph server": probePod(t, c, name+"-other-job", map[string]string{
			controllers.LabelJobName: name + "-other", controllers.LabelRole: controllers.RoleGraphServer}),
		"a pod with no labels": probePod(t, c, name+"-no-labels", nil),
	}
	run(t, kubectl, "wait", "-n", ns, "deployment/"+name+"-function", "--for=condition=Available", "--timeout=120s")

	// Long enough that the servers still serve while they are probed (the
	// probes' 3 s timeout, twice): 500 epochs of Cora (longJob's) took 9 s
	// once the data plane's codec landed.
	tl := longJob(t, c, name, func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.Epochs = netpolEpochs })
	defer tl.close()
	waitJob(t, c, name, "epoch 5", 300*time.Second, atEpoch(5))

	ctx := context.Background()
	var targets []string // "role pod address"
	pods, err := jobPods(ctx, c, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		ports := map[string][]int{
			controllers.RoleGraphServer: {jobconfig.GraphServerPort, jobconfig.HealthPort, jobconfig.MetricsPort},
			controllers.RoleParamServer: {jobconfig.ParamServerPort, jobconfig.HealthPort, jobconfig.MetricsPort},
		}[p.Labels[controllers.LabelRole]]
		for _, port := range ports {
			targets = append(targets, fmt.Sprintf("%s %s %s", p.Labels[controllers.LabelRole], p.Name, net.JoinHostPort(p.Status.PodIP, fmt.Sprint(port))))
		}
	}
	var fn corev1.PodList
	if err := c.List(ctx, &fn, client.InNamespace(ns), client.MatchingLabels{controllers.LabelFunctionOf: name}); err != nil || len(fn.Items) != 1 {
		t.Fatalf("the function's pods: %d (%v)", len(fn.Items), err)
	}
	targets = append(targets, fmt.Sprintf("function %s %s", fn.Items[0].Name, net.JoinHostPort(fn.Items[0].Status.PodIP, fmt.Sprint(functionPort))))
	if want := 2*3 + 3 + 1; len(targets) != want {
		t.Fatalf("%d ports to probe, want %d (2 graph servers, 1 parameter server, 1 function): %v", len(targets), want, targets)
	}

	// Every probe pod dials every target and the other probe's port, all at
	// once, while the node opens each target: the targets served while they
	// were probed, so the refusals prove something.
	type check struct {
		open bool   // the dial must open, else be refused or time out
		what string // what it means when it does not
	}
	var dials []dial
	var checks []check
	for from, ip := range probes {
		for _, target := range targets {
			dials = append(dials, dial{ip, target[strings.LastIndex(target, " ")+1:]})
			checks = append(checks, check{false, fmt.Sprintf("%s (%s) opened %s", from, ip, target)})
		}
		for other, oip := range probes {
			if other != from {
				dials = append(dials, dial{ip, net.JoinHostPort(oip, "8080")})
				checks = append(checks, check{true, fmt.Sprintf("%s (%s) could not open %s's port: the probe itself fails", from, ip, other)})
			}
		}
	}
	nodeErrs := make([]error, len(targets))
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Go(func() {
			conn, err := net.DialTimeout("tcp", target[strings.LastIndex(target, " ")+1:], 3*time.Second)
			if err == nil {
				err = conn.Close()
			}
			nodeErrs[i] = err
		})
	}
	for i, got := range dialAll(t, dials) {
		if c := checks[i]; c.open && got != "open" || !c.open && got != "refused" && got != "timeout" {
			t.Errorf("%s: %s", c.what, got)
		}
	}
	wg.Wait()
	for i, err := range nodeErrs {
		if err != nil {
			t.Errorf("the node cannot open %s (%v): its refusals above prove nothing", targets[i], err)
		}
	}
	t.Logf("refused or timed out from %d pods: %s", len(probes), strings.Join(targets, "; "))

	waitJob(t, c, name, "Succeeded", 600*time.Second, succeeded)
	tl.wait(t, msGone, 120*time.Second)
	t.Logf("timeline %s", tl.report())
	deleteJob(t, name, tl.processes())
}

// netpolEpochs is TestNetworkPolicyEnforced's job's epochs: at 18 ms an epoch
// (Cora on 2 graph servers in the local cluster, the fastest seen), 27 s.
const netpolEpochs = 1500
