package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// TestRecreatedJobCheckpointsElsewhere creates a checkpointed job (S3 and PVC destinations),
// deletes it and creates one of the same name and spec: the run config each mounts names its
// UID as the run and puts the checkpoints in that run's own folder under the user's prefix
// (run-<UID>), so the second job's differs from the first's and never resumes from or prunes
// the deleted job's checkpoints; the parameter servers mount that run config.
func TestRecreatedJobCheckpointsElsewhere(t *testing.T) {
	ns := newNamespace(t)
	for _, dest := range []struct {
		name string
		spec dorylusv1alpha1.CheckpointSpec
		loc  func(c *jobconfig.Checkpoint) string
		want func(uid string) string
	}{
		{"s3", dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 5, S3: &dorylusv1alpha1.S3Location{Bucket: "ckpt", Prefix: "teams/ml"}},
			func(c *jobconfig.Checkpoint) string { return jobconfig.Location{S3: c.S3}.URI() },
			func(uid string) string { return "s3://ckpt/teams/ml/run-" + uid }},
		{"pvc", dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 5, PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "ckpt", Path: "cora"}},
			func(c *jobconfig.Checkpoint) string { return c.Path },
			func(uid string) string { return jobconfig.CheckpointMountPath + "/cora/run-" + uid }},
	} {
		t.Run(dest.name, func(t *testing.T) {
			name := "again-" + dest.name
			var seen []string
			for range 2 {
				job := createJob(t, userJob(ns, name, func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Checkpoint = dest.spec.DeepCopy() }))
				waitCondition(t, ns, name, dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
				uid := string(job.UID)
				c := runConfigOf(t, ns, name).Checkpoint
				if c == nil || c.RunID != uid || dest.loc(c) != dest.want(uid) || c.Fresh {
					t.Fatalf("job %s (UID %s): checkpoint %+v, want run %s in %s, resuming", name, uid, c, uid, dest.want(uid))
				}
				var d appsv1.Deployment
				if err := getObj(t, ns, paramShardName(job, 0), &d); err != nil {
					t.Fatal(err)
				}
				if !mountsConfig(d.Spec.Template.Spec, configMapName(job)) {
					t.Errorf("parameter server 0 does not mount the run config %s", configMapName(job))
				}
				seen = append(seen, dest.loc(c))
				deleteWithChildren(t, job)
			}
			if seen[0] == seen[1] {
				t.Errorf("the recreated job checkpoints to %s, as the deleted one did", seen[1])
			}
		})
	}
}

// mountsConfig reports whether a pod spec mounts ConfigMap name.
func mountsConfig(p corev1.PodSpec, name string) bool {
	for _, v := range p.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == name {
			return true
		}
	}
	return false
}

// deleteWithChildren deletes job and, as the garbage collector envtest lacks would, the
// children it controls, and waits until the job is gone.
func deleteWithChildren(t *testing.T, job *dorylusv1alpha1.GNNTrainingJob) {
	t.Helper()
	ctx := context.Background()
	if err := k8sClient.Delete(ctx, job); err != nil {
		t.Fatal(err)
	}
	eventually(t, "job deleted", func() error {
		if err := getObj(t, job.Namespace, job.Name, &dorylusv1alpha1.GNNTrainingJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	lists := []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{},
		&appsv1.StatefulSetList{}, &appsv1.DeploymentList{}}
	for _, l := range lists {
		if err := k8sClient.List(ctx, l, client.InNamespace(job.Namespace)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			obj := o.(client.Object)
			if ownedBy(obj.GetOwnerReferences(), job) {
				if err := client.IgnoreNotFound(k8sClient.Delete(ctx, obj)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestCheckpointedJobsGetTheGraceTheirCheckpointNeeds creates a small and a large job with
// checkpoints and one without, and checks the pod templates of the graph servers'
// StatefulSet and of parameter server 0's Deployment: the small job's (cora, a GCN of 16
// hidden: a 0.3 MB checkpoint) get Kubernetes' default 30 s, more than the 20 s drain and 5 s
// exit; the large job's (coauthor_cs, GraphSAGE of 3 layers of 4096: (6805·4096 + 4096·4096 +
// 4096·15)·2 parameters, 12 bytes each, 1.07 GB at 10 MiB/s, 102.3 s) 128 s; both servers are
// told the 20 s drain. The job without checkpoints has nothing to save: the API server's
// default grace and no --drain-timeout.
func TestCheckpointedJobsGetTheGraceTheirCheckpointNeeds(t *testing.T) {
	ns := newNamespace(t)
	pvc := &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10, PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "ckpt"}}
	for _, c := range []struct {
		name   string
		mutate func(*dorylusv1alpha1.GNNTrainingJob)
		grace  int64
		drain  bool
	}{
		{"grace-small", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Checkpoint = pvc.DeepCopy() }, 30, true},
		{"grace-large", func(j *dorylusv1alpha1.GNNTrainingJob) {
			j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10, S3: &dorylusv1alpha1.S3Location{Bucket: "ckpt"}}
			j.Spec.Dataset.Builtin.Name = "coauthor_cs"
			j.Spec.Model = dorylusv1alpha1.ModelSpec{Architecture: dorylusv1alpha1.ArchitectureSAGE, Layers: 3, Hidden: 4096}
		}, 128, true},
		{"grace-none", func(*dorylusv1alpha1.GNNTrainingJob) {}, corev1.DefaultTerminationGracePeriodSeconds, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			job := createJob(t, userJob(ns, c.name, c.mutate))
			waitCondition(t, ns, c.name, dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
			var sts appsv1.StatefulSet
			var dep appsv1.Deployment
			if err := getObj(t, ns, graphServerName(job), &sts); err != nil {
				t.Fatal(err)
			}
			if err := getObj(t, ns, paramShardName(job, 0), &dep); err != nil {
				t.Fatal(err)
			}
			for role, pod := range map[string]corev1.PodSpec{"graph servers": sts.Spec.Template.Spec, "parameter server 0": dep.Spec.Template.Spec} {
				if g := pod.TerminationGracePeriodSeconds; g == nil || *g != c.grace {
					t.Errorf("%s: terminationGracePeriodSeconds %v, want %d", role, ptrString(g), c.grace)
				}
				args := strings.Join(pod.Containers[0].Args, " ")
				if strings.Contains(args, "--drain-timeout 20s") != c.drain {
					t.Errorf("%s: args %q: want --drain-timeout 20s: %v", role, args, c.drain)
				}
			}
		})
	}
}

// ptrString writes *p, or nil.
func ptrString[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
