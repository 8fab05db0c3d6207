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

// fakeBins writes small stand-ins for the manager and dorylus binaries of
// each architecture, each naming its architecture.
func fakeBins(t *testing.T, arches ...string) map[string]string {
	t.Helper()
	bins := map[string]string{}
	for _, arch := range arches {
		dir := t.TempDir()
		for _, n := range []string{"manager", "dorylus"} {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("#!binary "+n+" "+arch), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		bins[arch] = dir
	}
	return bins
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

// layerFiles returns the entries of a gzipped layer blob (name → contents and
// mode), checking that its tar's digest is diffID and its names are sorted.
func layerFiles(t *testing.T, gz []byte, diffID string) (map[string][]byte, map[string]int64) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if diffID != sha(raw) {
		t.Errorf("diff_id %s, layer tar is %s", diffID, sha(raw))
	}
	files, hdrs := untar(t, bytes.NewReader(raw))
	var names []string
	modes := map[string]int64{}
	for _, h := range hdrs {
		names = append(names, h.Name)
		modes[h.Name] = h.Mode
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("layer entries not sorted: %v", names)
	}
	return files, modes
}

// TestRuntimeImageLayout writes the runtime image of both architectures and
// reads it back as an OCI tool does: index.json names an image index of one
// manifest per platform; both manifests start from the one layer of the
// datasets (stored once) and add a layer of their own architecture's
// binaries; the same inputs give the same bytes, in whatever order the
// architectures come.
func TestRuntimeImageLayout(t *testing.T) {
	bins := fakeBins(t, "amd64", "arm64")
	spec := RuntimeSpec("../..", bins, "1.2.3")
	a := writeImage(t, spec)
	slices.Reverse(spec.Arches)
	if !bytes.Equal(a, writeImage(t, spec)) {
		t.Fatal("two writes of the same image, its architectures in another order, differ")
	}
	files, _ := untar(t, bytes.NewReader(a))
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout = %q", got)
	}
	var top index
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex || top.Manifests[0].Platform != nil ||
		top.Manifests[0].Annotations["io.containerd.image.name"] != "docker.io/dorylus-gnn/dorylus:1.2.3" ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "1.2.3" {
		t.Fatalf("index.json manifests = %+v, want one image index named docker.io/dorylus-gnn/dorylus:1.2.3", top.Manifests)
	}
	var idx index
	if err := json.Unmarshal(blob(t, files, top.Manifests[0]), &idx); err != nil {
		t.Fatal(err)
	}
	if idx.MediaType != mediaIndex || len(idx.Manifests) != 2 {
		t.Fatalf("nested index: media type %s, %d manifests, want an image index of 2", idx.MediaType, len(idx.Manifests))
	}
	blobs := 1 // the nested index
	var shared string
	for i, arch := range []string{"amd64", "arm64"} {
		d := idx.Manifests[i]
		if d.MediaType != mediaManifest || d.Platform == nil || *d.Platform != (platform{Architecture: arch, OS: "linux"}) {
			t.Fatalf("manifest %d: %s for %+v, want an image manifest for linux/%s", i, d.MediaType, d.Platform, arch)
		}
		var man manifest
		if err := json.Unmarshal(blob(t, files, d), &man); err != nil {
			t.Fatal(err)
		}
		var cfg imageConfig
		if err := json.Unmarshal(blob(t, files, man.Config), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != arch || cfg.OS != "linux" {
			t.Errorf("%s: config is for %s/%s", arch, cfg.OS, cfg.Architecture)
		}
		want := containerConf{User: "65532:65532", Entrypoint: []string{"/manager"}, Env: []string{"PATH=/", "DORYLUS_DATA_DIR=/datasets"}, WorkingDir: "/"}
		if d := cmp.Diff(want, cfg.Config); d != "" {
			t.Errorf("%s: config (-want +got):\n%s", arch, d)
		}
		if len(man.Layers) != 2 || len(cfg.RootFS.DiffIDs) != 2 {
			t.Fatalf("%s: %d layers, %d diff_ids, want 2 (datasets, binaries)", arch, len(man.Layers), len(cfg.RootFS.DiffIDs))
		}
		if i == 0 {
			shared = man.Layers[0].Digest
			blobs++
		} else if man.Layers[0].Digest != shared {
			t.Errorf("%s: first layer %s, amd64's is %s: want the datasets' layer shared", arch, man.Layers[0].Digest, shared)
		}
		blobs += 3 // manifest, config, binaries' layer
		base, baseModes := layerFiles(t, blob(t, files, man.Layers[0]), cfg.RootFS.DiffIDs[0])
		if _, ok := base["manager"]; ok || baseModes["tmp/"] != 0o1777 {
			t.Errorf("%s: shared layer holds /manager %v, /tmp mode %o; want no binaries and /tmp 1777", arch, ok, baseModes["tmp/"])
		}
		for _, ds := range Datasets {
			src, err := os.ReadFile(filepath.Join("../../datasets", ds, "meta.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(base["datasets/"+ds+"/meta.json"], src) {
				t.Errorf("%s: datasets/%s/meta.json missing or different from the repository's", arch, ds)
			}
		}
		own, modes := layerFiles(t, blob(t, files, man.Layers[1]), cfg.RootFS.DiffIDs[1])
		if len(own) != 2 || string(own["manager"]) != "#!binary manager "+arch || string(own["dorylus"]) != "#!binary dorylus "+arch ||
			modes["manager"] != 0o755 || modes["dorylus"] != 0o755 {
			t.Errorf("%s: binaries' layer %q, modes %v; want the %s manager and dorylus alone, 0755", arch, own, modes, arch)
		}
	}
	var stored int
	for name := range files {
		if strings.HasPrefix(name, "blobs/sha256/") && name != "blobs/sha256/" {
			stored++
		}
	}
	if stored != blobs {
		t.Errorf("%d blobs stored, want %d (each once)", stored, blobs)
	}
}

// TestSingleArchImage checks that an image of one architecture is one manifest
// that index.json names, with its platform: what hack/lambda's function image
// and the tests' custom images are.
func TestSingleArchImage(t *testing.T) {
	spec := RuntimeSpec("../..", fakeBins(t, "arm64"), "1.2.3")
	spec.Files = baseFiles() // the datasets apart: compressing them is most of the time
	files, _ := untar(t, bytes.NewReader(writeImage(t, spec)))
	var top index
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaManifest || top.Manifests[0].Platform == nil ||
		*top.Manifests[0].Platform != (platform{Architecture: "arm64", OS: "linux"}) ||
		top.Manifests[0].Annotations["io.containerd.image.name"] != "docker.io/dorylus-gnn/dorylus:1.2.3" {
		t.Fatalf("index.json manifests = %+v, want one linux/arm64 manifest named docker.io/dorylus-gnn/dorylus:1.2.3", top.Manifests)
	}
	var man manifest
	if err := json.Unmarshal(blob(t, files, top.Manifests[0]), &man); err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(t, files, man.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Architecture != "arm64" || len(man.Layers) != 2 {
		t.Errorf("config for %s with %d layers, want arm64 with 2", cfg.Architecture, len(man.Layers))
	}
	// a custom image with no files of its architecture's own is one layer
	files, _ = untar(t, bytes.NewReader(writeImage(t, Spec{Name: "x:1", Files: []File{{Dst: "/a", Data: []byte("a")}}})))
	if err := json.Unmarshal(files["index.json"], &top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(blob(t, files, top.Manifests[0]), &man); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(blob(t, files, man.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if top.Manifests[0].Platform.Architecture != "amd64" || cfg.Architecture != "amd64" || len(man.Layers) != 1 {
		t.Errorf("default image: %s (config %s) with %d layers, want amd64 with 1", top.Manifests[0].Platform.Architecture, cfg.Architecture, len(man.Layers))
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	for name, spec := range map[string]Spec{
		"no tag":        {Name: "docker.io/x"},
		"relative path": {Name: "x:1", Files: []File{{Dst: "etc/passwd", Data: []byte("x")}}},
		"twice":         {Name: "x:1", Files: []File{{Dst: "/a", Data: []byte("x")}, {Dst: "/a", Data: []byte("y")}}},
		"missing file":  {Name: "x:1", Files: []File{{Dst: "/a", Src: "/no/such/file"}}},
		"unknown arch":  {Name: "x:1", Arches: []Arch{{Name: "riscv64"}}},
		"arch twice":    {Name: "x:1", Arches: []Arch{{Name: "arm64"}, {Name: "amd64"}, {Name: "arm64"}}},
		"in both layers": {Name: "x:1", Files: []File{{Dst: "/a", Data: []byte("x")}},
			Arches: []Arch{{Name: "amd64", Files: []File{{Dst: "/a", Data: []byte("y")}}}}},
	} {
		if err := Write(io.Discard, spec); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestRunRefusesBadBin checks `image runtime`'s --bin: ARCH=DIR, a known
// architecture, each once, at least one; and that it writes nothing then.
func TestRunRefusesBadBin(t *testing.T) {
	out := filepath.Join(t.TempDir(), "image.tar")
	dir := fakeBins(t, "amd64")["amd64"]
	for name, bins := range map[string][]string{
		"none":    nil,
		"no arch": {dir},
		"unknown": {"riscv64=" + dir},
		"no dir":  {"amd64="},
		"twice":   {"amd64=" + dir, "amd64=" + dir},
		"missing": {"amd64=" + dir, "arm64=" + filepath.Join(dir, "nothing")},
	} {
		args := []string{"runtime", "--tag", "1", "--root", "../..", "--out", out}
		for _, b := range bins {
			args = append(args, "--bin", b)
		}
		if err := run(args); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("%s: %s written (%v)", name, out, err)
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
	spec := RuntimeSpec("ROOT", map[string]string{"amd64": "BIN"}, "x")
	base := map[string]bool{}
	for _, f := range baseFiles() {
		base[f.Dst] = true
	}
	want := dockerfileImage{Copies: map[string]string{}, User: spec.User, Entrypoint: spec.Entrypoint, Env: spec.Env, WorkingDir: spec.WorkingDir}
	for _, f := range append(spec.Files, spec.Arches[0].Files...) {
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

// TestChartNamesImagePlatforms keeps the chart's artifacthub.io/images
// annotation true: the image of appVersion, with the platforms make image
// writes.
func TestChartNamesImagePlatforms(t *testing.T) {
	raw, err := os.ReadFile("../../charts/dorylus-operator/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		AppVersion  string            `json:"appVersion"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.Unmarshal(raw, &chart); err != nil {
		t.Fatal(err)
	}
	var images []struct {
		Name      string   `json:"name"`
		Image     string   `json:"image"`
		Platforms []string `json:"platforms"`
	}
	if err := yaml.Unmarshal([]byte(chart.Annotations["artifacthub.io/images"]), &images); err != nil {
		t.Fatalf("Chart.yaml: artifacthub.io/images: %v", err)
	}
	var platforms []string
	for _, a := range Arches {
		platforms = append(platforms, "linux/"+a)
	}
	if len(images) != 1 || images[0].Image != Repository+":"+chart.AppVersion || !slices.Equal(images[0].Platforms, platforms) {
		t.Errorf("Chart.yaml: artifacthub.io/images = %+v, want %s:%s for %v", images, Repository, chart.AppVersion, platforms)
	}
}
