//go:build qemu

package main

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The image `make image` wrote; make test-arm64 runs this test on it.
var imageTar = filepath.Join("..", "..", "bin", "dorylus-image.tar")

// imageBinaries returns the /dorylus of each platform of the runtime image in
// imageTar, written to files of their own, checking that each is an ELF
// executable of its architecture.
func imageBinaries(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(imageTar)
	if err != nil {
		t.Fatalf("%v: run make image first", err)
	}
	files, _ := untar(t, bytes.NewReader(raw))
	var top, idx index
	if err := json.Unmarshal(files["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("%s: index.json: %v, %d entries", imageTar, err, len(top.Manifests))
	}
	if err := json.Unmarshal(blob(t, files, top.Manifests[0]), &idx); err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	bins := map[string]string{}
	for _, d := range idx.Manifests {
		var man manifest
		var cfg imageConfig
		if err := json.Unmarshal(blob(t, files, d), &man); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(blob(t, files, man.Config), &cfg); err != nil {
			t.Fatal(err)
		}
		top := len(man.Layers) - 1
		own, _ := layerFiles(t, blob(t, files, man.Layers[top]), cfg.RootFS.DiffIDs[top])
		f, err := elf.NewFile(bytes.NewReader(own["dorylus"]))
		if err != nil {
			t.Fatalf("%s: /dorylus: %v", d.Platform.Architecture, err)
		}
		if f.Machine != machines[d.Platform.Architecture] || cfg.Architecture != d.Platform.Architecture {
			t.Fatalf("%s (config %s): /dorylus is for %v", d.Platform.Architecture, cfg.Architecture, f.Machine)
		}
		path := filepath.Join(t.TempDir(), "dorylus")
		if err := os.WriteFile(path, own["dorylus"], 0o755); err != nil {
			t.Fatal(err)
		}
		bins[d.Platform.Architecture] = path
	}
	if len(bins) != 2 {
		t.Fatalf("%s holds the platforms %v, want amd64 and arm64", imageTar, bins)
	}
	return bins
}

// TestArm64TrainsCora runs `dorylus train --dataset cora` of the image's amd64
// binary here and of its arm64 binary under qemu-aarch64-static (Debian's
// qemu-user-static, hack/test-deps.sh): the arm64 kernels (portable Go where
// amd64 has assembly) reach the amd64 test accuracy within a point.
func TestArm64TrainsCora(t *testing.T) {
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		t.Fatalf("%v: as root, apt-get install -y qemu-user-static (hack/test-deps.sh)", err)
	}
	bins := imageBinaries(t)
	type report struct {
		TestAccuracy       float64 `json:"test_accuracy"`
		EpochSecondsMedian float64 `json:"epoch_seconds_median"`
	}
	train := func(arch string, argv ...string) report {
		cmd := exec.Command(argv[0], append(argv[1:], "train", "--dataset", "cora", "--output", "json")...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", arch, err, stderr.Bytes())
		}
		var r report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("%s: %v in %q", arch, err, out)
		}
		t.Logf("%s: test accuracy %.2f %%, median epoch %.1f ms", arch, 100*r.TestAccuracy, 1000*r.EpochSecondsMedian)
		return r
	}
	native := train("amd64", bins["amd64"])
	emulated := train("arm64 under qemu", qemu, bins["arm64"])
	if native.TestAccuracy < 0.8 || math.Abs(emulated.TestAccuracy-native.TestAccuracy) > 0.01 {
		t.Errorf("Cora's test accuracy: arm64 %.2f %%, amd64 %.2f %%: want both ≥ 80 %% and within a point",
			100*emulated.TestAccuracy, 100*native.TestAccuracy)
	}
}
