package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestReporterHasLeastPrivilege authenticates as the job's ServiceAccount and
// checks that the Role lets graph server 0 write its own job's progress and
// nothing else.
func TestReporterHasLeastPrivilege(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "mine"))
	createJob(t, userJob(ns, "other"))
	waitCondition(t, ns, "mine", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	waitCondition(t, ns, "other", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")

	sa := fmt.Sprintf("system:serviceaccount:%s:mine-runtime", ns)
	user, err := testEnv.AddUser(envtest.User{Name: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}, restConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := user.Config()
	ctx := context.Background()

	mine, err := jobstatus.New(cfg, ns, "mine")
	if err != nil {
		t.Fatal(err)
	}
	// RBAC objects reach the authorizer's cache shortly after they are written.
	eventually(t, "report as the job's ServiceAccount", func() error {
		return mine.Report(ctx, jobstatus.Progress{Epoch: 2, Loss: 1.2, ValAccuracy: 0.4, CostUSD: 0.001, GraphServerPeakMemoryBytes: 1536 << 20,
			TensorCalls: 96, LocalTensorTasks: 32})
	})
	job := getJob(t, ns, "mine")
	if p := job.Status.Progress; p == nil || p.Epoch != 2 || *p.Loss != "1.2" || p.GraphServerPeakMemory == nil || p.GraphServerPeakMemory.Value() != 1536<<20 ||
		p.TensorCalls == nil || *p.TensorCalls != 96 || p.LocalTensorTasks == nil || *p.LocalTensorTasks != 32 {
		t.Fatalf("progress %+v", p)
	}
	// A restarted graph server 0 reads the cost and the tensor task counts so far back.
	if p, err := mine.Reported(ctx); err != nil || p.CostUSD != 0.001 || p.TensorCalls != 96 || p.LocalTensorTasks != 32 {
		t.Errorf("read back as the job's ServiceAccount: %+v, %v; want $0.001, 96 calls, 32 local tasks", p, err)
	}
	owners := map[string]bool{}
	for _, mf := range job.ManagedFields {
		if mf.Subresource == "status" && strings.Contains(string(mf.FieldsV1.GetRawBytes()), `"f:progress"`) {
			owners[mf.Manager] = true
		}
	}
	if !owners[jobstatus.FieldManager] || owners[FieldOwner] || len(owners) != 1 {
		t.Errorf("status.progress managers %v, want only %s", owners, jobstatus.FieldManager)
	}

	other, _ := jobstatus.New(cfg, ns, "other")
	if err := other.Report(ctx, jobstatus.Progress{Epoch: 1}); !apierrors.IsForbidden(err) {
		t.Errorf("report into another job: got %v, want Forbidden", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	var got dorylusv1alpha1.GNNTrainingJob
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "mine"}, &got); !apierrors.IsForbidden(err) {
		t.Errorf("get the job's spec: got %v, want Forbidden", err)
	}
	patch := []byte(`{"spec":{"runPolicy":{"suspend":true}}}`)
	if err := c.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch)); !apierrors.IsForbidden(err) {
		t.Errorf("patch the job's spec: got %v, want Forbidden", err)
	}
	var list dorylusv1alpha1.GNNTrainingJobList
	if err := c.List(ctx, &list, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
		t.Errorf("list jobs: got %v, want Forbidden", err)
	}
}
