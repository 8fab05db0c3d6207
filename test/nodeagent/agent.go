package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// agent runs the pods bound to one node.
type agent struct {
	cfg config
	cs  kubernetes.Interface
	net *network

	services  corelisters.ServiceLister
	endpoints discoverylisters.EndpointSliceLister

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	hosts   map[string][]byte // namespace → content written
	wg      sync.WaitGroup

	hostsPoke chan struct{}
}

func newAgent(cfg config, cs kubernetes.Interface, n *network) (*agent, error) {
	for _, d := range []string{"pods", "hosts"} {
		if err := os.MkdirAll(filepath.Join(cfg.stateDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	return &agent{cfg: cfg, cs: cs, net: n, workers: map[types.UID]*podWorker{}, hosts: map[string][]byte{},
		hostsPoke: make(chan struct{}, 1)}, nil
}

// run registers the node, watches its pods, Services and EndpointSlices, and
// serves until ctx ends; then it stops every pod.
func (a *agent) run(ctx context.Context) error {
	if err := a.registerNode(ctx); err != nil {
		return err
	}
	go a.heartbeat(ctx)

	shared := informers.NewSharedInformerFactory(a.cs, 0)
	a.services = shared.Core().V1().Services().Lister()
	a.endpoints = shared.Discovery().V1().EndpointSlices().Lister()
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { a.pokeHosts() }, UpdateFunc: func(any, any) { a.pokeHosts() }, DeleteFunc: func(any) { a.pokeHosts() },
	}
	if _, err := shared.Core().V1().Services().Informer().AddEventHandler(poke); err != nil {
		return err
	}
	if _, err := shared.Discovery().V1().EndpointSlices().Informer().AddEventHandler(poke); err != nil {
		return err
	}
	mine := informers.NewSharedInformerFactoryWithOptions(a.cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.cfg.nodeName).String()
	}))
	pods := mine.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { a.syncPod(ctx, o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) { a.syncPod(ctx, o.(*corev1.Pod)) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				a.podGone(p.UID)
			}
		},
	}); err != nil {
		return err
	}
	shared.Start(ctx.Done())
	shared.WaitForCacheSync(ctx.Done())
	go a.hostsLoop(ctx)
	mine.Start(ctx.Done())
	log.Printf("node %s ready: pods on %s via bridge %s", a.cfg.nodeName, a.cfg.podCIDR, a.cfg.bridge)
	<-ctx.Done()
	mine.Shutdown()
	a.mu.Lock()
	for _, w := range a.workers {
		w.terminate(false)
	}
	a.mu.Unlock()
	a.wg.Wait()
	shared.Shutdown()
	return ctx.Err()
}

// syncPod starts a worker for a new pod, or passes the newest object to its
// worker; a deleted pod's worker stops its processes and completes the
// deletion.
func (a *agent) syncPod(ctx context.Context, p *corev1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.workers[p.UID]
	if w == nil {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			if p.DeletionTimestamp != nil {
				go a.finalizeDelete(context.WithoutCancel(ctx), p)
			}
			return
		}
		w = newPodWorker(a, p)
		a.workers[p.UID] = w
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			w.run(ctx)
			a.mu.Lock()
			delete(a.workers, p.UID)
			a.mu.Unlock()
			a.pokeHosts()
		}()
		return
	}
	w.update(p)
	if p.DeletionTimestamp != nil {
		w.terminate(true)
	}
}

// podGone stops the worker of a pod whose object no longer exists.
func (a *agent) podGone(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.workers[uid]; w != nil {
		w.markDeleted()
		w.terminate(false)
	}
}

// finalizeDelete removes a pod whose processes are gone, as a kubelet does
// once a pod is terminated: a delete with no grace period, for this UID only.
func (a *agent) finalizeDelete(ctx context.Context, p *corev1.Pod) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := a.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(p.UID)),
	})
	if err != nil && !strings.Contains(err.Error(), "not found") {
		log.Printf("pod %s/%s: final delete: %v", p.Namespace, p.Name, err)
	}
}

func (a *agent) pokeHosts() {
	select {
	case a.hostsPoke <- struct{}{}:
	default:
	}
}

// hostsLoop rewrites the hosts files when Services, EndpointSlices or the
// agent's pods change, at most every 100 ms.
func (a *agent) hostsLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.hostsPoke:
		}
		if err := a.writeHosts(); err != nil {
			log.Printf("hosts files: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// hostsPath is the hosts file of the pods of namespace.
func (a *agent) hostsPath(namespace string) string {
	return filepath.Join(a.cfg.stateDir, "hosts", namespace)
}

// writeHosts writes the hosts file of every namespace that has pods here. A
// file is rewritten in place, since pods have it bind-mounted.
func (a *agent) writeHosts() error {
	svcs, err := a.services.List(labels.Everything())
	if err != nil {
		return err
	}
	eps, err := a.endpoints.List(labels.Everything())
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var named []podName
	namespaces := map[string]bool{}
	for _, w := range a.workers {
		if n, ok := w.name(); ok {
			named = append(named, n)
		}
		namespaces[w.namespace] = true
	}
	for ns := range namespaces {
		content := hostsFile(ns, a.net.gateway, svcs, eps, named)
		if bytes.Equal(a.hosts[ns], content) {
			continue
		}
		if err := os.WriteFile(a.hostsPath(ns), content, 0o644); err != nil {
			return fmt.Errorf("hosts of namespace %s: %w", ns, err)
		}
		a.hosts[ns] = content
	}
	return nil
}

// services of namespace, for service-link variables.
func (a *agent) namespaceServices(namespace string) []*corev1.Service {
	s, _ := a.services.Services(namespace).List(labels.Everything())
	return s
}
