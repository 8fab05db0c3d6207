package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// clusterDomain is the DNS suffix of Service names.
const clusterDomain = "cluster.local"

// podName is a pod the agent runs that has a hostname under a headless
// Service (spec.hostname and spec.subdomain), known before the endpoint
// controllers publish it.
type podName struct {
	namespace, hostname, subdomain string
	addr                           netip.Addr
}

// hostsFile is the /etc/hosts of the pods of namespace: localhost, the API
// server as the kubernetes Service at gateway, every Service by the addresses
// of its EndpointSlices (there is no kube-proxy, so a ClusterIP Service's
// name resolves to its endpoints, not to its cluster IP), every endpoint with
// a hostname under its Service, and the agent's own named pods. Names of
// other namespaces are written in full (name.ns, name.ns.svc,
// name.ns.svc.cluster.local), those of namespace also as the bare name. The
// output is sorted, so equal inputs give equal files.
func hostsFile(namespace string, gateway netip.Addr, services []*corev1.Service, eps []*discoveryv1.EndpointSlice, pods []podName) []byte {
	lines := map[string][]string{} // address → names
	add := func(addr string, ns string, parts ...string) {
		base := strings.Join(parts, ".")
		names := []string{base + "." + ns + ".svc", base + "." + ns + ".svc." + clusterDomain, base + "." + ns}
		if ns == namespace {
			names = append(names, base)
		}
		lines[addr] = append(lines[addr], names...)
	}
	add(gateway.String(), "default", "kubernetes")

	type key struct{ ns, name string }
	svcs := map[key]*corev1.Service{}
	for _, s := range services {
		svcs[key{s.Namespace, s.Name}] = s
	}
	for _, es := range eps {
		svcName := es.Labels[discoveryv1.LabelServiceName]
		svc := svcs[key{es.Namespace, svcName}]
		if svc == nil || es.AddressType != discoveryv1.AddressTypeIPv4 || (svc.Namespace == "default" && svc.Name == "kubernetes") {
			continue
		}
		for _, ep := range es.Endpoints {
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if len(ep.Addresses) == 0 || (!ready && !svc.Spec.PublishNotReadyAddresses) {
				continue
			}
			addr := ep.Addresses[0]
			add(addr, svc.Namespace, svc.Name)
			if ep.Hostname != nil && *ep.Hostname != "" {
				add(addr, svc.Namespace, *ep.Hostname, svc.Name)
			}
		}
	}
	for _, p := range pods {
		if svc := svcs[key{p.namespace, p.subdomain}]; svc != nil && svc.Spec.ClusterIP == corev1.ClusterIPNone {
			add(p.addr.String(), p.namespace, p.hostname, p.subdomain)
		}
	}

	var b bytes.Buffer
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	addrs := make([]string, 0, len(lines))
	for a := range lines {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, a := range addrs {
		names := lines[a]
		slices.Sort(names)
		names = slices.Compact(names)
		fmt.Fprintf(&b, "%s\t%s\n", a, strings.Join(names, " "))
	}
	return b.Bytes()
}
