//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/controllers"
)

// TestKueue runs jobs through a real Kueue (hack/local-cluster/kueue.sh up,
// which make e2e runs before the suite) in the ClusterQueue of
// hack/kueue/queues.yaml, with quota for two Cora jobs. Three jobs: two are
// admitted and run, the third waits suspended with no pods until one of them
// has succeeded, then runs. Then a high-priority job preempts a low-priority
// checkpointed one, which stops, and once the high one has succeeded is
// admitted again, resumes from its checkpoint and succeeds.
func TestKueue(t *testing.T) {
	t.Parallel()
	queued := []string{"kueue-1", "kueue-2", "kueue-3"}
	c := setup(t, append(queued, "kueue-low", "kueue-high")...)
	workloads := &unstructured.UnstructuredList{}
	workloads.SetGroupVersionKind(controllers.WorkloadGVK.GroupVersion().WithKind("WorkloadList"))
	if err := c.List(context.Background(), workloads, client.InNamespace(ns)); err != nil {
		t.Fatalf("Kueue's Workloads are not served (run hack/local-cluster/kueue.sh up before the operator starts): %v", err)
	}
	run(t, kubectl, "apply", "-f", filepath.Join(root, "hack/kueue/queues.yaml"))

	t.Run("two of three admitted", func(t *testing.T) { twoOfThree(t, c, queued) })
	if t.Failed() {
		return
	}
	t.Run("preempted and resumed from its checkpoint", func(t *testing.T) { preemptAndResume(t, c) })
}

// queuedJob applies the cpu sample as job name in LocalQueue gnn with
// priority class (none when empty), changed further by edit.
func queuedJob(t *testing.T, name, priority string, edit func(*dorylusv1alpha1.GNNTrainingJob)) {
	t.Helper()
	_, manifest := sampleJob(t, "cpu_cora.yaml", name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Labels = map[string]string{controllers.LabelQueueName: "gnn"}
		if priority != "" {
			j.Labels[controllers.LabelPriorityClass] = priority
		}
		j.Spec.Training.TargetAccuracy = nil
		edit(j)
	})
	apply(t, manifest)
}

// suspendedBy returns the job's Suspended condition when it has status and
// reason.
func suspendedBy(job *dorylusv1alpha1.GNNTrainingJob, status metav1.ConditionStatus, reason string) *metav1.Condition {
	s := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended)
	if s == nil || s.Status != status || s.Reason != reason || s.ObservedGeneration != job.Generation {
		return nil
	}
	return s
}

// admitted reports whether Kueue admitted the job and it runs or ran.
func admitted(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return suspendedBy(job, metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted) != nil
}

// workloadAdmission reads whether the job's Workload holds quota.
func workloadAdmission(ctx context.Context, c client.Client, job string) (bool, error) {
	wl := &unstructured.Unstructured{}
	wl.SetGroupVersionKind(controllers.WorkloadGVK)
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gnntrainingjob-" + job}, wl); err != nil {
		return false, err
	}
	_, ok, err := unstructured.NestedMap(wl.Object, "status", "admission")
	return ok, err
}

// twoOfThree applies three jobs at once: never more than two are admitted
// and unfinished; two run while the third waits with no pods and no quota;
// the third is admitted no earlier than one of the others succeeded, and all
// three succeed.
func twoOfThree(t *testing.T, c client.Client, names []string) {
	for _, name := range names {
		queuedJob(t, name, "", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.Training.Epochs = 150 })
	}
	ctx := context.Background()
	var waiting string
	deadline := time.Now().Add(15 * time.Minute)
	for done := false; !done; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the three jobs did not all succeed in 15 min (waiting one: %q)", waiting)
		}
		running, finished := 0, 0
		jobs := map[string]*dorylusv1alpha1.GNNTrainingJob{}
		for _, name := range names {
			job := getJob(ctx, t, c, name)
			if job == nil {
				continue
			}
			jobs[name] = job
			ok, err := succeeded(job)
			switch {
			case err != nil:
				t.Fatalf("%s: %v", name, err)
			case ok:
				finished++
			case admitted(job):
				running++
			}
		}
		if running > 2 {
			t.Fatalf("%d queued jobs admitted at once, the ClusterQueue has room for 2: %v", running, jobsState(jobs))
		}
		for name, job := range jobs {
			if waiting != "" || running != 2 || finished != 0 {
				break
			}
			if s := suspendedBy(job, metav1.ConditionTrue, dorylusv1alpha1.ReasonWaitingForAdmission); s != nil {
				pods, err := jobPods(ctx, c, name)
				holds, werr := workloadAdmission(ctx, c, name)
				if err != nil || werr != nil || len(pods) > 0 || holds {
					t.Fatalf("%s waits for admission, but has %d pods (%v), Workload holds quota %v (%v)", name, len(pods), err, holds, werr)
				}
				waiting = name
				t.Logf("%s waits with no pods: %s", name, s.Message)
			}
		}
		done = finished == len(names)
	}
	if waiting == "" {
		t.Fatal("no job was ever seen waiting for admission while the two others ran")
	}
	// The waiting job was admitted no earlier than the first success.
	var firstSuccess time.Time
	for _, name := range names {
		job := getJob(ctx, t, c, name)
		if job == nil {
			t.FailNow()
		}
		if name == waiting {
			continue
		}
		if s := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded); firstSuccess.IsZero() || s.LastTransitionTime.Time.Before(firstSuccess) {
			firstSuccess = s.LastTransitionTime.Time
		}
	}
	job := getJob(ctx, t, c, waiting)
	if job == nil {
		t.FailNow()
	}
	adm := suspendedBy(job, metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted)
	if adm == nil || adm.LastTransitionTime.Time.Before(firstSuccess) {
		t.Fatalf("%s: Suspended %+v; want admitted at or after the first success (%v)", waiting,
			meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended), firstSuccess)
	}
	t.Logf("%s admitted at %v, after the first success at %v, and succeeded", waiting, adm.LastTransitionTime.Time, firstSuccess)
}

// jobsState formats each job's Suspended condition.
func jobsState(jobs map[string]*dorylusv1alpha1.GNNTrainingJob) string {
	out := ""
	for name, job := range jobs {
		s := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended)
		if s != nil {
			out += fmt.Sprintf("%s: %s/%s; ", name, s.Status, s.Reason)
		}
	}
	return out
}

// resumedFrom matches the parameter server's line about its resume.
var resumedFrom = regexp.MustCompile(`parameter server 0: resumed from the checkpoint of epoch (\d+)`)

// paramServerResumedFrom reads the epoch a running parameter server of job
// name, none of whose UIDs is in skip, says it resumed from (resumedFrom in
// its log); false while none has said it.
func paramServerResumedFrom(ctx context.Context, c client.Client, name string, skip map[string]bool) (int, bool) {
	list, err := jobPods(ctx, c, name)
	if err != nil {
		return 0, false
	}
	for _, p := range list {
		if p.Labels[controllers.LabelRole] != controllers.RoleParamServer || p.Status.Phase != "Running" || skip[string(p.UID)] {
			continue
		}
		out, err := runIn(nil, kubectl, "logs", "-n", ns, p.Name)
		if err != nil {
			continue
		}
		if m := resumedFrom.FindStringSubmatch(out); m != nil {
			e, err := strconv.Atoi(m[1])
			return e, err == nil
		}
	}
	return 0, false
}

// preemptAndResume runs a low-priority job that checkpoints every 10 epochs
// to a PersistentVolume; after its first checkpoint a high-priority job that
// does not fit beside it is queued: the low one is evicted (Preempted), its
// pods stop, the high one runs and succeeds; then the low one is admitted
// again, its parameter server resumes from its checkpoint (epoch > 0, at
// least the one it had at eviction), and it succeeds.
func preemptAndResume(t *testing.T, c client.Client) {
	ctx := context.Background()
	hostVolume(t, c, "kueue-checkpoints", "")
	queuedJob(t, "kueue-low", "dorylus-low", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Epochs = longEpochs
		j.Spec.Training.Staleness = intstr.FromString("sync") // checkpoints need synchronous training
		j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10,
			PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "kueue-checkpoints", Path: "kueue-low"}}
	})
	waitJob(t, c, "kueue-low", "a checkpoint", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if ok, err := succeeded(job); ok || err != nil {
			return false, fmt.Errorf("ended before its first checkpoint (%v)", err)
		}
		p := job.Status.Progress
		return admitted(job) && p != nil && p.LastCheckpointEpoch != nil && *p.LastCheckpointEpoch >= 10, nil
	})

	// Three graph servers and a parameter server (400m, 1.5Gi) do not fit
	// beside the low job's (300m, 1Gi).
	queuedJob(t, "kueue-high", "dorylus-high", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Epochs = 100
		j.Spec.GraphServers.Replicas = 3
	})
	low := waitJob(t, c, "kueue-low", "Suspended (Evicted) with no pods", 180*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if ok, err := succeeded(job); ok || err != nil {
			return false, fmt.Errorf("ended instead of being preempted (%v)", err)
		}
		s := suspendedBy(job, metav1.ConditionTrue, dorylusv1alpha1.ReasonEvicted)
		pods, err := jobPods(ctx, c, "kueue-low")
		return s != nil && err == nil && len(pods) == 0, nil
	})
	s := meta.FindStatusCondition(low.Status.Conditions, dorylusv1alpha1.ConditionSuspended)
	if !regexp.MustCompile(`\(Preempted: `).MatchString(s.Message) {
		t.Errorf("kueue-low evicted: %q; want Kueue's reason Preempted", s.Message)
	}
	checkpoint := *low.Status.Progress.LastCheckpointEpoch
	t.Logf("kueue-low preempted at epoch %d, checkpoint of epoch %d: %s", low.Status.Progress.Epoch, checkpoint, s.Message)

	high := waitJob(t, c, "kueue-high", "Succeeded", 600*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if l := getJob(ctx, t, c, "kueue-low"); l != nil && admitted(l) && !meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded) {
			return false, fmt.Errorf("kueue-low was admitted again while kueue-high runs: %s", conditions(l))
		}
		return succeeded(job)
	})
	if !admitted(high) {
		t.Errorf("kueue-high succeeded without being admitted: %s", conditions(high))
	}

	// Admitted again, the low job's parameter server resumes from the
	// checkpoint; the job succeeds.
	var resumed int
	waitJob(t, c, "kueue-low", "its parameter server resuming from the checkpoint", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		var ok bool
		if admitted(job) {
			resumed, ok = paramServerResumedFrom(ctx, c, "kueue-low", nil)
		}
		return ok, nil
	})
	if resumed <= 0 || int32(resumed) < checkpoint {
		t.Fatalf("kueue-low resumed from the checkpoint of epoch %d; want > 0 and at least %d, its checkpoint at eviction", resumed, checkpoint)
	}
	// The status agrees: what graph server 0 reports after the new admission
	// is at least the checkpoint (its first report may be the epoch it
	// resumed at), never the low epoch of a run started over.
	low = waitJob(t, c, "kueue-low", "progress after the new admission", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		adm, p := suspendedBy(job, metav1.ConditionFalse, dorylusv1alpha1.ReasonAdmitted), job.Status.Progress
		return adm != nil && p != nil && p.UpdateTime != nil && !p.UpdateTime.Before(&adm.LastTransitionTime), nil
	})
	if e := low.Status.Progress.Epoch; e < int32(resumed) {
		t.Errorf("kueue-low's progress after its new admission is epoch %d; want at least the checkpoint of epoch %d", e, resumed)
	}
	low = waitJob(t, c, "kueue-low", "Succeeded after resuming", 600*time.Second, succeeded)
	t.Logf("kueue-low resumed from the checkpoint of epoch %d and succeeded: %s", resumed, conditions(low))
}
