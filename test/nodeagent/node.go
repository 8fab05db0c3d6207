package main

import (
	"context"
	"fmt"
	"log"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Heartbeats: the lease is renewed every leaseRenew and lasts leaseSeconds;
// the Ready condition's heartbeat is written every statusEvery (the node
// lifecycle controller's defaults allow 40 s without either).
const (
	leaseRenew   = 10 * time.Second
	leaseSeconds = 40
	statusEvery  = 20 * time.Second
)

// kubeletVersion is what the Node reports as its kubelet.
const kubeletVersion = "v1.37.2-nodeagent"

// registerNode creates the Node (or adopts an existing one of that name) and
// writes its Ready status.
func (a *agent) registerNode(ctx context.Context) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a.cfg.nodeName, Labels: map[string]string{
		corev1.LabelHostname: a.cfg.nodeName, corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH,
	}}}
	if _, err := a.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register Node %s: %w", a.cfg.nodeName, err)
	}
	return a.updateNodeStatus(ctx)
}

// heartbeat renews the node's lease and status until ctx ends.
func (a *agent) heartbeat(ctx context.Context) {
	lease, status := time.NewTicker(leaseRenew), time.NewTicker(statusEvery)
	defer lease.Stop()
	defer status.Stop()
	a.renewLease(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-lease.C:
			a.renewLease(ctx)
		case <-status.C:
			if err := a.updateNodeStatus(ctx); err != nil && ctx.Err() == nil {
				log.Printf("node status: %v", err)
			}
		}
	}
}

func (a *agent) updateNodeStatus(ctx context.Context) error {
	node, err := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	resources := corev1.ResourceList{
		corev1.ResourceCPU: a.cfg.cpu, corev1.ResourceMemory: a.cfg.memory,
		corev1.ResourcePods: *resource.NewQuantity(a.cfg.maxPods, resource.DecimalSI),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for _, old := range node.Status.Conditions {
			if old.Type == t && old.Status == s {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		return c
	}
	node.Status.Capacity, node.Status.Allocatable = resources, resources
	node.Status.Conditions = []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "node agent: no memory pressure accounting"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "node agent: no disk pressure accounting"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "node agent: no PID pressure accounting"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "node agent is posting ready status"),
	}
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: a.net.gateway.String()},
		{Type: corev1.NodeHostName, Address: a.cfg.nodeName},
	}
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		KubeletVersion: kubeletVersion, OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
		ContainerRuntimeVersion: "nodeagent://processes",
	}
	_, err = a.cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

func (a *agent) renewLease(ctx context.Context) {
	leases := a.cs.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, a.cfg.nodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: a.cfg.nodeName, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(a.cfg.nodeName), LeaseDurationSeconds: ptr.To[int32](leaseSeconds), RenewTime: &now,
			},
		}
		if node, nerr := a.cs.CoreV1().Nodes().Get(ctx, a.cfg.nodeName, metav1.GetOptions{}); nerr == nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
	} else if err == nil {
		l.Spec.RenewTime = &now
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil && ctx.Err() == nil {
		log.Printf("node lease: %v", err)
	}
}
