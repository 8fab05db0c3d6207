package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
)

// volumeSource is what pod volumes are materialized from.
type volumeSource struct {
	pod        *corev1.Pod
	configMaps func(name string) (*corev1.ConfigMap, error)
	secrets    func(name string) (*corev1.Secret, error)
	// token returns a token of the pod's ServiceAccount bound to the pod.
	token func(ctx context.Context, audience string, seconds int64) (*authenticationv1.TokenRequest, error)
	env   envSource
}

// materialize writes volume v of the pod into dir, and returns when its
// content should be written again (zero: never; projected tokens expire).
// A host path is not copied: the returned path is the one to mount.
func materialize(ctx context.Context, v *corev1.Volume, dir string, src volumeSource) (mountSource string, refresh time.Duration, err error) {
	files := map[string][]byte{}
	modes := map[string]os.FileMode{}
	put := func(path string, data []byte, mode *int32, def *int32) {
		files[path] = data
		modes[path] = fileMode(mode, def, 0o644)
	}
	switch {
	case v.EmptyDir != nil:
		return dir, 0, os.MkdirAll(dir, 0o777)
	case v.HostPath != nil:
		return v.HostPath.Path, 0, nil
	case v.ConfigMap != nil:
		if err := configMapFiles(v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, v.ConfigMap.DefaultMode, src, put); err != nil {
			return "", 0, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	case v.Secret != nil:
		if err := secretFiles(v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, v.Secret.DefaultMode, src, put); err != nil {
			return "", 0, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	case v.DownwardAPI != nil:
		if err := downwardFiles(v.DownwardAPI.Items, v.DownwardAPI.DefaultMode, src, put); err != nil {
			return "", 0, fmt.Errorf("volume %s: %w", v.Name, err)
		}
	case v.Projected != nil:
		def := v.Projected.DefaultMode
		for _, p := range v.Projected.Sources {
			var err error
			switch {
			case p.ConfigMap != nil:
				err = configMapFiles(p.ConfigMap.Name, p.ConfigMap.Items, p.ConfigMap.Optional, def, src, put)
			case p.Secret != nil:
				err = secretFiles(p.Secret.Name, p.Secret.Items, p.Secret.Optional, def, src, put)
			case p.DownwardAPI != nil:
				err = downwardFiles(p.DownwardAPI.Items, def, src, put)
			case p.ServiceAccountToken != nil:
				t := p.ServiceAccountToken
				seconds := int64(3600)
				if t.ExpirationSeconds != nil {
					seconds = *t.ExpirationSeconds
				}
				var tr *authenticationv1.TokenRequest
				if tr, err = src.token(ctx, t.Audience, seconds); err == nil {
					put(t.Path, []byte(tr.Status.Token), nil, def)
					ttl := time.Until(tr.Status.ExpirationTimestamp.Time)
					if r := ttl * 8 / 10; refresh == 0 || r < refresh {
						refresh = max(r, time.Second)
					}
				}
			default:
				err = fmt.Errorf("a projected source other than configMap, secret, downwardAPI and serviceAccountToken")
			}
			if err != nil {
				return "", 0, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
	case v.PersistentVolumeClaim != nil:
		return "", 0, fmt.Errorf("volume %s: persistentVolumeClaim %s: the node agent has no volume plugins", v.Name, v.PersistentVolumeClaim.ClaimName)
	default:
		return "", 0, fmt.Errorf("volume %s: unsupported volume source (the node agent supports emptyDir, hostPath, configMap, secret, downwardAPI, projected)", v.Name)
	}
	return dir, refresh, writeFiles(dir, files, modes)
}

// writeFiles writes every file under dir, each through a temporary file and
// a rename, so that a process reading it never sees half a file.
func writeFiles(dir string, files map[string][]byte, modes map[string]os.FileMode) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for rel, data := range files {
		if rel == "" || filepath.IsAbs(rel) || strings.HasPrefix(filepath.Clean(rel), "..") {
			return fmt.Errorf("file path %q: want a relative path inside the volume", rel)
		}
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, data, modes[rel]); err != nil {
			return err
		}
		if err := os.Chmod(tmp, modes[rel]); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
	}
	return nil
}

func fileMode(mode, def *int32, fallback os.FileMode) os.FileMode {
	switch {
	case mode != nil:
		return os.FileMode(*mode) & os.ModePerm
	case def != nil:
		return os.FileMode(*def) & os.ModePerm
	}
	return fallback
}

type putFunc func(path string, data []byte, mode, def *int32)

func configMapFiles(name string, items []corev1.KeyToPath, optional *bool, def *int32, src volumeSource, put putFunc) error {
	cm, err := src.configMaps(name)
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return err
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles("ConfigMap "+name, data, items, def, put)
}

func secretFiles(name string, items []corev1.KeyToPath, optional *bool, def *int32, src volumeSource, put putFunc) error {
	s, err := src.secrets(name)
	if err != nil {
		if optional != nil && *optional {
			return nil
		}
		return err
	}
	return keyFiles("Secret "+name, s.Data, items, def, put)
}

// keyFiles puts the items of data (every key, when items is empty).
func keyFiles(what string, data map[string][]byte, items []corev1.KeyToPath, def *int32, put putFunc) error {
	if len(items) == 0 {
		for k, v := range data {
			put(k, v, nil, def)
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return fmt.Errorf("%s has no key %q", what, it.Key)
		}
		put(it.Path, v, it.Mode, def)
	}
	return nil
}

func downwardFiles(items []corev1.DownwardAPIVolumeFile, def *int32, src volumeSource, put putFunc) error {
	for _, it := range items {
		if it.FieldRef == nil {
			return fmt.Errorf("downwardAPI %s: only fieldRef is supported", it.Path)
		}
		v, err := podField(src.env, it.FieldRef.FieldPath)
		if err != nil {
			return fmt.Errorf("downwardAPI %s: %w", it.Path, err)
		}
		put(it.Path, []byte(v), it.Mode, def)
	}
	return nil
}

// boundToken returns a token request function for the pod's ServiceAccount.
func boundToken(create func(ctx context.Context, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error), pod *corev1.Pod) func(context.Context, string, int64) (*authenticationv1.TokenRequest, error) {
	return func(ctx context.Context, audience string, seconds int64) (*authenticationv1.TokenRequest, error) {
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: &seconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		}}
		if audience != "" {
			tr.Spec.Audiences = []string{audience}
		}
		sa := pod.Spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		out, err := create(ctx, sa, tr)
		if err != nil {
			return nil, fmt.Errorf("token of ServiceAccount %s/%s: %w", pod.Namespace, sa, err)
		}
		return out, nil
	}
}
