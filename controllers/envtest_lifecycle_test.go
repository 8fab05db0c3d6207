package controllers

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
	"github.com/dorylus-gnn/dorylus/pkg/jobstatus"
)

// TestConditionsThroughALife drives a job from creation to success: servers
// become ready, graph server 0 reports, the last epoch ends the job and the
// servers are scaled down.
func TestConditionsThroughALife(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "life", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.GraphServers.Replicas = 2
		j.Spec.Training.Epochs = 5
	}))
	job := waitCondition(t, ns, "life", dorylusv1alpha1.ConditionReady, metav1.ConditionFalse, dorylusv1alpha1.ReasonServersNotReady)
	for typ, reason := range map[string]string{
		dorylusv1alpha1.ConditionCreated: dorylusv1alpha1.ReasonChildrenCreated, dorylusv1alpha1.ConditionTraining: dorylusv1alpha1.ReasonWaitingForServers,
		dorylusv1alpha1.ConditionSuspended: dorylusv1alpha1.ReasonNotSuspended,
	} {
		if c := findCond(job, typ); c == nil || c.Reason != reason {
			t.Errorf("%s condition %+v, want reason %s", typ, c, reason)
		}
	}
	if findCond(job, dorylusv1alpha1.ConditionSucceeded) != nil || findCond(job, dorylusv1alpha1.ConditionFailed) != nil {
		t.Errorf("a new job has terminal conditions: %+v", job.Status.Conditions)
	}

	setStatefulSetReady(t, ns, "life-gs", 1)
	eventually(t, "one of two graph servers ready", func() error {
		if st := getJob(t, ns, "life").Status; st.GraphServers.ReadyReplicas != 1 || st.GraphServers.Replicas != 2 {
			return fmt.Errorf("graph servers %+v", st.GraphServers)
		}
		return nil
	})
	setStatefulSetReady(t, ns, "life-gs", 2)
	setDeploymentAvailable(t, ns, "life-ps-0")
	waitCondition(t, ns, "life", dorylusv1alpha1.ConditionReady, metav1.ConditionTrue, dorylusv1alpha1.ReasonServersReady)
	waitCondition(t, ns, "life", dorylusv1alpha1.ConditionTraining, metav1.ConditionTrue, dorylusv1alpha1.ReasonTraining)

	report(t, ns, "life", jobstatus.Progress{Epoch: 3, Loss: 0.9, TrainAccuracy: 0.7, ValAccuracy: 0.6, TestAccuracy: 0.55, CostUSD: 0.01})
	eventually(t, "progress visible", func() error {
		p := getJob(t, ns, "life").Status.Progress
		if p == nil || p.Epoch != 3 || *p.ValAccuracy != "0.6000" || *p.CostUSD != "0.01" {
			return fmt.Errorf("progress %+v", p)
		}
		return nil
	})
	report(t, ns, "life", jobstatus.Progress{Epoch: 5, Loss: 0.5, TrainAccuracy: 0.9, ValAccuracy: 0.8, TestAccuracy: 0.79, CostUSD: 0.02})
	job = waitCondition(t, ns, "life", dorylusv1alpha1.ConditionSucceeded, metav1.ConditionTrue, dorylusv1alpha1.ReasonEpochsCompleted)
	if c := findCond(job, dorylusv1alpha1.ConditionSucceeded); c.Message != "completed 5 of 5 epochs" {
		t.Errorf("Succeeded message %q", c.Message)
	}
	if job.Status.CompletionTime == nil {
		t.Error("no completionTime on a succeeded job")
	}
	if p := job.Status.Progress; p == nil || p.Epoch != 5 || *p.TestAccuracy != "0.7900" {
		t.Errorf("the operator's status write lost graph server 0's progress: %+v", p)
	}
	waitCondition(t, ns, "life", dorylusv1alpha1.ConditionReady, metav1.ConditionFalse, dorylusv1alpha1.ReasonFinished)
	waitCondition(t, ns, "life", dorylusv1alpha1.ConditionTraining, metav1.ConditionFalse, dorylusv1alpha1.ReasonFinished)
	waitScaled(t, ns, "life", 0, 0)

	// Events follow the written conditions.
	eventually(t, "events", func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		seen := map[string]string{}
		for _, e := range list.Items {
			if e.Regarding.Name == "life" {
				seen[e.Reason] = e.Type
			}
		}
		for reason, typ := range map[string]string{"ChildrenCreated": "Normal", "ServersReady": "Normal", "Training": "Normal", "EpochsCompleted": "Normal"} {
			if seen[reason] != typ {
				return fmt.Errorf("no %s event %s in %v", typ, reason, seen)
			}
		}
		return nil
	})
}

// TestSuspendAndResume scales to zero and back, keeping the job and
// resetting startTime on resume.
func TestSuspendAndResume(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "pause", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.Suspend = ptr.To(true)
		j.Spec.GraphServers.Replicas = 3
	}))
	job := waitCondition(t, ns, "pause", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
	if job.Status.StartTime != nil {
		t.Errorf("a job created suspended has startTime %v", job.Status.StartTime)
	}
	waitCondition(t, ns, "pause", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	waitCondition(t, ns, "pause", dorylusv1alpha1.ConditionReady, metav1.ConditionFalse, dorylusv1alpha1.ReasonSuspended)
	waitScaled(t, ns, "pause", 0, 0)

	if err := updateJob(t, ns, "pause", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) }); err != nil {
		t.Fatal(err)
	}
	job = waitCondition(t, ns, "pause", dorylusv1alpha1.ConditionSuspended, metav1.ConditionFalse, dorylusv1alpha1.ReasonResumed)
	waitScaled(t, ns, "pause", 3, 1)
	firstStart := job.Status.StartTime
	if firstStart == nil {
		t.Fatal("no startTime after the first start")
	}

	if err := updateJob(t, ns, "pause", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(true) }); err != nil {
		t.Fatalf("suspending a started job: %v", err)
	}
	job = waitCondition(t, ns, "pause", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
	waitScaled(t, ns, "pause", 0, 0)
	if !job.Status.StartTime.Equal(firstStart) {
		t.Errorf("suspension changed startTime from %v to %v", firstStart, job.Status.StartTime)
	}

	fakeClock.Step(10 * time.Minute)
	if err := updateJob(t, ns, "pause", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(false) }); err != nil {
		t.Fatal(err)
	}
	job = waitCondition(t, ns, "pause", dorylusv1alpha1.ConditionSuspended, metav1.ConditionFalse, dorylusv1alpha1.ReasonResumed)
	waitScaled(t, ns, "pause", 3, 1)
	if !job.Status.StartTime.After(firstStart.Time) {
		t.Errorf("resume kept startTime %v, want it reset past %v", job.Status.StartTime, firstStart)
	}
}

// TestSuspendResumeAsyncCheckpointed suspends and resumes an asynchronous
// (staleness 1) job with checkpoints: the servers scale to zero and back,
// and the run config they start from again keeps the checkpoint location
// and asks them to resume from it (not fresh), in asynchronous mode, so that
// the parameter servers continue from their last checkpoint.
func TestSuspendResumeAsyncCheckpointed(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "async-pause", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Staleness = intstr.FromInt32(1)
		j.Spec.GraphServers.Replicas = 2
		j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 5,
			PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "checkpoints", Path: "async"}}
	}))
	waitCondition(t, ns, "async-pause", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	waitScaled(t, ns, "async-pause", 2, 1)
	for _, suspend := range []bool{true, false} {
		if err := updateJob(t, ns, "async-pause", func(j *dorylusv1alpha1.GNNTrainingJob) { j.Spec.RunPolicy.Suspend = ptr.To(suspend) }); err != nil {
			t.Fatal(err)
		}
		if suspend {
			waitCondition(t, ns, "async-pause", dorylusv1alpha1.ConditionSuspended, metav1.ConditionTrue, dorylusv1alpha1.ReasonSuspended)
			waitScaled(t, ns, "async-pause", 0, 0)
		} else {
			waitCondition(t, ns, "async-pause", dorylusv1alpha1.ConditionSuspended, metav1.ConditionFalse, dorylusv1alpha1.ReasonResumed)
			waitScaled(t, ns, "async-pause", 2, 1)
		}
	}
	cfg := runConfigOf(t, ns, "async-pause")
	uid := string(getJob(t, ns, "async-pause").UID)
	want := &jobconfig.Checkpoint{IntervalEpochs: 5, RunID: uid, Path: jobconfig.CheckpointMountPath + "/async/" + jobconfig.RunFolder(uid)}
	if diff := cmp.Diff(want, cfg.Checkpoint); diff != "" || cfg.Training.Staleness != jobconfig.Bounded(1) {
		t.Errorf("resumed run config: staleness %v, checkpoint (-want +got):\n%s", cfg.Training.Staleness, diff)
	}
}

// TestTTLAfterFinished requeues at exactly the TTL on the injected clock and
// deletes the job when it expires.
func TestTTLAfterFinished(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "ttl", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Epochs = 1
		j.Spec.RunPolicy.TTLSecondsAfterFinished = ptr.To[int32](100)
	}))
	waitCondition(t, ns, "ttl", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	waitScaled(t, ns, "ttl", 1, 1)
	report(t, ns, "ttl", jobstatus.Progress{Epoch: 1})
	job := waitCondition(t, ns, "ttl", dorylusv1alpha1.ConditionSucceeded, metav1.ConditionTrue, "")
	done := job.Status.CompletionTime.Time
	waitScaled(t, ns, "ttl", 0, 0) // while it waits for its TTL

	fakeClock.SetTime(done.Add(40 * time.Second))
	if res := reconcileNow(t, ns, "ttl"); res.RequeueAfter != 60*time.Second {
		t.Errorf("requeue 40s after finishing: %v, want exactly 60s", res.RequeueAfter)
	}
	fakeClock.SetTime(done.Add(99*time.Second + 500*time.Millisecond))
	if res := reconcileNow(t, ns, "ttl"); res.RequeueAfter != 500*time.Millisecond {
		t.Errorf("requeue 99.5s after finishing: %v, want exactly 500ms", res.RequeueAfter)
	}
	fakeClock.SetTime(done.Add(100 * time.Second))
	reconcileNow(t, ns, "ttl")
	err := getObj(t, ns, "ttl", &dorylusv1alpha1.GNNTrainingJob{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("job still there after its TTL (err %v)", err)
	}
}

// TestActiveDeadline fails a running job at exactly its deadline.
func TestActiveDeadline(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "deadline", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.ActiveDeadlineSeconds = ptr.To[int64](300)
	}))
	job := waitCondition(t, ns, "deadline", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	// Its graph-server pods exist, so no pod-start recheck is due: only the deadline wakes it.
	setStatefulSetReady(t, ns, "deadline-gs", 0)
	start := job.Status.StartTime.Time
	fakeClock.SetTime(start.Add(120 * time.Second))
	if res := reconcileNow(t, ns, "deadline"); res.RequeueAfter != 180*time.Second {
		t.Errorf("requeue 120s in: %v, want exactly 180s", res.RequeueAfter)
	}
	fakeClock.SetTime(start.Add(300 * time.Second))
	reconcileNow(t, ns, "deadline")
	job = waitCondition(t, ns, "deadline", dorylusv1alpha1.ConditionFailed, metav1.ConditionTrue, dorylusv1alpha1.ReasonDeadlineExceeded)
	if !job.Status.CompletionTime.Time.Equal(start.Add(300 * time.Second)) {
		t.Errorf("completionTime %v, want the deadline %v", job.Status.CompletionTime, start.Add(300*time.Second))
	}
	waitScaled(t, ns, "deadline", 0, 0)
	if res := reconcileNow(t, ns, "deadline"); res.RequeueAfter != 0 {
		t.Errorf("a failed job without TTL requeues after %v", res.RequeueAfter)
	}
}

// TestBudgetStop fails the job once the reported cost reaches the budget.
func TestBudgetStop(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "budget", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.RunPolicy.BudgetUSD = ptr.To[dorylusv1alpha1.Decimal]("1.50")
	}))
	waitCondition(t, ns, "budget", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	report(t, ns, "budget", jobstatus.Progress{Epoch: 10, CostUSD: 1.49})
	eventually(t, "cost under budget reported", func() error {
		if p := getJob(t, ns, "budget").Status.Progress; p == nil || p.Epoch != 10 {
			return fmt.Errorf("progress %+v", p)
		}
		return nil
	})
	reconcileNow(t, ns, "budget")
	if c := findCond(getJob(t, ns, "budget"), dorylusv1alpha1.ConditionFailed); c != nil {
		t.Fatalf("failed under budget: %+v", c)
	}
	report(t, ns, "budget", jobstatus.Progress{Epoch: 11, CostUSD: 1.5})
	job := waitCondition(t, ns, "budget", dorylusv1alpha1.ConditionFailed, metav1.ConditionTrue, dorylusv1alpha1.ReasonBudgetExceeded)
	if c := findCond(job, dorylusv1alpha1.ConditionFailed); c.Message != "cost 1.5 USD reached spec.runPolicy.budgetUSD 1.50" {
		t.Errorf("Failed message %q", c.Message)
	}
	waitScaled(t, ns, "budget", 0, 0)
	expectEvent(t, ns, "budget", "BudgetExceeded", corev1.EventTypeWarning)
}

// TestServerFailure: a server that fails restarts every server of a job
// with checkpoints, counted once, until the backoff limit; a job without
// checkpoints fails at once, naming the server and how it ended.
func TestServerFailure(t *testing.T) {
	ns := newNamespace(t)
	// fail makes a server pod of run restarts whose container ended.
	fail := func(job, pod, role string, restarts int32, reason string, code int32) {
		t.Helper()
		labels := childLabels(userJob(ns, job), role)
		labels[LabelRun] = fmt.Sprint(restarts)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: role, Image: testImage}}},
		}
		if err := k8sClient.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: role, Image: testImage, RestartCount: 1,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code}}}}
		if err := k8sClient.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(pods ...string) {
		t.Helper()
		eventually(t, "old pods deleted", func() error {
			for _, name := range pods {
				if err := getObj(t, ns, name, &corev1.Pod{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("pod %s: %v, want NotFound", name, err)
				}
			}
			return nil
		})
	}

	createJob(t, userJob(ns, "checkpointed", func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Staleness = intstr.FromString("sync")
		j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10,
			PVC: &dorylusv1alpha1.PVCLocation{ClaimName: "checkpoints"}}
		j.Spec.RunPolicy.BackoffLimit = ptr.To[int32](1)
	}))
	waitCondition(t, ns, "checkpointed", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	// servers reads the StatefulSet and the Deployment.
	servers := func() (*appsv1.StatefulSet, *appsv1.Deployment, error) {
		var sts appsv1.StatefulSet
		var d appsv1.Deployment
		if err := getObj(t, ns, "checkpointed-gs", &sts); err != nil {
			return nil, nil, err
		}
		return &sts, &d, getObj(t, ns, "checkpointed-ps-0", &d)
	}
	// generations are the StatefulSet's and the Deployment's, once both are
	// scaled up.
	generations := func() (stsGen, depGen int64) {
		t.Helper()
		eventually(t, "the servers scaled up", func() error {
			sts, d, err := servers()
			if err != nil {
				return err
			}
			if ptr.Deref(sts.Spec.Replicas, 0) == 0 || ptr.Deref(d.Spec.Replicas, 0) == 0 {
				return fmt.Errorf("replicas %d (graph servers), %d (parameter servers)", ptr.Deref(sts.Spec.Replicas, 0), ptr.Deref(d.Spec.Replicas, 0))
			}
			stsGen, depGen = sts.Generation, d.Generation
			return nil
		})
		return stsGen, depGen
	}
	stsGen, depGen := generations()
	fail("checkpointed", "checkpointed-gs-1", RoleGraphServer, 0, "OOMKilled", 137)
	fail("checkpointed", "checkpointed-ps-0-abc", RoleParamServer, 0, "Error", 1)
	eventually(t, "one restart", func() error {
		if st := getJob(t, ns, "checkpointed").Status; st.Restarts != 1 || st.LastRestartTime == nil {
			return fmt.Errorf("restarts %d, lastRestartTime %v; want 1 and a time", st.Restarts, st.LastRestartTime)
		}
		return nil
	})
	eventually(t, "the servers' templates of run 1", func() error {
		sts, d, err := servers()
		if err != nil {
			return err
		}
		if s, d := sts.Spec.Template.Labels[LabelRun], d.Spec.Template.Labels[LabelRun]; s != "1" || d != "1" {
			return fmt.Errorf("pod templates %s=%q (graph servers), %q (parameter servers), want 1", LabelRun, s, d)
		}
		return nil
	})
	// No controller has observed them (envtest runs none): the old pods stay,
	// else a controller could make one again from the old template.
	reconcileNow(t, ns, "checkpointed")
	// The templates changed once: a reconcile that read the job before the
	// cache held the restart did not put run 0's back (a Deployment would
	// have made a pod of it).
	if s, d := generations(); s != stsGen+1 || d != depGen+1 {
		t.Errorf("generations after the restart: StatefulSet %d→%d, Deployment %d→%d; want one change each", stsGen, s, depGen, d)
	}
	for _, name := range []string{"checkpointed-gs-1", "checkpointed-ps-0-abc"} {
		if err := getObj(t, ns, name, &corev1.Pod{}); err != nil {
			t.Fatalf("pod %s before the controllers observed run 1: %v, want it kept", name, err)
		}
	}
	setStatefulSetReady(t, ns, "checkpointed-gs", 0)
	setDeploymentAvailable(t, ns, "checkpointed-ps-0")
	gone("checkpointed-gs-1", "checkpointed-ps-0-abc")
	eventually(t, "new credentials for the next run", func() error {
		var s corev1.Secret
		job := getJob(t, ns, "checkpointed")
		if err := getObj(t, ns, credentialsSecretName(job, credentialsPeriod(job.Status.StartTime, 1)), &s); err != nil {
			return err
		}
		if got, want := s.Annotations[AnnotationCredentialsPeriod], credentialsPeriod(job.Status.StartTime, 1); got != want {
			return fmt.Errorf("credentials of period %q, want %q", got, want)
		}
		return nil
	})
	expectEvent(t, ns, "checkpointed", "Restarting", corev1.EventTypeWarning)
	if job := getJob(t, ns, "checkpointed"); findCond(job, dorylusv1alpha1.ConditionFailed) != nil || job.Status.Restarts != 1 {
		t.Fatalf("after one failure: restarts %d, %v; want 1 and not Failed", job.Status.Restarts, job.Status.Conditions)
	}
	fail("checkpointed", "checkpointed-gs-0", RoleGraphServer, 1, "Error", 2)
	job := waitCondition(t, ns, "checkpointed", dorylusv1alpha1.ConditionFailed, metav1.ConditionTrue, dorylusv1alpha1.ReasonBackoffLimitExceeded)
	want := "graph server pod checkpointed-gs-0 container graph-server: Error (exit code 2), after 1 restarts (spec.runPolicy.backoffLimit 1)"
	if c := findCond(job, dorylusv1alpha1.ConditionFailed); c.Message != want || job.Status.Restarts != 1 {
		t.Errorf("Failed %q, restarts %d; want %q, 1", c.Message, job.Status.Restarts, want)
	}
	waitScaled(t, ns, "checkpointed", 0, 0)

	createJob(t, userJob(ns, "plain"))
	waitCondition(t, ns, "plain", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	fail("plain", "plain-gs-1", RoleGraphServer, 0, "Error", 137)
	job = waitCondition(t, ns, "plain", dorylusv1alpha1.ConditionFailed, metav1.ConditionTrue, dorylusv1alpha1.ReasonServerFailed)
	want = "graph server pod plain-gs-1 container graph-server: Error (exit code 137, signal killed); the job has no spec.checkpoint to resume from"
	if c := findCond(job, dorylusv1alpha1.ConditionFailed); c.Message != want || job.Status.Restarts != 0 {
		t.Errorf("Failed %q, restarts %d; want %q, 0", c.Message, job.Status.Restarts, want)
	}
	expectEvent(t, ns, "plain", "ServerFailed", corev1.EventTypeWarning)
}

// TestTrainingError fails the job when graph server 0 reports a NaN.
func TestTrainingError(t *testing.T) {
	ns := newNamespace(t)
	createJob(t, userJob(ns, "nan"))
	waitCondition(t, ns, "nan", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	report(t, ns, "nan", jobstatus.Progress{Epoch: 4, Loss: nan()})
	job := waitCondition(t, ns, "nan", dorylusv1alpha1.ConditionFailed, metav1.ConditionTrue, dorylusv1alpha1.ReasonTrainingError)
	if c := findCond(job, dorylusv1alpha1.ConditionFailed); c.Message != "graph server 0 reported: loss is NaN at epoch 4" {
		t.Errorf("Failed message %q", c.Message)
	}
	expectEvent(t, ns, "nan", "TrainingError", corev1.EventTypeWarning)
}

// TestDelete removes the job; its children carry the owner reference the
// garbage collector (absent from envtest) follows.
func TestDelete(t *testing.T) {
	ns := newNamespace(t)
	job := createJob(t, userJob(ns, "gone"))
	waitCondition(t, ns, "gone", dorylusv1alpha1.ConditionCreated, metav1.ConditionTrue, "")
	if err := k8sClient.Delete(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	eventually(t, "job deleted", func() error {
		if err := getObj(t, ns, "gone", &dorylusv1alpha1.GNNTrainingJob{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	if res := reconcileNow(t, ns, "gone"); res.RequeueAfter != 0 {
		t.Errorf("reconcile of a deleted job requeues after %v", res.RequeueAfter)
	}
}

func expectEvent(t *testing.T, ns, job, reason, typ string) {
	t.Helper()
	eventually(t, "event "+reason, func() error {
		var list eventsv1.EventList
		if err := k8sClient.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Name == job && e.Reason == reason && e.Type == typ {
				return nil
			}
		}
		return fmt.Errorf("no %s event %s among %d", typ, reason, len(list.Items))
	})
}

func nan() float64 { return math.NaN() }
