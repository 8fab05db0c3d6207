package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// epoch is the modification time of every entry and the creation time of
// every image, so that the same inputs give the same bytes.
var epoch = time.Unix(0, 0).UTC()

// Media types of the OCI image layout.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Spec is what an image holds and how it starts.
type Spec struct {
	Name       string   // full reference, e.g. docker.io/dorylus-gnn/dorylus:0.1.0
	Arch       string   // the binaries' GOARCH, amd64 (the default) or arm64
	Files      []File   // regular files and directories of the single layer
	User       string   // uid:gid
	Entrypoint []string // the image's ENTRYPOINT
	Env        []string // KEY=VALUE
	WorkingDir string
}

// File is one entry of the layer: Src (a file on this machine; empty for a
// directory, or with Data) copied to the absolute path Dst with Mode.
type File struct {
	Dst  string
	Src  string
	Data []byte
	Mode fs.FileMode // permission bits; fs.ModeDir for a directory
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type imageConfig struct {
	Created      string        `json:"created"`
	Architecture string        `json:"architecture"`
	OS           string        `json:"os"`
	Config       containerConf `json:"config"`
	RootFS       rootFS        `json:"rootfs"`
}

type containerConf struct {
	User       string   `json:"User,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Env        []string `json:"Env,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// ExpandDirs replaces every File whose Src is a directory by the directory
// and all it holds (files 0644, folders 0755), in name order.
func ExpandDirs(files []File) ([]File, error) {
	var out []File
	for _, f := range files {
		if f.Src == "" {
			out = append(out, f)
			continue
		}
		st, err := os.Stat(f.Src)
		if err != nil {
			return nil, fmt.Errorf("image: %s: %w", f.Dst, err)
		}
		if !st.IsDir() {
			out = append(out, f)
			continue
		}
		err = filepath.WalkDir(f.Src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(f.Src, p)
			if err != nil {
				return err
			}
			dst := path.Join(f.Dst, filepath.ToSlash(rel))
			switch {
			case d.IsDir():
				out = append(out, File{Dst: dst, Mode: fs.ModeDir | 0o755})
			case d.Type().IsRegular():
				out = append(out, File{Dst: dst, Src: p, Mode: 0o644})
			default:
				return fmt.Errorf("image: %s is neither a file nor a folder", p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// layer writes the gzipped tar of files, parents first and names sorted, with
// owner root and the fixed epoch as every time. It returns the compressed
// bytes and the digest of the uncompressed tar.
func layer(files []File) (gz []byte, diffID string, err error) {
	entries := map[string]File{}
	for _, f := range files {
		if !strings.HasPrefix(f.Dst, "/") || path.Clean(f.Dst) != f.Dst || f.Dst == "/" {
			return nil, "", fmt.Errorf("image: destination %q must be a clean absolute path", f.Dst)
		}
		if _, dup := entries[f.Dst]; dup {
			return nil, "", fmt.Errorf("image: %s added twice", f.Dst)
		}
		entries[f.Dst] = f
		for d := path.Dir(f.Dst); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = File{Dst: d, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)

	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, n := range names {
		f := entries[n]
		hdr := &tar.Header{Name: strings.TrimPrefix(n, "/"), ModTime: epoch, Format: tar.FormatPAX, Mode: int64(f.Mode.Perm())}
		var data []byte
		if f.Mode.IsDir() {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
			if f.Mode&fs.ModeSticky != 0 {
				hdr.Mode |= 0o1000
			}
		} else {
			hdr.Typeflag = tar.TypeReg
			data = f.Data
			if f.Src != "" {
				if data, err = os.ReadFile(f.Src); err != nil {
					return nil, "", fmt.Errorf("image: %s: %w", n, err)
				}
			}
			hdr.Size = int64(len(data))
		}
		// PAX without access or change times: FormatPAX writes only mtime.
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw.Bytes())
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, "", err
	}
	zw.ModTime = epoch // gzip header without a time or a name
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// Write writes the image of spec as an OCI image layout in a tar to w.
func Write(w io.Writer, spec Spec) error {
	if spec.Name == "" || !strings.Contains(spec.Name, ":") {
		return fmt.Errorf("image: name %q needs a tag (repository:tag)", spec.Name)
	}
	files, err := ExpandDirs(spec.Files)
	if err != nil {
		return err
	}
	arch := spec.Arch
	if arch == "" {
		arch = "amd64"
	}
	gz, diffID, err := layer(files)
	if err != nil {
		return err
	}
	cfg, err := json.Marshal(imageConfig{
		Created: epoch.Format(time.RFC3339), Architecture: arch, OS: "linux",
		Config: containerConf{User: spec.User, Entrypoint: spec.Entrypoint, Env: spec.Env, WorkingDir: spec.WorkingDir},
		RootFS: rootFS{Type: "layers", DiffIDs: []string{diffID}},
	})
	if err != nil {
		return err
	}
	man, err := json.Marshal(manifest{
		SchemaVersion: 2, MediaType: mediaManifest,
		Config: descriptor{MediaType: mediaConfig, Digest: digest(cfg), Size: int64(len(cfg))},
		Layers: []descriptor{{MediaType: mediaLayer, Digest: digest(gz), Size: int64(len(gz))}},
	})
	if err != nil {
		return err
	}
	tag := spec.Name[strings.LastIndex(spec.Name, ":")+1:]
	idx, err := json.Marshal(index{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []descriptor{{
		MediaType: mediaManifest, Digest: digest(man), Size: int64(len(man)),
		Annotations: map[string]string{"io.containerd.image.name": spec.Name, "org.opencontainers.image.ref.name": tag},
		Platform:    &platform{Architecture: arch, OS: "linux"},
	}}})
	if err != nil {
		return err
	}
	blobs := [][]byte{cfg, man, gz}
	sort.Slice(blobs, func(i, j int) bool { return digest(blobs[i]) < digest(blobs[j]) })
	tw := tar.NewWriter(w)
	put := func(name string, data []byte, mode int64, dir bool) error {
		hdr := &tar.Header{Name: name, Mode: mode, ModTime: epoch, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(data))}
		if dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := put(d, nil, 0o755, true); err != nil {
			return err
		}
	}
	for _, b := range blobs {
		if err := put("blobs/sha256/"+strings.TrimPrefix(digest(b), "sha256:"), b, 0o644, false); err != nil {
			return err
		}
	}
	if err := put("index.json", idx, 0o644, false); err != nil {
		return err
	}
	if err := put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644, false); err != nil {
		return err
	}
	return tw.Close()
}
