package controllers

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// userJob is a job as a user writes it: a dataset and whatever mutate adds;
// the API server fills in the defaults.
func userJob(ns, name string, mutate ...func(*dorylusv1alpha1.GNNTrainingJob)) *dorylusv1alpha1.GNNTrainingJob {
	job := &dorylusv1alpha1.GNNTrainingJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: dorylusv1alpha1.GNNTrainingJobSpec{
			Dataset: dorylusv1alpha1.DatasetSource{Builtin: &dorylusv1alpha1.BuiltinDataset{Name: "cora"}},
		},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

func createJob(t *testing.T, job *dorylusv1alpha1.GNNTrainingJob) *dorylusv1alpha1.GNNTrainingJob {
	t.Helper()
	if err := k8sClient.Create(context.Background(), job); err != nil {
		t.Fatalf("create job %s: %v", job.Name, err)
	}
	return job
}

func getJob(t *testing.T, ns, name string) *dorylusv1alpha1.GNNTrainingJob {
	t.Helper()
	job := &dorylusv1alpha1.GNNTrainingJob{}
	if err := k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, job); err != nil {
		t.Fatalf("get job %s: %v", name, err)
	}
	return job
}

// updateJob re-reads the job, applies mutate and updates it, retrying on
// conflicts with the operator's writes.
func updateJob(t *testing.T, ns, name string, mutate func(*dorylusv1alpha1.GNNTrainingJob)) error {
	t.Helper()
	var err error
	for range 10 {
		job := getJob(t, ns, name)
		mutate(job)
		if err = k8sClient.Update(context.Background(), job); err == nil || !isConflict(err) {
			return err
		}
	}
	return err
}

// waitCondition waits until the job has condition typ with status and
// reason (any reason when empty), and returns the job.
func waitCondition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *dorylusv1alpha1.GNNTrainingJob {
	t.Helper()
	var job *dorylusv1alpha1.GNNTrainingJob
	eventually(t, fmt.Sprintf("%s condition %s=%s/%s", name, typ, status, reason), func() error {
		job = getJob(t, ns, name)
		c := meta.FindStatusCondition(job.Status.Conditions, typ)
		if c == nil {
			return fmt.Errorf("no %s condition in %+v", typ, job.Status.Conditions)
		}
		if c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s is %s/%s (%s)", typ, c.Status, c.Reason, c.Message)
		}
		if c.ObservedGeneration != job.Generation || job.Status.ObservedGeneration != job.Generation {
			return fmt.Errorf("observedGeneration %d/%d, generation %d", c.ObservedGeneration, job.Status.ObservedGeneration, job.Generation)
		}
		return nil
	})
	return job
}

// getObj fetches a child object by name, from the API server directly.
func getObj(t *testing.T, ns, name string, obj client.Object) error {
	t.Helper()
	return k8sClient.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, obj)
}

// setStatefulSetReady plays the StatefulSet controller: ready of its
// replicas are ready at its current generation, once the operator has scaled
// it up (to at least ready).
func setStatefulSetReady(t *testing.T, ns, name string, ready int32) {
	t.Helper()
	eventually(t, "set StatefulSet status", func() error {
		var sts appsv1.StatefulSet
		if err := getObj(t, ns, name, &sts); err != nil {
			return err
		}
		want := *sts.Spec.Replicas
		if want == 0 || want < ready { // the operator has not scaled it up yet: a later generation would not be observed
			return fmt.Errorf("%d replicas, want %d ready", want, ready)
		}
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation, Replicas: want, ReadyReplicas: ready,
			AvailableReplicas: ready, CurrentReplicas: want, UpdatedReplicas: want,
		}
		return k8sClient.Status().Update(context.Background(), &sts)
	})
}

// setDeploymentAvailable plays the Deployment controller: its pod is
// available at its current generation, once the operator has scaled it up.
func setDeploymentAvailable(t *testing.T, ns, name string) {
	t.Helper()
	eventually(t, "set Deployment status", func() error {
		var d appsv1.Deployment
		if err := getObj(t, ns, name, &d); err != nil {
			return err
		}
		want := *d.Spec.Replicas
		if want < 1 {
			return fmt.Errorf("%d replicas, want 1 available", want)
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: want, ReadyReplicas: want,
			AvailableReplicas: want, UpdatedReplicas: want,
		}
		return k8sClient.Status().Update(context.Background(), &d)
	})
}

// report plays graph server 0, with the admin's credentials.
func report(t *testing.T, ns, name string, p jobstatus.Progress) {
	t.Helper()
	r, err := jobstatus.New(restConfig, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Report(context.Background(), p); err != nil {
		t.Fatalf("report progress: %v", err)
	}
}

// reconcileNow runs one reconcile of the job outside the manager, on the
// same fake clock, and returns its result.
func reconcileNow(t *testing.T, ns, name string) reconcile.Result {
	t.Helper()
	// The reconciler reads through the manager's cache: wait until it has
	// the API server's latest version of the job.
	eventually(t, name+" in the cache", func() error {
		key := types.NamespacedName{Namespace: ns, Name: name}
		var cached, latest dorylusv1alpha1.GNNTrainingJob
		cerr := direct.Get(context.Background(), key, &cached)
		lerr := k8sClient.Get(context.Background(), key, &latest)
		switch {
		case apierrors.IsNotFound(lerr) && apierrors.IsNotFound(cerr):
			return nil
		case lerr != nil:
			return lerr
		case cerr != nil:
			return cerr
		case cached.ResourceVersion != latest.ResourceVersion:
			return fmt.Errorf("cache at resourceVersion %s, server at %s", cached.ResourceVersion, latest.ResourceVersion)
		}
		return nil
	})
	res, err := direct.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res
}

// stsReplicas reads the graph-server StatefulSet's replica count.
func stsReplicas(t *testing.T, ns, job string) (int32, error) {
	var sts appsv1.StatefulSet
	if err := getObj(t, ns, job+"-gs", &sts); err != nil {
		return 0, err
	}
	return *sts.Spec.Replicas, nil
}

// depReplicas reads a parameter-shard Deployment's replica count.
func depReplicas(t *testing.T, ns, name string) (int32, error) {
	var d appsv1.Deployment
	if err := getObj(t, ns, name, &d); err != nil {
		return 0, err
	}
	return *d.Spec.Replicas, nil
}

// waitScaled waits until the job's graph servers and shard 0 run want replicas.
func waitScaled(t *testing.T, ns, job string, gs, ps int32) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s scaled to %d/%d", job, gs, ps), func() error {
		g, err := stsReplicas(t, ns, job)
		if err != nil {
			return err
		}
		p, err := depReplicas(t, ns, job+"-ps-0")
		if err != nil {
			return err
		}
		if g != gs || p != ps {
			return fmt.Errorf("graph servers %d, parameter server %d", g, p)
		}
		return nil
	})
}

// runConfigOf parses the run config the operator wrote for job.
func runConfigOf(t *testing.T, ns, job string) *jobconfig.RunConfig {
	t.Helper()
	var cm corev1.ConfigMap
	if err := getObj(t, ns, job+"-config", &cm); err != nil {
		t.Fatal(err)
	}
	cfg, err := jobconfig.Parse([]byte(cm.Data[jobconfig.ConfigMapKey]))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func isConflict(err error) bool { return apierrors.IsConflict(err) }
