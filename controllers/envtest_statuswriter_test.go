package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestOnlyGraphServerZeroWritesStatus installs config/admission's policy,
// creates the pods of graph servers 0 and 1 (no kubelet runs them) and
// reports progress with tokens of the job's ServiceAccount bound to each:
// graph server 1's report and an unbound token's are refused with the
// policy's message, graph server 0's is written; a pod of the partition step
// writes status.partitions once and no progress. The same holds for graph
// servers running as their podTemplate's ServiceAccount.
func TestOnlyGraphServerZeroWritesStatus(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	createJob(t, userJob(ns, "cora", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.GraphServers.Replicas = 2 }))
	waitCondition(t, ns, "cora", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")

	// A job whose graph servers run as the podTemplate's ServiceAccount.
	if err := k8sClient.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ml-identity", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	createJob(t, userJob(ns, "own", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.GraphServers.Replicas = 2
		j.Spec.GraphServers.PodTemplate = &dorylusv1alpha1.PodTemplate{Spec: dorylusv1alpha1.PodTemplateSpec{ServiceAccountName: "ml-identity"}}
	}))
	waitCondition(t, ns, "own", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	installStatusWriterPolicy(t, ns)

	cs := kubernetes.NewForConfigOrDie(restConfig)
	// reporter reports into job as sa with a token bound to pod (none: unbound).
	reporter := func(job, sa, pod string) *jobstatus.Reporter {
		t.Helper()
		req := &authenticationv1.TokenRequest{}
		if pod != "" {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}, Spec: corev1.PodSpec{
				ServiceAccountName: sa, Containers: []corev1.Container{{Name: "graph-server", Image: testImage}}}}
			if err := k8sClient.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod, UID: p.UID}
		}
		tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, req, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := rest.AnonymousClientConfig(restConfig)
		cfg.BearerToken = tok.Status.Token
		r, err := jobstatus.New(cfg, ns, job)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	gs0, gs1, unbound := reporter("cora", "cora-runtime", "cora-gs-0"), reporter("cora", "cora-runtime", "cora-gs-1"), reporter("cora", "cora-runtime", "")
	ownGS0, ownGS1 := reporter("own", "ml-identity", "own-gs-0"), reporter("own", "ml-identity", "own-gs-1")

	const want = `gnntrainingjobs.dorylus.dev "cora" is forbidden: ValidatingAdmissionPolicy 'status-writer' with binding 'status-writer' denied request: only graph server 0 (pod cora-gs-0), and the partition step (a pod cora-partition-*) once with status.partitions, may write the status of GNNTrainingJob cora`
	// The policy and the job's Role take effect shortly after they are written.
	eventually(t, "graph server 1 refused", func() error { return refusedWith(gs1.Report(ctx, jobstatus.Progress{Epoch: 7}), want) })
	if err := refusedWith(unbound.Report(ctx, jobstatus.Progress{Epoch: 8}), want); err != nil {
		t.Errorf("report with a token bound to no pod: %v", err)
	}
	if err := gs0.Report(ctx, jobstatus.Progress{Epoch: 3, CostUSD: 0.5}); err != nil {
		t.Fatalf("graph server 0's report: %v", err)
	}
	if p := getJob(t, ns, "cora").Status.Progress; p == nil || p.Epoch != 3 {
		t.Errorf("progress %+v, want graph server 0's epoch 3", p)
	}
	// The partition step's pod reports status.partitions once, and nothing else.
	step := reporter("cora", "cora-runtime", "cora-partition-x7k2p")
	if err := refusedWith(step.Report(ctx, jobstatus.Progress{Epoch: 9}), want); err != nil {
		t.Errorf("progress reported by the partition step: %v", err)
	}
	cut := jobstatus.Partitions{Parts: 2, Method: "multilevel", EdgeCut: 0.04, Ghosts: 268, Balance: 1.0002}
	if err := step.ReportPartitions(ctx, cut); err != nil {
		t.Fatalf("the partition step's report: %v", err)
	}
	if p := getJob(t, ns, "cora").Status.Partitions; p == nil || p.Ghosts != 268 {
		t.Errorf("status.partitions %+v, want the step's", p)
	}
	cut.Ghosts = 1
	if err := refusedWith(step.ReportPartitions(ctx, cut), want); err != nil {
		t.Errorf("a second partitions report: %v", err)
	}
	if err := refusedWith(gs1.ReportPartitions(ctx, cut), want); err != nil {
		t.Errorf("partitions reported by graph server 1: %v", err)
	}
	const wantOwn = `gnntrainingjobs.dorylus.dev "own" is forbidden: ValidatingAdmissionPolicy 'status-writer' with binding 'status-writer' denied request: only graph server 0 (pod own-gs-0), and the partition step (a pod own-partition-*) once with status.partitions, may write the status of GNNTrainingJob own`
	if err := refusedWith(ownGS1.Report(ctx, jobstatus.Progress{Epoch: 7}), wantOwn); err != nil {
		t.Errorf("graph server 1 as the podTemplate's ServiceAccount: %v", err)
	}
	if err := ownGS0.Report(ctx, jobstatus.Progress{Epoch: 4}); err != nil {
		t.Errorf("graph server 0's report as the podTemplate's ServiceAccount: %v", err)
	}
}

// refusedWith says how err differs from a Forbidden API error with message want.
func refusedWith(err error, want string) error {
	var status *apierrors.StatusError
	if !errors.As(err, &status) || status.ErrStatus.Reason != metav1.StatusReasonForbidden || status.ErrStatus.Message != want {
		return fmt.Errorf("got %v, want Forbidden: %s", err, want)
	}
	return nil
}

// installStatusWriterPolicy creates config/admission's policy and binding,
// the binding limited to namespace ns so that the rest of the suite (which
// reports as a client-certificate user) is unaffected.
func installStatusWriterPolicy(t *testing.T, ns string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "config", "admission", "status_writer.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range decodeAll(t, data) {
		var obj client.Object
		switch u.GetKind() {
		case "ValidatingAdmissionPolicy":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		case "ValidatingAdmissionPolicyBinding":
			obj = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		default:
			t.Fatalf("unexpected %s in config/admission", u.GetKind())
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
			t.Fatal(err)
		}
		if b, ok := obj.(*admissionregistrationv1.ValidatingAdmissionPolicyBinding); ok {
			b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}
		}
		if err := k8sClient.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), obj) })
	}
}
