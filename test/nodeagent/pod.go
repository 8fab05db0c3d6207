package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// Termination: a pod's processes get SIGTERM, then SIGKILL after the pod's
// grace period, at most maxGrace; a restart back-off resets after a
// container ran for backoffReset.
const (
	maxGrace     = 30 * time.Second
	backoffReset = 10 * time.Minute
)

// podWorker runs one pod: its sandbox, its containers and its status.
type podWorker struct {
	a         *agent
	namespace string
	dir       string

	mu         sync.Mutex
	pod        *corev1.Pod
	sb         *sandbox
	mounts     map[string]string // volume name → folder to mount
	startTime  *metav1.Time
	sandboxErr string
	containers []*container
	deleted    bool // the pod object is gone
	finalize   bool // delete the pod object once its processes are gone

	stopOnce    sync.Once
	terminating chan struct{}
	statusPoke  chan struct{}
}

// container is the state of one of the pod's containers.
type container struct {
	spec     corev1.Container
	restarts int32
	state    corev1.ContainerState
	last     corev1.ContainerState
	ready    bool
	started  bool
	id       string // the current or last process, as a container ID
	proc     *os.Process
	exited   chan struct{} // closed when the current process has exited
}

func newPodWorker(a *agent, p *corev1.Pod) *podWorker {
	w := &podWorker{a: a, namespace: p.Namespace, pod: p.DeepCopy(),
		dir:         filepath.Join(a.cfg.stateDir, "pods", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID)),
		terminating: make(chan struct{}), statusPoke: make(chan struct{}, 1)}
	for _, c := range p.Spec.Containers {
		w.containers = append(w.containers, &container{spec: c,
			state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	}
	return w
}

func (w *podWorker) update(p *corev1.Pod) {
	w.mu.Lock()
	w.pod = p.DeepCopy()
	w.mu.Unlock()
}

func (w *podWorker) markDeleted() {
	w.mu.Lock()
	w.deleted = true
	w.mu.Unlock()
}

// terminate stops the pod; with finalize, the pod object is deleted once its
// processes are gone (the API server waits for that after a graceful delete).
func (w *podWorker) terminate(finalize bool) {
	w.mu.Lock()
	w.finalize = w.finalize || finalize
	w.mu.Unlock()
	w.stopOnce.Do(func() { close(w.terminating) })
}

// name is the pod's hostname under its headless Service, once it has an
// address.
func (w *podWorker) name() (podName, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sb == nil || w.pod.Spec.Hostname == "" || w.pod.Spec.Subdomain == "" {
		return podName{}, false
	}
	return podName{namespace: w.namespace, hostname: w.pod.Spec.Hostname, subdomain: w.pod.Spec.Subdomain, addr: w.sb.addr}, true
}

func (w *podWorker) poke() {
	select {
	case w.statusPoke <- struct{}{}:
	default:
	}
}

func (w *podWorker) logf(format string, args ...any) {
	log.Printf("pod %s/%s: %s", w.namespace, w.pod.Name, fmt.Sprintf(format, args...))
}

// run sets up the sandbox, runs the containers until the pod terminates (or,
// without restarts, until they all exit), and tears everything down.
func (w *podWorker) run(ctx context.Context) {
	statusCtx, stopStatus := context.WithCancel(context.WithoutCancel(ctx))
	statusDone := make(chan struct{})
	go func() { w.statusLoop(statusCtx); close(statusDone) }()
	defer func() {
		stopStatus()
		<-statusDone
	}()
	w.poke()
	for {
		err := w.setup(ctx)
		if err == nil {
			break
		}
		w.mu.Lock()
		w.sandboxErr = err.Error()
		w.mu.Unlock()
		w.logf("sandbox: %v", err)
		w.poke()
		select {
		case <-w.terminating:
			w.teardown(ctx)
			return
		case <-ctx.Done():
			w.teardown(ctx)
			return
		case <-time.After(2 * time.Second):
		}
	}
	w.mu.Lock()
	w.sandboxErr = ""
	now := metav1.Now()
	w.startTime = &now
	w.mu.Unlock()
	w.poke()

	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range w.containers {
		wg.Add(1)
		go func() { defer wg.Done(); w.runContainer(cctx, c) }()
	}
	allDone := make(chan struct{})
	go func() { wg.Wait(); close(allDone) }()
	refreshDone := make(chan struct{})
	go func() { w.refreshVolumes(cctx); close(refreshDone) }()
	select {
	case <-w.terminating:
	case <-ctx.Done():
	case <-allDone:
		w.logf("every container has exited; phase is final")
		select {
		case <-w.terminating:
		case <-ctx.Done():
		}
	}
	cancel()
	w.stopAll()
	<-allDone
	<-refreshDone
	w.teardown(ctx)
}

// setup creates the network namespace, the volumes and the hosts file.
func (w *podWorker) setup(ctx context.Context) error {
	w.mu.Lock()
	pod, sb := w.pod.DeepCopy(), w.sb
	w.mu.Unlock()
	for _, c := range pod.Spec.InitContainers {
		return fmt.Errorf("init container %s: the node agent does not run init containers", c.Name)
	}
	if sb == nil {
		var err error
		if sb, err = w.a.net.create(string(pod.UID)); err != nil {
			return err
		}
		w.mu.Lock()
		w.sb = sb
		w.mu.Unlock()
	}
	mounts := map[string]string{}
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		src, _, err := materialize(ctx, v, filepath.Join(w.dir, "volumes", v.Name), w.volumeSource(pod, sb))
		if err != nil {
			return err
		}
		mounts[v.Name] = src
	}
	w.mu.Lock()
	w.mounts = mounts
	w.mu.Unlock()
	if err := os.MkdirAll(filepath.Join(w.dir, "logs"), 0o755); err != nil {
		return err
	}
	return w.a.writeHosts()
}

// refreshVolumes rewrites the volumes that hold expiring tokens, as a kubelet
// does at 80% of their lifetime.
func (w *podWorker) refreshVolumes(ctx context.Context) {
	for {
		w.mu.Lock()
		pod, sb := w.pod.DeepCopy(), w.sb
		w.mu.Unlock()
		next := time.Duration(0)
		for i := range pod.Spec.Volumes {
			v := &pod.Spec.Volumes[i]
			if v.Projected == nil {
				continue
			}
			_, r, err := materialize(ctx, v, filepath.Join(w.dir, "volumes", v.Name), w.volumeSource(pod, sb))
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				w.logf("refresh volume %s: %v", v.Name, err)
				r = 10 * time.Second
			}
			if r > 0 && (next == 0 || r < next) {
				next = r
			}
		}
		if next == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

func (w *podWorker) volumeSource(pod *corev1.Pod, sb *sandbox) volumeSource {
	cs := w.a.cs
	ns := pod.Namespace
	return volumeSource{
		pod: pod,
		configMaps: func(name string) (*corev1.ConfigMap, error) {
			return cs.CoreV1().ConfigMaps(ns).Get(context.TODO(), name, metav1.GetOptions{})
		},
		secrets: func(name string) (*corev1.Secret, error) {
			return cs.CoreV1().Secrets(ns).Get(context.TODO(), name, metav1.GetOptions{})
		},
		token: boundToken(func(ctx context.Context, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
		}, pod),
		env: w.envSource(pod, sb),
	}
}

func (w *podWorker) envSource(pod *corev1.Pod, sb *sandbox) envSource {
	vs := w.volumeSourceLookups(pod.Namespace)
	return envSource{
		pod: pod, podIP: sb.addr.String(), hostIP: w.a.net.gateway.String(),
		apiHost: w.a.net.gateway.String(), apiPort: strconv.Itoa(int(w.a.cfg.apiServer.Port())),
		services: w.a.namespaceServices(pod.Namespace), configMaps: vs.configMaps, secrets: vs.secrets,
	}
}

func (w *podWorker) volumeSourceLookups(ns string) volumeSource {
	cs := w.a.cs
	return volumeSource{
		configMaps: func(name string) (*corev1.ConfigMap, error) {
			return cs.CoreV1().ConfigMaps(ns).Get(context.TODO(), name, metav1.GetOptions{})
		},
		secrets: func(name string) (*corev1.Secret, error) {
			return cs.CoreV1().Secrets(ns).Get(context.TODO(), name, metav1.GetOptions{})
		},
	}
}

// launch describes how container c starts: the binary its image maps to,
// its arguments and environment, and its mounts (volumes and the hosts
// file). argv, when given, replaces the container's command (exec probes).
func (w *podWorker) launch(c *corev1.Container, argv []string) (launchSpec, error) {
	w.mu.Lock()
	pod, sb, mounts := w.pod.DeepCopy(), w.sb, w.mounts
	w.mu.Unlock()
	env, err := containerEnv(c, w.envSource(pod, sb))
	if err != nil {
		return launchSpec{}, err
	}
	if argv == nil {
		if len(c.Command) == 0 {
			return launchSpec{}, fmt.Errorf("container %s sets no command: the node agent does not know image %s's entrypoint", c.Name, c.Image)
		}
		bin, err := w.a.cfg.images.resolve(c.Image, c.Command[0])
		if err != nil {
			return launchSpec{}, fmt.Errorf("container %s: %w", c.Name, err)
		}
		argv = append([]string{bin}, expandAll(append(c.Command[1:], c.Args...), env)...)
	}
	spec := launchSpec{Argv: argv, Env: env, Dir: c.WorkingDir}
	for _, m := range c.VolumeMounts {
		src, ok := mounts[m.Name]
		if !ok {
			return launchSpec{}, fmt.Errorf("container %s mounts volume %s, which the pod does not define", c.Name, m.Name)
		}
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
		}
		spec.Mounts = append(spec.Mounts, mountSpec{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	spec.Mounts = append(spec.Mounts, mountSpec{Source: w.a.hostsPath(pod.Namespace), Target: "/etc/hosts", ReadOnly: true})
	return spec, nil
}

// command is the process that runs spec inside the pod's namespaces.
func (w *podWorker) command(spec launchSpec, name string) (*exec.Cmd, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(w.dir, name+".json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	netns := w.sb.netns
	w.mu.Unlock()
	cmd := exec.Command("ip", "netns", "exec", netns, self, mountExecCommand, path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// runContainer runs c, restarting it by the pod's restartPolicy with a
// doubling back-off, until ctx ends.
func (w *podWorker) runContainer(ctx context.Context, c *container) {
	backoff := w.a.cfg.backoff
	for {
		started := time.Now()
		exitCode, err := w.runOnce(ctx, c)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.setState(c, func() {
				c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}}
			})
			w.logf("container %s: %v", c.spec.Name, err)
		} else {
			w.mu.Lock()
			policy := w.pod.Spec.RestartPolicy
			w.mu.Unlock()
			if policy == corev1.RestartPolicyNever || (policy == corev1.RestartPolicyOnFailure && exitCode == 0) {
				return
			}
			if time.Since(started) > backoffReset {
				backoff = w.a.cfg.backoff
			}
			w.setState(c, func() {
				c.last = c.state
				c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
					Message: fmt.Sprintf("back-off %v restarting failed container %s", backoff, c.spec.Name)}}
			})
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, w.a.cfg.maxBackoff)
		if err == nil {
			w.setState(c, func() { c.restarts++ })
		}
	}
}

// runOnce starts c's process, probes it, and waits for it to exit.
func (w *podWorker) runOnce(ctx context.Context, c *container) (int32, error) {
	spec, err := w.launch(&c.spec, nil)
	if err != nil {
		return 0, err
	}
	cmd, err := w.command(spec, c.spec.Name)
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	restarts := c.restarts
	w.mu.Unlock()
	logPath := filepath.Join(w.dir, "logs", fmt.Sprintf("%s-%d.log", c.spec.Name, restarts))
	logFile, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %v: %w", spec.Argv, err)
	}
	startedAt := metav1.Now()
	id := fmt.Sprintf("nodeagent://%d", cmd.Process.Pid)
	exited := make(chan struct{})
	w.setState(c, func() {
		c.proc, c.exited, c.ready, c.started, c.id = cmd.Process, exited, false, false, id
		c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt}}
	})
	w.logf("container %s started as pid %d: %v (log %s)", c.spec.Name, cmd.Process.Pid, spec.Argv, logPath)
	pctx, stopProbes := context.WithCancel(ctx)
	go w.probe(pctx, c, cmd.Process)
	werr := cmd.Wait()
	stopProbes()
	close(exited)
	code, reason, signal := int32(0), "Completed", int32(0)
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			signal = int32(ws.Signal())
			code = 128 + signal
		} else {
			code = int32(ee.ExitCode())
		}
		reason = "Error"
	} else if werr != nil {
		code, reason = 128, "Error"
	}
	w.setState(c, func() {
		c.proc, c.ready = nil, false
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Signal: signal, Reason: reason, StartedAt: startedAt, FinishedAt: metav1.Now(), ContainerID: id,
		}}
	})
	w.logf("container %s (pid %d) exited: code %d", c.spec.Name, cmd.Process.Pid, code)
	return code, nil
}

func (w *podWorker) setState(c *container, f func()) {
	w.mu.Lock()
	f()
	w.mu.Unlock()
	w.poke()
}

// probe runs c's startup probe, then its readiness and liveness probes,
// until ctx ends; a failed startup or liveness probe kills the process.
func (w *podWorker) probe(ctx context.Context, c *container, proc *os.Process) {
	w.mu.Lock()
	addr := w.sb.addr
	w.mu.Unlock()
	pr := newProber(addr.String(), c.spec.Ports, func(ctx context.Context, argv []string) (int, error) {
		return w.execIn(ctx, c, argv)
	})
	kill := func(why string, err error) {
		w.logf("container %s: %s probe failed (%v): killing it", c.spec.Name, why, err)
		_ = syscall.Kill(-proc.Pid, syscall.SIGKILL)
	}
	if p := c.spec.StartupProbe; p != nil {
		ok := watchProbe(ctx, pr, p, false, func(ok bool, err error) bool {
			if !ok {
				kill("startup", err)
			}
			return true
		})
		if !ok {
			return
		}
	}
	w.setState(c, func() { c.started = true })
	if p := c.spec.LivenessProbe; p != nil {
		go watchProbe(ctx, pr, p, true, func(ok bool, err error) bool {
			if !ok {
				kill("liveness", err)
				return true
			}
			return false
		})
	}
	if p := c.spec.ReadinessProbe; p != nil {
		watchProbe(ctx, pr, p, false, func(ok bool, err error) bool {
			w.setState(c, func() { c.ready = ok })
			if !ok {
				w.logf("container %s: not ready: %v", c.spec.Name, err)
			}
			return false
		})
		return
	}
	w.setState(c, func() { c.ready = true })
}

// watchProbe runs p every period after its initial delay and calls report
// when the thresholded result differs from the last one reported (initially
// initial); it stops when report returns true, and returns the last result.
func watchProbe(ctx context.Context, pr *prober, p *corev1.Probe, initial bool, report func(ok bool, err error) (stop bool)) bool {
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	if p.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	succ, fail := max(p.SuccessThreshold, 1), p.FailureThreshold
	if fail == 0 {
		fail = 3
	}
	select {
	case <-ctx.Done():
		return initial
	case <-time.After(time.Duration(p.InitialDelaySeconds) * time.Second):
	}
	state, okRun, failRun := initial, int32(0), int32(0)
	for {
		err := pr.probe(ctx, p)
		if ctx.Err() != nil {
			return state
		}
		if err == nil {
			okRun, failRun = okRun+1, 0
		} else {
			okRun, failRun = 0, failRun+1
		}
		switch {
		case !state && okRun >= succ:
			state = true
			if report(true, nil) {
				return true
			}
		case state && failRun >= fail, !state && failRun == fail:
			state = false
			if report(false, err) {
				return false
			}
		}
		select {
		case <-ctx.Done():
			return state
		case <-time.After(period):
		}
	}
}

// execIn runs argv inside c's namespaces and mounts (exec probes).
func (w *podWorker) execIn(ctx context.Context, c *container, argv []string) (int, error) {
	spec, err := w.launch(&c.spec, argv)
	if err != nil {
		return 0, err
	}
	cmd, err := w.command(spec, c.spec.Name+"-exec")
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done //nolint:errcheck // killed: its exit status adds nothing to ctx's error
		return 0, ctx.Err()
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
}

// stopAll sends SIGTERM to every running process group, and SIGKILL to what
// is left after the grace period.
func (w *podWorker) stopAll() {
	w.mu.Lock()
	grace := maxGrace
	if g := w.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = min(grace, time.Duration(*g)*time.Second)
	}
	if g := w.pod.DeletionGracePeriodSeconds; g != nil {
		grace = min(grace, time.Duration(*g)*time.Second)
	}
	var procs []*os.Process
	var exits []chan struct{}
	for _, c := range w.containers {
		if c.proc != nil {
			procs, exits = append(procs, c.proc), append(exits, c.exited)
		}
	}
	w.mu.Unlock()
	for _, p := range procs {
		_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for i, e := range exits {
		select {
		case <-e:
		case <-deadline:
			for _, p := range procs[i:] {
				_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
			}
			<-e
		}
	}
}

// teardown removes the network namespace and the volumes (logs stay), and
// completes a graceful deletion.
func (w *podWorker) teardown(ctx context.Context) {
	w.mu.Lock()
	sb, pod, finalize, deleted := w.sb, w.pod, w.finalize, w.deleted
	w.sb = nil
	w.mu.Unlock()
	if sb != nil {
		w.a.net.destroy(sb)
	}
	if err := os.RemoveAll(filepath.Join(w.dir, "volumes")); err != nil {
		w.logf("remove volumes: %v", err)
	}
	if finalize && !deleted {
		w.a.finalizeDelete(context.WithoutCancel(ctx), pod)
	}
	w.logf("stopped")
}

// statusLoop writes the pod's status whenever it changes, until ctx ends;
// then it writes it once more.
func (w *podWorker) statusLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			w.pushStatus()
			return
		case <-w.statusPoke:
			w.pushStatus()
		}
	}
}

func (w *podWorker) pushStatus() {
	w.mu.Lock()
	if w.deleted {
		w.mu.Unlock()
		return
	}
	view := w.viewLocked()
	name := w.pod.Name
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pods := w.a.cs.CoreV1().Pods(w.namespace)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != view.uid {
			return nil
		}
		cur.Status = podStatus(cur, view, metav1.Now())
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	// The Node authorizer answers Forbidden for a pod no longer bound to
	// this node: a deleted one, like NotFound.
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
		w.logf("status: %v", err)
	}
}

// viewLocked snapshots what podStatus needs; w.mu is held.
func (w *podWorker) viewLocked() statusView {
	v := statusView{uid: w.pod.UID, hostIP: w.a.net.gateway.String(), startTime: w.startTime,
		sandboxErr: w.sandboxErr, policy: w.pod.Spec.RestartPolicy}
	if w.sb != nil {
		v.podIP = w.sb.addr
	}
	for _, c := range w.containers {
		v.containers = append(v.containers, corev1.ContainerStatus{
			Name: c.spec.Name, Image: c.spec.Image, ImageID: c.spec.Image, State: c.state, LastTerminationState: c.last,
			Ready: c.ready, Started: &c.started, RestartCount: c.restarts, ContainerID: c.id,
		})
	}
	return v
}
