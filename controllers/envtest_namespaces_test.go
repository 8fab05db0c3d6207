package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// TestManagerWatchesOnlyItsNamespaces runs a second manager limited to one
// namespace (--watch-namespaces), as a user granted config/rbac's manager
// ClusterRole in that namespace alone, as the chart's watchNamespaces does:
// its cache syncs without any cluster-wide grant, it applies the children of
// the job in its namespace, and it neither sees nor touches the job in
// another.
func TestManagerWatchesOnlyItsNamespaces(t *testing.T) {
	needEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mine, other := newNamespace(t), newNamespace(t)

	data, err := os.ReadFile(filepath.Join("..", "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(decodeAll(t, data)[0].Object, role); err != nil {
		t.Fatal(err)
	}
	role.Name = "scoped-" + mine
	if err := k8sClient.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), role) })
	user := "scoped-operator-" + mine
	if err := k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "manager", Namespace: mine},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}); err != nil {
		t.Fatal(err)
	}
	u, err := testEnv.AddUser(envtest.User{Name: user, Groups: []string{"system:authenticated"}}, restConfig)
	if err != nil {
		t.Fatal(err)
	}

	requests := &requestCounter{}
	mgr, _, err := newTestManager(u.Config(), requests, mine)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("scoped manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the scoped manager's cache did not sync with its namespace's grant alone")
	}

	createJob(t, userJob(mine, "cora"))
	createJob(t, userJob(other, "cora"))
	// Both managers reconcile the job in mine; whichever applies a child
	// first, the other finds it unchanged (quiet.go), but each writes status.
	eventually(t, "the scoped manager reconciles its job", func() error {
		if requests.snapshot()[requestKey{namespace: mine, verb: "apply", resource: "gnntrainingjobs/status"}] == 0 {
			return fmt.Errorf("no status written in %s", mine)
		}
		return mgr.GetCache().Get(ctx, client.ObjectKey{Namespace: mine, Name: "cora-gs"}, &appsv1.StatefulSet{})
	})
	var jobs dorylusv1alpha1.GNNTrainingJobList
	if err := mgr.GetCache().List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || jobs.Items[0].Namespace != mine {
		t.Errorf("the scoped manager's cache holds %d jobs, want only %s/cora", len(jobs.Items), mine)
	}
	// The suite's cluster-wide manager has reconciled the other job by now.
	waitCondition(t, other, "cora", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	for k, n := range requests.snapshot() {
		if k.namespace == other {
			t.Errorf("the scoped manager sent %d %s requests in namespace %s", n, k, other)
		}
	}
}
