package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// prober runs one container's probes against the pod's address.
type prober struct {
	podIP string
	ports []corev1.ContainerPort
	// exec runs a command inside the container's namespaces and returns its
	// exit code.
	exec func(ctx context.Context, argv []string) (int, error)
	http *http.Client
}

func newProber(podIP string, ports []corev1.ContainerPort, exec func(context.Context, []string) (int, error)) *prober {
	return &prober{podIP: podIP, ports: ports, exec: exec, http: &http.Client{
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// probe runs p once: nil means success.
func (pr *prober) probe(ctx context.Context, p *corev1.Probe) error {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch h := p.ProbeHandler; {
	case h.GRPC != nil:
		return pr.grpc(ctx, h.GRPC)
	case h.HTTPGet != nil:
		return pr.httpGet(ctx, h.HTTPGet)
	case h.TCPSocket != nil:
		port, err := pr.port(h.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := h.TCPSocket.Host
		if host == "" {
			host = pr.podIP
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return c.Close()
	case h.Exec != nil:
		code, err := pr.exec(ctx, h.Exec.Command)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("exec %v: exit code %d", h.Exec.Command, code)
		}
		return nil
	}
	return fmt.Errorf("probe has no handler")
}

func (pr *prober) grpc(ctx context.Context, g *corev1.GRPCAction) error {
	conn, err := grpc.NewClient("passthrough:///"+net.JoinHostPort(pr.podIP, strconv.Itoa(int(g.Port))),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	service := ""
	if g.Service != nil {
		service = *g.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("gRPC health on port %d: %w", g.Port, err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("gRPC health on port %d: %s", g.Port, resp.Status)
	}
	return nil
}

func (pr *prober) httpGet(ctx context.Context, g *corev1.HTTPGetAction) error {
	port, err := pr.port(g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = pr.podIP
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port)), Path: g.Path}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := pr.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("GET %s: %s", u.String(), resp.Status)
	}
	return nil
}

// port resolves a probe's port: a number, or the name of a container port.
func (pr *prober) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range pr.ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("probe port %q: no container port has that name", p.StrVal)
}
