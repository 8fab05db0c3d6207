package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "x y"}
	for in, want := range map[string]string{
		"plain":          "plain",
		"$(A)":           "1",
		"--p=$(A)-$(B)":  "--p=1-x y",
		"$(UNSET)":       "$(UNSET)",
		"$$(A)":          "$(A)",
		"cost $5":        "cost $5",
		"open $(A":       "open $(A",
		"trailing $":     "trailing $",
		"$(A)$(A)$$$(B)": "11$x y",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHostsFile(t *testing.T) {
	gw := netip.MustParseAddr("10.213.0.1")
	svc := func(ns, name, clusterIP string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}
	}
	notReady := false
	slice := func(ns, svcName string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svcName + "-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: svcName}}, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
	}
	host := "job-gs-0"
	services := []*corev1.Service{svc("default", "job-ps", "10.214.0.9"), svc("default", "job-gs", corev1.ClusterIPNone), svc("other", "api", "10.214.0.7")}
	slices := []*discoveryv1.EndpointSlice{
		slice("default", "job-ps", discoveryv1.Endpoint{Addresses: []string{"10.213.0.5"}}),
		slice("default", "job-gs", discoveryv1.Endpoint{Addresses: []string{"10.213.0.3"}, Hostname: &host},
			discoveryv1.Endpoint{Addresses: []string{"10.213.0.4"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}}),
		slice("other", "api", discoveryv1.Endpoint{Addresses: []string{"10.213.0.6"}}),
		slice("default", "no-such-service", discoveryv1.Endpoint{Addresses: []string{"10.213.0.8"}}),
	}
	pods := []podName{{namespace: "default", hostname: "job-gs-1", subdomain: "job-gs", addr: netip.MustParseAddr("10.213.0.4")}}
	got := string(hostsFile("default", gw, services, slices, pods))
	for _, want := range []string{
		"127.0.0.1\tlocalhost\n",
		"10.213.0.1\tkubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local\n",
		"10.213.0.3\tjob-gs job-gs-0.job-gs job-gs-0.job-gs.default job-gs-0.job-gs.default.svc job-gs-0.job-gs.default.svc.cluster.local job-gs.default job-gs.default.svc job-gs.default.svc.cluster.local\n",
		"10.213.0.4\tjob-gs-1.job-gs job-gs-1.job-gs.default job-gs-1.job-gs.default.svc job-gs-1.job-gs.default.svc.cluster.local\n",
		"10.213.0.5\tjob-ps job-ps.default job-ps.default.svc job-ps.default.svc.cluster.local\n",
		"10.213.0.6\tapi.other api.other.svc api.other.svc.cluster.local\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts file lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "10.213.0.8") {
		t.Errorf("an EndpointSlice of no Service is in the hosts file:\n%s", got)
	}
	if again := string(hostsFile("default", gw, services, slices, pods)); again != got {
		t.Errorf("hosts file differs between equal inputs:\n%s\n%s", got, again)
	}
}

func TestPodPhase(t *testing.T) {
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	exited := func(code int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
	}
	fresh := corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	backoff := corev1.ContainerStatus{RestartCount: 1, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}
	for _, tc := range []struct {
		policy corev1.RestartPolicy
		cs     []corev1.ContainerStatus
		want   corev1.PodPhase
	}{
		{corev1.RestartPolicyAlways, []corev1.ContainerStatus{fresh}, corev1.PodPending},
		{corev1.RestartPolicyAlways, []corev1.ContainerStatus{running, fresh}, corev1.PodRunning},
		{corev1.RestartPolicyAlways, []corev1.ContainerStatus{exited(1)}, corev1.PodRunning},
		{corev1.RestartPolicyAlways, []corev1.ContainerStatus{backoff}, corev1.PodRunning},
		{corev1.RestartPolicyNever, []corev1.ContainerStatus{exited(0)}, corev1.PodSucceeded},
		{corev1.RestartPolicyNever, []corev1.ContainerStatus{exited(0), exited(2)}, corev1.PodFailed},
		{corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{exited(0)}, corev1.PodSucceeded},
		{corev1.RestartPolicyOnFailure, []corev1.ContainerStatus{exited(3)}, corev1.PodRunning},
		{corev1.RestartPolicyNever, []corev1.ContainerStatus{exited(0), running}, corev1.PodRunning},
	} {
		if got := podPhase(statusView{policy: tc.policy, containers: tc.cs}); got != tc.want {
			t.Errorf("restartPolicy %s, %d containers: phase %s, want %s", tc.policy, len(tc.cs), got, tc.want)
		}
	}
}

func TestImageResolve(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dorylus"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := imageMap{}
	if err := m.Set("registry.example:5000/dorylus-gnn/dorylus=" + dir); err != nil {
		t.Fatal(err)
	}
	if err := m.Set("no-folder"); err == nil {
		t.Error("--image without =DIR accepted")
	}
	for _, image := range []string{"registry.example:5000/dorylus-gnn/dorylus", "registry.example:5000/dorylus-gnn/dorylus:v1.2",
		"registry.example:5000/dorylus-gnn/dorylus@sha256:abcd"} {
		got, err := m.resolve(image, "/dorylus")
		if err != nil || got != filepath.Join(dir, "dorylus") {
			t.Errorf("resolve(%s, /dorylus) = %q, %v", image, got, err)
		}
	}
	for _, tc := range []struct{ image, command, wantErr string }{
		{"other/image:v1", "/dorylus", "no local folder maps its repository other/image"},
		{"registry.example:5000/dorylus-gnn/dorylus", "/missing", "no such file"},
		{"registry.example:5000/dorylus-gnn/dorylus", "/data", "is not an executable file"},
		{"registry.example:5000/dorylus-gnn/dorylus", "/../../etc/passwd", "no such file"},
	} {
		if _, err := m.resolve(tc.image, tc.command); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("resolve(%s, %s): error %v, want one containing %q", tc.image, tc.command, err, tc.wantErr)
		}
	}
}
