//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dorylusv1alpha1 "github.com/dorylus-gnn/dorylus/api/v1alpha1"
)

// Milestones of a job's life, in the order they happen, as a timeline
// records them.
const (
	msApplied   = "applied"
	msCreated   = "pods created"   // every server pod exists (operator, StatefulSet and Deployment controllers)
	msScheduled = "pods scheduled" // every server pod is bound to the node (scheduler)
	msStarted   = "processes started"
	msReady     = "servers ready" // every server pod is Ready (processes up, dataset loaded)
	msFirst     = "first epoch"   // graph server 0 reported epoch 1 or later
	msSucceeded = "succeeded"
	msGone      = "pods gone" // the job finished, every server pod is deleted (scaled to zero) and its processes exited
)

var milestones = []string{msApplied, msCreated, msScheduled, msStarted, msReady, msFirst, msSucceeded, msGone}

// timeline polls a job and its pods every 100 ms and records when each
// milestone was first seen, and the process ids of the pods' containers.
type timeline struct {
	name string
	pods int // server pods the job runs

	mu   sync.Mutex
	at   map[string]time.Time
	pids map[int]bool
	stop chan struct{}
	done chan struct{}
}

// watchJob starts a timeline of job name, which runs pods server pods, at
// applied (the time of kubectl apply).
func watchJob(c client.Client, name string, pods int, applied time.Time) *timeline {
	tl := &timeline{name: name, pods: pods, at: map[string]time.Time{msApplied: applied}, pids: map[int]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go tl.poll(c)
	return tl
}

func (tl *timeline) poll(c client.Client) {
	defer close(tl.done)
	ctx := context.Background()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		tl.observe(ctx, c)
		select {
		case <-tl.stop:
			return
		case <-tick.C:
		}
	}
}

func (tl *timeline) observe(ctx context.Context, c client.Client) {
	now := time.Now()
	job := &dorylusv1alpha1.GNNTrainingJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: tl.name}, job); err != nil {
		return
	}
	pods, err := jobPods(ctx, c, tl.name)
	if err != nil {
		return
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	mark := func(ms string, ok bool) {
		if _, seen := tl.at[ms]; ok && !seen {
			tl.at[ms] = now
		}
	}
	var bound, started, ready int
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			bound++
		}
		running := len(p.Status.ContainerStatuses) > 0
		for _, cs := range p.Status.ContainerStatuses {
			running = running && cs.State.Running != nil
			if pid := containerPid(cs.ContainerID); pid > 0 {
				tl.pids[pid] = true
			}
		}
		if running {
			started++
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	mark(msCreated, len(pods) >= tl.pods)
	mark(msScheduled, bound >= tl.pods)
	mark(msStarted, started >= tl.pods)
	mark(msReady, ready >= tl.pods)
	mark(msFirst, job.Status.Progress != nil && job.Status.Progress.Epoch >= 1)
	mark(msSucceeded, meta.IsStatusConditionTrue(job.Status.Conditions, dorylusv1alpha1.ConditionSucceeded))
	if isFinished(job) && len(pods) == 0 {
		alive := false
		for pid := range tl.pids {
			alive = alive || processAlive(pid)
		}
		mark(msGone, !alive)
	}
}

// wait waits until milestone ms is seen, or fails the test after timeout.
func (tl *timeline) wait(t *testing.T, ms string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		tl.mu.Lock()
		_, ok := tl.at[ms]
		tl.mu.Unlock()
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("gnnjob %s: %s not seen %v after kubectl apply; seen: %s", tl.name, ms, timeout, tl.report())
}

// close stops polling.
func (tl *timeline) close() {
	close(tl.stop)
	<-tl.done
}

// processes are the container process ids seen.
func (tl *timeline) processes() []int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var out []int
	for pid := range tl.pids {
		out = append(out, pid)
	}
	return out
}

// report is the time of each milestone seen, from kubectl apply, and the
// split of apply→Succeeded: scheduling (apply to every pod bound: the
// operator, the workload controllers and the scheduler), process start (to
// the first epoch: processes launched, datasets loaded, peers connected),
// training (first epoch to Succeeded) and teardown (Succeeded to every pod
// deleted and its processes exited).
func (tl *timeline) report() string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	var b strings.Builder
	applied := tl.at[msApplied]
	fmt.Fprintf(&b, "%s:", tl.name)
	for _, ms := range milestones[1:] {
		if at, ok := tl.at[ms]; ok {
			fmt.Fprintf(&b, " %s +%.2fs;", ms, at.Sub(applied).Seconds())
		} else {
			fmt.Fprintf(&b, " %s -;", ms)
		}
	}
	span := func(from, to string) string {
		a, ok1 := tl.at[from]
		z, ok2 := tl.at[to]
		if !ok1 || !ok2 {
			return "-"
		}
		return fmt.Sprintf("%.2fs", z.Sub(a).Seconds())
	}
	fmt.Fprintf(&b, " | apply→Succeeded %s = scheduling %s + process start %s + training %s; teardown %s",
		span(msApplied, msSucceeded), span(msApplied, msScheduled), span(msScheduled, msFirst), span(msFirst, msSucceeded), span(msSucceeded, msGone))
	return b.String()
}
