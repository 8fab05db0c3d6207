package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// fakeBin writes small stand-ins for the manager and dorylus binaries.
func fakeBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range []string{"manager", "dorylus"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!binary "+n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeImage(t *testing.T, spec Spec) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, spec); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// untar reads a tar into name → contents, checking that every time is the epoch.
func untar(t *testing.T, r io.Reader) (map[string][]byte, []*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	var hdrs []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mtime %v uid %d gid %d, want the epoch and root", h.Name, h.ModTime, h.Uid, h.Gid)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], hdrs = b, append(hdrs, h)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// blob returns the blob of a descriptor, checking its digest and size.
func blob(t *testing.T, files map[string][]byte, d descriptor) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing", d.Digest)
	}
	if sha(b) != d.Digest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: digest %s size %d, descriptor says size %d", d.Digest, sha(b), len(b), d.Size)
	}
	return b
}

func TestRuntimeImageLayout(t *testing.T) {
	spec := RuntimeSpec("../..", fakeBin(t), "1.2.3")
	a, b := writeImage(t, spec), writeImage(t, spec)
	if !bytes.Equal(a, b) {
		t.Fatal("two writes of the same image differ")
	}
	files, _ := untar(t, bytes.NewReader(a))
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q", got)
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Annotations["io.containerd.image.name"] != "docker.io/dorylus-gnn/dorylus:1.2.3" ||
		idx.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "1.2.3" {
		t.Fatalf("index manifests = %+v", idx.Manifests)
	}
	var man manifest
	if err := json.Unmarshal(blob(t, files, idx.Manifests[0]), &man); err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(t, files, man.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	want := containerConf{User: "65532:65532", Entrypoint: []string{"/manager"}, Env: []string{"PATH=/", "DORYLUS_DATA_DIR=/datasets"}, WorkingDir: "/"}
	if d := cmp.Diff(want, cfg.Config); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	if len(man.Layers) != 1 {
		t.Fatalf("%d layers, want 1", len(man.Layers))
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(t, files, man.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootFS.DiffIDs[0] != sha(raw) {
		t.Errorf("diff_id %s, layer tar is %s", cfg.RootFS.DiffIDs[0], sha(raw))
	}
	lf, hdrs := untar(t, bytes.NewReader(raw))
	var names []string
	modes := map[string]int64{}
	for _, h := range hdrs {
		names = append(names, h.Name)
		modes[h.Name] = h.Mode
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("layer entries not sorted: %v", names)
	}
	if string(lf["manager"]) != "#!binary manager" || modes["manager"] != 0o755 || modes["dorylus"] != 0o755 {
		t.Errorf("binaries: manager %q mode %o, dorylus mode %o", lf["manager"], modes["manager"], modes["dorylus"])
	}
	if modes["tmp/"] != 0o1777 {
		t.Errorf("/tmp mode %o, want 1777", modes["tmp/"])
	}
	for _, d := range Datasets {
		src, err := os.ReadFile(filepath.Join("../../datasets", d, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(lf["datasets/"+d+"/meta.json"], src) {
			t.Errorf("datasets/%s/meta.json missing or different from the repository's", d)
		}
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	for name, spec := range map[string]Spec{
		"no tag":        {Name: "docker.io/x"},
		"relative path": {Name: "x:1", Files: []File{{Dst: "etc/passwd", Data: []byte("x")}}},
		"twice":         {Name: "x:1", Files: []File{{Dst: "/a", Data: []byte("x")}, {Dst: "/a", Data: []byte("y")}}},
		"missing file":  {Name: "x:1", Files: []File{{Dst: "/a", Src: "/no/such/file"}}},
	} {
		if err := Write(io.Discard, spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// dockerfileImage is the final stage of the Dockerfile: destinations of its
// COPY lines (with the source), user, entrypoint, environment and workdir.
type dockerfileImage struct {
	Copies     map[string]string
	User       string
	Entrypoint []string
	Env        []string
	WorkingDir string
}

func parseDockerfile(t *testing.T, path string) dockerfileImage {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "FROM ") {
			last = i
		}
	}
	out := dockerfileImage{Copies: map[string]string{}}
	envRE := regexp.MustCompile(`(\S+)=(\S+)`)
	for _, l := range lines[last+1:] {
		f := strings.Fields(l)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "COPY":
			args := slices.DeleteFunc(f[1:], func(s string) bool { return strings.HasPrefix(s, "--") })
			if len(args) != 2 {
				t.Fatalf("Dockerfile: %q: want one source and one destination", l)
			}
			out.Copies[args[1]] = args[0]
		case "USER":
			out.User = f[1]
		case "WORKDIR":
			out.WorkingDir = f[1]
		case "ENV":
			for _, m := range envRE.FindAllStringSubmatch(l, -1) {
				out.Env = append(out.Env, m[1]+"="+m[2])
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "ENTRYPOINT ")), &out.Entrypoint); err != nil {
				t.Fatalf("Dockerfile: ENTRYPOINT not in exec form: %v", err)
			}
		default:
			t.Fatalf("Dockerfile: final stage has %s, which the test does not compare: teach it", f[0])
		}
	}
	return out
}

// TestDockerfileMatchesImage keeps the Dockerfile and `make image` shipping the
// same files, user, entrypoint and environment.
func TestDockerfileMatchesImage(t *testing.T) {
	got := parseDockerfile(t, "../../Dockerfile")
	spec := RuntimeSpec("ROOT", "BIN", "x")
	base := map[string]bool{}
	for _, f := range baseFiles() {
		base[f.Dst] = true
	}
	want := dockerfileImage{Copies: map[string]string{}, User: spec.User, Entrypoint: spec.Entrypoint, Env: spec.Env, WorkingDir: spec.WorkingDir}
	for _, f := range spec.Files {
		if base[f.Dst] {
			continue
		}
		switch {
		case strings.HasPrefix(f.Src, "BIN/"):
			want.Copies[f.Dst] = "/out/" + strings.TrimPrefix(f.Src, "BIN/")
		case strings.HasPrefix(f.Src, "ROOT/"):
			want.Copies[f.Dst] = strings.TrimPrefix(f.Src, "ROOT/")
		default:
			t.Fatalf("image file %s comes from neither the binaries nor the repository", f.Dst)
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Dockerfile's final stage differs from make image's (-image +Dockerfile):\n%s", d)
	}
}

// TestDatasetsMatchCRD keeps the image's datasets equal to the CRD's enum of
// builtin datasets.
func TestDatasetsMatchCRD(t *testing.T) {
	raw, err := os.ReadFile("../../config/crd/bases/dorylus.dev_gnntrainingjobs.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema struct {
						Properties map[string]struct {
							Properties map[string]struct {
								Properties map[string]struct {
									Properties map[string]struct {
										Enum []string `json:"enum"`
									} `json:"properties"`
								} `json:"properties"`
							} `json:"properties"`
						} `json:"properties"`
					} `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	enum := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["dataset"].Properties["builtin"].Properties["name"].Enum
	if len(enum) == 0 {
		t.Fatal("no enum at spec.dataset.builtin.name in the CRD")
	}
	if d := cmp.Diff(enum, Datasets); d != "" {
		t.Errorf("CRD builtin datasets (-CRD +image):\n%s", d)
	}
	for _, d := range Datasets {
		if _, err := os.Stat(filepath.Join("../../datasets", d, "features.txt.gz")); err != nil {
			t.Errorf("builtin dataset %s ships no features: %v", d, err)
		}
	}
}
