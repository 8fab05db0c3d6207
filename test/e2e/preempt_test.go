//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
	"github.com/dorylus-gnn/dorylus/controllers"
)

// TestAllPodsDeletedResumesFromTheEpochReached deletes every server pod of a running
// asynchronous (S=1) job that checkpoints every 200 epochs to a PersistentVolume, with the pods'
// grace period, once it has reported epoch 50, before any periodic checkpoint: the servers drain,
// the parameter servers save the epoch drained to, and the pods that come back must resume from
// it — no epoch below the one reached at the kill is reported again (a resume from nothing
// would report epoch 1 again) and the newest checkpoint the job shows is at least that epoch —
// and the job must succeed within 1 point of `dorylus train` with the same settings.
func TestAllPodsDeletedResumesFromTheEpochReached(t *testing.T) {
	t.Parallel()
	const name = "cora-preempted"
	c := setup(t, name)
	tl := volumeCheckpointedJob(t, c, name, "cora-preempt-checkpoints", 200)
	defer tl.close()
	waitJob(t, c, name, "epoch 50", 180*time.Second, atEpoch(50))
	ctx := context.Background()
	pods, err := jobPods(ctx, c, name)
	if err != nil {
		t.Fatal(err)
	}
	reached := getJob(ctx, t, c, name).Status.Progress.Epoch
	deleted := time.Now()
	old := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if r := p.Labels[controllers.LabelRole]; r != controllers.RoleGraphServer && r != controllers.RoleParamServer {
			continue
		}
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		old[string(p.UID)] = true
	}
	t.Logf("deleted the job's %d server pods after epoch %d", len(old), reached)

	var gone time.Duration
	lowest, checkpointed := int32(-1), int32(0)
	job := waitJob(t, c, name, "Succeeded after its pods were deleted", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if p := job.Status.Progress; p != nil && p.UpdateTime != nil && p.UpdateTime.After(deleted) && (lowest < 0 || p.Epoch < lowest) {
			lowest = p.Epoch
		}
		if p := job.Status.Progress; p != nil && p.LastCheckpointEpoch != nil {
			checkpointed = max(checkpointed, *p.LastCheckpointEpoch)
		}
		if gone == 0 && !anyPod(ctx, c, name, old) {
			gone = time.Since(deleted)
		}
		return succeeded(job)
	})
	if lowest < reached || checkpointed < reached {
		t.Errorf("after the deletion at epoch %d: the lowest epoch reported %d (-1: none), the newest checkpoint %d; want both at least %d: %s",
			reached, lowest, checkpointed, reached, conditions(job))
	}
	t.Logf("pods deleted after epoch %d: gone in %v; resumed from the checkpoint of epoch %d (restarts %d): %s",
		reached, gone.Round(10*time.Millisecond), checkpointed, job.Status.Restarts, conditions(job))
	tl.wait(t, msGone, 120*time.Second)
	jobAccuracy(t, c, name, trainAccuracy(t, trainArgs(job, "cora")...))
	deleteJob(t, name, tl.processes())
}

// anyPod reports whether a pod of job name with one of the UIDs in uids still exists.
func anyPod(ctx context.Context, c client.Client, name string, uids map[string]bool) bool {
	pods, err := jobPods(ctx, c, name)
	if err != nil {
		return true
	}
	for _, p := range pods {
		if uids[string(p.UID)] {
			return true
		}
	}
	return false
}
