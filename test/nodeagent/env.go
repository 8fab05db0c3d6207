package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// defaultPath is the PATH of a container whose env sets none (the
// distroless base's).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// envSource is what container environments are resolved against.
type envSource struct {
	pod        *corev1.Pod
	podIP      string
	hostIP     string
	apiHost    string
	apiPort    string
	services   []*corev1.Service                            // of the pod's namespace, for service links
	configMaps func(name string) (*corev1.ConfigMap, error) // of the pod's namespace
	secrets    func(name string) (*corev1.Secret, error)
}

// containerEnv is the environment of container c, as a kubelet builds it:
// service links (when enabled) and KUBERNETES_SERVICE_*, envFrom, then env,
// each value with $(VAR) references to earlier variables expanded.
func containerEnv(c *corev1.Container, src envSource) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for k, v := range serviceEnv(src) {
		set(k, v)
	}
	sort.Strings(order)
	for _, from := range c.EnvFrom {
		data, err := envFromData(from, src)
		if err != nil {
			return nil, fmt.Errorf("container %s envFrom: %w", c.Name, err)
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(from.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		v := expand(e.Value, vars)
		if e.ValueFrom != nil {
			var err error
			if v, err = envValueFrom(e.ValueFrom, src); err != nil {
				return nil, fmt.Errorf("container %s env %s: %w", c.Name, e.Name, err)
			}
		}
		set(e.Name, v)
	}
	if _, ok := vars["PATH"]; !ok {
		set("PATH", defaultPath)
	}
	if _, ok := vars["HOSTNAME"]; !ok {
		set("HOSTNAME", podHostname(src.pod))
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// podHostname is the pod's hostname: spec.hostname, else its name.
func podHostname(p *corev1.Pod) string {
	if p.Spec.Hostname != "" {
		return p.Spec.Hostname
	}
	return p.Name
}

// serviceEnv is KUBERNETES_SERVICE_HOST/PORT, pointing at the API server,
// and with enableServiceLinks the Docker-link variables of every Service of
// the namespace that has a cluster IP.
func serviceEnv(src envSource) map[string]string {
	env := map[string]string{
		"KUBERNETES_SERVICE_HOST": src.apiHost, "KUBERNETES_SERVICE_PORT": src.apiPort,
		"KUBERNETES_SERVICE_PORT_HTTPS": src.apiPort,
	}
	if l := src.pod.Spec.EnableServiceLinks; l != nil && !*l {
		return env
	}
	for _, s := range src.services {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == corev1.ClusterIPNone || (s.Namespace == "default" && s.Name == "kubernetes") {
			continue
		}
		name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
		env[name+"_SERVICE_HOST"] = s.Spec.ClusterIP
		for i, p := range s.Spec.Ports {
			port := strconv.Itoa(int(p.Port))
			if i == 0 {
				env[name+"_SERVICE_PORT"] = port
			}
			if p.Name != "" {
				env[name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = port
			}
		}
	}
	return env
}

func envFromData(from corev1.EnvFromSource, src envSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := src.configMaps(from.ConfigMapRef.Name)
		if err != nil {
			if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				return nil, nil
			}
			return nil, err
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := src.secrets(from.SecretRef.Name)
		if err != nil {
			if from.SecretRef.Optional != nil && *from.SecretRef.Optional {
				return nil, nil
			}
			return nil, err
		}
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("neither configMapRef nor secretRef")
}

func envValueFrom(from *corev1.EnvVarSource, src envSource) (string, error) {
	switch {
	case from.FieldRef != nil:
		return podField(src, from.FieldRef.FieldPath)
	case from.ConfigMapKeyRef != nil:
		r := from.ConfigMapKeyRef
		cm, err := src.configMaps(r.Name)
		if err == nil {
			if v, ok := cm.Data[r.Key]; ok {
				return v, nil
			}
			err = fmt.Errorf("ConfigMap %s has no key %q", r.Name, r.Key)
		}
		if r.Optional != nil && *r.Optional {
			return "", nil
		}
		return "", err
	case from.SecretKeyRef != nil:
		r := from.SecretKeyRef
		s, err := src.secrets(r.Name)
		if err == nil {
			if v, ok := s.Data[r.Key]; ok {
				return string(v), nil
			}
			err = fmt.Errorf("secret %s has no key %q", r.Name, r.Key)
		}
		if r.Optional != nil && *r.Optional {
			return "", nil
		}
		return "", err
	}
	return "", fmt.Errorf("valueFrom: only fieldRef, configMapKeyRef and secretKeyRef are supported")
}

// podField is the downward-API value of fieldPath.
func podField(src envSource, fieldPath string) (string, error) {
	p := src.pod
	switch fieldPath {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return src.podIP, nil
	case "status.hostIP", "status.hostIPs":
		return src.hostIP, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": p.Labels, "metadata.annotations": p.Annotations} {
		if key, ok := strings.CutPrefix(fieldPath, prefix+"['"); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("fieldRef %q is not supported", fieldPath)
}

// expand replaces $(NAME) by vars[NAME] where NAME is defined, keeps an
// undefined $(NAME) as written, and turns $$ into $ — Kubernetes' rules.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// expandAll expands each of args against the container's environment.
func expandAll(args []string, env []string) []string {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, vars)
	}
	return out
}
