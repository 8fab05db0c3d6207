//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/internal/testenv/minio"
)

// longEpochs is the length of the jobs the tests disturb: long enough to
// act mid-training on a loaded machine, short enough to finish afterwards.
// The tests act at epoch 5 or at a checkpoint of epoch 10 and are done
// acting in a second or two (a suspension stops training at once, though
// its pods take seconds to go); an epoch of these jobs takes 14 ms or more
// on this 2-CPU node even with the node to itself (50 ms median beside two
// other tests), so 500 epochs leave them 7 s or more.
const longEpochs = 500

// longJob applies the cpu sample as job name with longEpochs epochs and no
// target accuracy, changed further by edit (if not nil), and starts its
// timeline.
func longJob(t *testing.T, c client.Client, name string, edit func(*dorylusv1alpha1.GNNTrainingJob)) *timeline {
	job, manifest := sampleJob(t, "cpu_cora.yaml", name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Epochs = longEpochs
		j.Spec.Training.TargetAccuracy = nil
		if edit != nil {
			edit(j)
		}
	})
	start := time.Now()
	apply(t, manifest)
	return watchJob(c, name, int(job.Spec.GraphServers.Replicas+job.Spec.ParameterServers.Replicas), start)
}

// TestGraphServerKilled kills graph server 1's process with SIGKILL
// mid-training in an asynchronous job without checkpoints: the job, which has
// nothing to resume from, must end Failed with reason ServerFailed naming
// graph server 1 — its pod (killed, or its restarted container refused by the
// parameter server), or, when the kubelet reports the peer's exit first,
// graph server 0's last log line about it — not hang and not claim success.
func TestGraphServerKilled(t *testing.T) {
	t.Parallel()
	const name = "cora-kill"
	c := setup(t, name)
	tl := longJob(t, c, name, nil)
	defer tl.close()
	job, _ := disturbGraphServer(t, c, name, killProcess)
	f := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionFailed)
	killed := "graph server pod " + name + "-gs-1 container graph-server: "
	peer := "graph server pod " + name + "-gs-0 container graph-server: Error (exit code 1): dorylus: graph server 0: "
	if f == nil || f.Status != metav1.ConditionTrue || f.Reason != dorylusv1alpha1.ReasonServerFailed ||
		!strings.HasSuffix(f.Message, "; the job has no spec.checkpoint to resume from") ||
		!strings.HasPrefix(f.Message, killed) && !(strings.HasPrefix(f.Message, peer) && strings.Contains(f.Message, "graph server 1")) {
		t.Fatalf("after the kill: %s; want Failed, reason ServerFailed, naming graph server 1: %q... or %q...graph server 1...", conditions(job), killed, peer)
	}
	t.Logf("after the kill the job failed: %s: %s", f.Reason, f.Message)
	tl.wait(t, msGone, 120*time.Second)
	deleteJob(t, name, tl.processes())
}

// TestGraphServerKilledCheckpointed kills graph server 1 mid-training in an
// asynchronous (staleness 0) job that checkpoints to S3 (a real MinIO the
// pods reach on the node's address): the job must resume and succeed.
func TestGraphServerKilledCheckpointed(t *testing.T) {
	t.Parallel()
	const name = "cora-kill-checkpointed"
	c := setup(t, name)
	_, bucket, endpoint := podMinIO(t, c, "checkpoints", name+"-s3")
	tl := longJob(t, c, name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Staleness = intstr.FromInt32(0)
		j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: 10, S3: &dorylusv1alpha1.S3Location{
			Bucket: bucket, Prefix: name + "/", Region: minio.Region, Endpoint: endpoint,
			SecretRef: &dorylusv1alpha1.SecretReference{Name: name + "-s3"}}}
	})
	defer tl.close()
	resumes(t, c, tl, killProcess)
}

// volumeCheckpointedJob starts a long asynchronous (staleness 1) job that
// checkpoints every `every` epochs to claim, a host volume made for it.
func volumeCheckpointedJob(t *testing.T, c client.Client, name, claim string, every int32) *timeline {
	t.Helper()
	hostVolume(t, c, claim, "")
	return longJob(t, c, name, func(j *dorylusv1alpha1.GNNTrainingJob) {
		j.Spec.Training.Staleness = intstr.FromInt32(1)
		j.Spec.Checkpoint = &dorylusv1alpha1.CheckpointSpec{IntervalEpochs: every,
			PVC: &dorylusv1alpha1.PVCLocation{ClaimName: claim, Path: name}}
	})
}

// TestGraphServerPodDeleted deletes graph server 1's pod mid-training in an
// asynchronous (staleness 1) job that checkpoints to a PersistentVolume: the
// StatefulSet makes a new pod, and the job must resume from the checkpoint
// and succeed.
func TestGraphServerPodDeleted(t *testing.T) {
	t.Parallel()
	const name = "cora-pod-deleted"
	c := setup(t, name)
	tl := volumeCheckpointedJob(t, c, name, "cora-checkpoints", 10)
	defer tl.close()
	resumes(t, c, tl, deletePod)
}

// resumes disturbs graph server 1 of a checkpointed job with act and checks
// that the job restarts once, with the sample's backoff limit, resumes and
// succeeds.
func resumes(t *testing.T, c client.Client, tl *timeline, act disturbance) {
	t.Helper()
	job, back := disturbGraphServer(t, c, tl.name, act)
	if !back {
		t.Errorf("graph server 1 never came back (status.restarts %d)", job.Status.Restarts)
	}
	if ok, err := succeeded(job); !ok || job.Status.Restarts != 1 {
		t.Fatalf("after the disturbance the checkpointed job did not restart once and resume to Succeeded (%v): %s", err, conditions(job))
	}
	t.Logf("after the disturbance the job resumed and succeeded: %s", conditions(job))
	tl.wait(t, msGone, 120*time.Second)
	deleteJob(t, tl.name, tl.processes())
}

// podMinIO starts a MinIO server for a test that pods reach through a relay
// on the node's address, with a bucket named from prefix and the credentials
// Secret secretName; it returns the server, the bucket and the endpoint
// (http://ADDRESS) pods use.
func podMinIO(t *testing.T, c client.Client, prefix, secretName string) (*minio.Server, string, string) {
	srv := minio.Start(t)
	bucket := srv.Bucket(t, prefix)
	endpoint := "http://" + relayToNode(t, c, strings.TrimPrefix(srv.Endpoint, "http://"))
	credentialsSecret(t, c, secretName, srv.AccessKey, srv.SecretKey)
	return srv, bucket, endpoint
}

// relayToNode relays TCP connections from a free port on the node's
// pod-network address to target (a server on loopback, which pods cannot
// reach) until the test ends, and returns the relay's address.
func relayToNode(t *testing.T, c client.Client, target string) string {
	lis, err := net.Listen("tcp", net.JoinHostPort(nodeAddress(t, c), "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			in, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return lis.Addr().String()
}

// A disturbance acts on a running graph-server pod and returns a check that
// the graph server came back after it.
type disturbance func(t *testing.T, c client.Client, pod *corev1.Pod) (cameBack func(*corev1.Pod) bool)

// killProcess sends SIGKILL to the pod's container process; the kubelet must
// restart the container.
func killProcess(t *testing.T, _ client.Client, pod *corev1.Pod) func(*corev1.Pod) bool {
	if len(pod.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod %s: %d container statuses, want 1", pod.Name, len(pod.Status.ContainerStatuses))
	}
	pid := containerPid(pod.Status.ContainerStatuses[0].ContainerID)
	if pid == 0 || !processAlive(pid) {
		t.Fatalf("pod %s: container %q is not a running dorylus process", pod.Name, pod.Status.ContainerStatuses[0].ContainerID)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to %s's process (pid %d)", pod.Name, pid)
	return func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount > 0
	}
}

// deletePod deletes the pod; the StatefulSet must create it again.
func deletePod(t *testing.T, c client.Client, pod *corev1.Pod) func(*corev1.Pod) bool {
	if err := c.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted pod %s (uid %s)", pod.Name, pod.UID)
	return func(p *corev1.Pod) bool { return p.UID != pod.UID }
}

// disturbGraphServer waits for epoch 5 of job name, disturbs graph server
// 1's pod with act, and returns the job once it has succeeded or failed, and
// whether graph server 1 came back (or the job restarted its servers).
func disturbGraphServer(t *testing.T, c client.Client, name string, act disturbance) (*dorylusv1alpha1.GNNTrainingJob, bool) {
	t.Helper()
	waitJob(t, c, name, "epoch 5", 180*time.Second, atEpoch(5))
	ctx := context.Background()
	key := client.ObjectKey{Namespace: ns, Name: name + "-gs-1"}
	pod := &corev1.Pod{}
	if err := c.Get(ctx, key, pod); err != nil {
		t.Fatal(err)
	}
	at := getJob(ctx, t, c, name).Status.Progress.Epoch
	cameBack := act(t, c, pod)
	t.Logf("graph server 1 disturbed after epoch %d", at)

	back := false
	job := waitJob(t, c, name, "Succeeded or Failed after the disturbance", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		p := &corev1.Pod{}
		if err := c.Get(ctx, key, p); err == nil {
			back = back || cameBack(p)
		}
		back = back || job.Status.Restarts > 0
		return isFinished(job), nil
	})
	return job, back
}

// isFinished reports whether the job has a true Succeeded or Failed
// condition.
func isFinished(job *dorylusv1alpha1.GNNTrainingJob) bool {
	return meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded) ||
		meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionFailed)
}

// TestSuspendResume suspends a running job: its processes must stop, its
// progress stay, and Suspended become true; resumed, it must run to
// Succeeded with Suspended false, reason Resumed.
func TestSuspendResume(t *testing.T) {
	t.Parallel()
	const name = "cora-suspend"
	c := setup(t, name)
	tl := longJob(t, c, name, nil)
	defer tl.close()
	waitJob(t, c, name, "epoch 5", 180*time.Second, atEpoch(5))

	run(t, kubectl, "patch", "-n", ns, "gnnjob/"+name, "--type=merge", "-p", `{"spec":{"runPolicy":{"suspend":true}}}`)
	suspendedAt := time.Now()
	ctx := context.Background()
	job := waitJob(t, c, name, "Suspended with no pods", 120*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if isFinished(job) {
			return false, fmt.Errorf("the job finished while being suspended")
		}
		pods, err := jobPods(ctx, c, name)
		return err == nil && len(pods) == 0 && meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended), nil
	})
	for _, pid := range tl.processes() {
		if processAlive(pid) {
			t.Errorf("suspended, but process %d of the job still runs", pid)
		}
	}
	t.Logf("suspended in %v: %s", time.Since(suspendedAt).Round(10*time.Millisecond), conditions(job))
	if job.Status.Progress == nil {
		t.Fatal("suspended job lost its status.progress")
	}
	epoch := job.Status.Progress.Epoch
	time.Sleep(2 * time.Second)
	if job = getJob(ctx, t, c, name); job == nil || job.Status.Progress == nil || job.Status.Progress.Epoch != epoch {
		t.Fatalf("suspended at epoch %d, progress moved on: %s", epoch, conditions(job))
	}

	run(t, kubectl, "patch", "-n", ns, "gnnjob/"+name, "--type=merge", "-p", `{"spec":{"runPolicy":{"suspend":false}}}`)
	job = waitJob(t, c, name, "Succeeded after resuming", 300*time.Second, succeeded)
	s := meta.FindStatusCondition(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended)
	if s == nil || s.Status != "False" || s.Reason != dorylusv1alpha1.ReasonResumed {
		t.Errorf("after resuming, Suspended condition %+v, want False with reason %s", s, dorylusv1alpha1.ReasonResumed)
	}
	t.Logf("resumed from epoch %d and succeeded: %s", epoch, conditions(job))
	tl.wait(t, msGone, 120*time.Second)
	deleteJob(t, name, tl.processes())
}

// TestSuspendResumeCheckpointed suspends an asynchronous (staleness 1) job
// that checkpoints every 5 epochs to a PersistentVolume once it has a
// checkpoint: resumed, it must continue from its last checkpoint — no epoch
// below it is reported again — and run to Succeeded without a restart.
func TestSuspendResumeCheckpointed(t *testing.T) {
	t.Parallel()
	const name = "cora-suspend-checkpointed"
	c := setup(t, name)
	tl := volumeCheckpointedJob(t, c, name, "cora-suspend-checkpoints", 5)
	defer tl.close()
	waitJob(t, c, name, "a checkpoint of epoch 10 or later", 180*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		p := job.Status.Progress
		return p != nil && p.LastCheckpointEpoch != nil && *p.LastCheckpointEpoch >= 10, nil
	})
	run(t, kubectl, "patch", "-n", ns, "gnnjob/"+name, "--type=merge", "-p", `{"spec":{"runPolicy":{"suspend":true}}}`)
	ctx := context.Background()
	job := waitJob(t, c, name, "Suspended with no pods", 120*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if isFinished(job) {
			return false, fmt.Errorf("the job finished while being suspended")
		}
		pods, err := jobPods(ctx, c, name)
		return err == nil && len(pods) == 0 && meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSuspended), nil
	})
	if job.Status.Progress == nil || job.Status.Progress.LastCheckpointEpoch == nil {
		t.Fatalf("suspended job lost its progress: %s", conditions(job))
	}
	checkpointed := *job.Status.Progress.LastCheckpointEpoch
	t.Logf("suspended at epoch %d with the checkpoint of epoch %d", job.Status.Progress.Epoch, checkpointed)

	run(t, kubectl, "patch", "-n", ns, "gnnjob/"+name, "--type=merge", "-p", `{"spec":{"runPolicy":{"suspend":false}}}`)
	// The progress of the suspended run stays until the resumed one reports,
	// and lags its checkpoints: only the resumed run's reports count.
	suspendedAt := job.Status.Progress.UpdateTime
	lowest := int32(math.MaxInt32)
	job = waitJob(t, c, name, "Succeeded after resuming", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if p := job.Status.Progress; p != nil && p.UpdateTime != nil && suspendedAt != nil && p.UpdateTime.After(suspendedAt.Time) {
			lowest = min(lowest, p.Epoch)
		}
		return succeeded(job)
	})
	if lowest == math.MaxInt32 || lowest < checkpointed || job.Status.Restarts != 0 {
		t.Fatalf("resumed: the lowest epoch reported %d (%d: none), want at least the checkpoint's %d, and restarts %d, want 0: %s", lowest, int32(math.MaxInt32), checkpointed, job.Status.Restarts, conditions(job))
	}
	t.Logf("resumed from the checkpoint of epoch %d and succeeded: %s", checkpointed, conditions(job))
	tl.wait(t, msGone, 120*time.Second)
	deleteJob(t, name, tl.processes())
}
