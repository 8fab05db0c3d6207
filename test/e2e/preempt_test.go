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
// it — the new parameter server says it resumed from a checkpoint of at least the epoch reached
// at the deletion, and no epoch below that is reported again (a resume from nothing would report
// epoch 1 again) — and the job must succeed within 1 point of `dorylus train` with the same
// settings.
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

	// The new parameter server resumes from the checkpoint its predecessor
	// saved when the run drained: at least the epoch reached, which no
	// periodic checkpoint (every 200) had saved.
	var gone time.Duration
	resumed := 0
	waitJob(t, c, name, "its new parameter server resuming from the checkpoint", 300*time.Second, func(*dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if gone == 0 && !anyPod(ctx, c, name, old) {
			gone = time.Since(deleted)
		}
		e, ok := paramServerResumedFrom(ctx, c, name, old)
		resumed = e
		return ok, nil
	})
	if int32(resumed) < reached {
		t.Fatalf("deleted after epoch %d, the job resumed from the checkpoint of epoch %d: want at least %d", reached, resumed, reached)
	}
	// What graph server 0 reports after the resume is never below it (a run
	// started over would report epoch 1 again).
	lowest := int32(-1)
	job := waitJob(t, c, name, "Succeeded after its pods were deleted", 300*time.Second, func(job *dorylusv1alpha1.GNNTrainingJob) (bool, error) {
		if p := job.Status.Progress; p != nil && p.UpdateTime != nil && p.UpdateTime.After(deleted) && (lowest < 0 || p.Epoch < lowest) {
			lowest = p.Epoch
		}
		return succeeded(job)
	})
	if lowest < int32(resumed) {
		t.Errorf("after the resume from epoch %d the lowest epoch reported is %d (-1: none): %s", resumed, lowest, conditions(job))
	}
	t.Logf("pods deleted after epoch %d: gone in %v; resumed from the checkpoint of epoch %d (restarts %d): %s",
		reached, gone.Round(10*time.Millisecond), resumed, job.Status.Restarts, conditions(job))
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
