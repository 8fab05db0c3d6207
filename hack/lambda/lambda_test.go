package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dorylus-gnn/dorylus/pkg/jobconfig"
)

// statement is one statement of an IAM policy; Action and Resource may be a string or a list.
type statement struct {
	Sid       string
	Effect    string
	Action    any
	Resource  any
	Principal any
	Condition any
}

// values returns a policy field's values.
func values(t *testing.T, v any) []string {
	t.Helper()
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, len(v))
		for i, s := range v {
			out[i], _ = s.(string)
		}
		return out
	case nil:
		return nil
	}
	t.Fatalf("policy field %v: want a string or a list of strings", v)
	return nil
}

// TestPolicies reads every policy file: valid JSON of one Allow statement with exactly the
// expected actions, none a wildcard, on the expected resources, and no placeholder that
// deploy.sh does not fill in.
func TestPolicies(t *testing.T) {
	want := map[string]struct{ actions, resources []string }{
		"function-trust.json": {[]string{"sts:AssumeRole"}, nil},
		"function-logs.json": {[]string{"logs:CreateLogStream", "logs:PutLogEvents"},
			[]string{"arn:aws:logs:${REGION}:${ACCOUNT}:log-group:/aws/lambda/${FUNCTION}:*"}},
		"function-vpc.json": {[]string{"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
			"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses"}, []string{"*"}},
		"graph-server-invoke.json": {[]string{"lambda:InvokeFunction"},
			[]string{"arn:aws:lambda:${REGION}:${ACCOUNT}:function:${FUNCTION}", "arn:aws:lambda:${REGION}:${ACCOUNT}:function:${FUNCTION}:*"}},
		"graph-server-trust.json": {[]string{"sts:AssumeRoleWithWebIdentity"}, nil},
	}
	files, err := filepath.Glob("policies/*.json")
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := os.ReadFile("deploy.sh")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		name := filepath.Base(f)
		names = append(names, name)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Version   string
			Statement []statement
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc.Version != "2012-10-17" || len(doc.Statement) != 1 || doc.Statement[0].Effect != "Allow" {
			t.Errorf("%s: version %q, %d statements: want 2012-10-17 and one Allow", name, doc.Version, len(doc.Statement))
			continue
		}
		s := doc.Statement[0]
		actions := values(t, s.Action)
		slices.Sort(actions)
		if w := want[name]; !slices.Equal(actions, w.actions) || !slices.Equal(values(t, s.Resource), w.resources) {
			t.Errorf("%s: actions %v on %v, want %v on %v", name, actions, values(t, s.Resource), w.actions, w.resources)
		}
		for _, a := range actions {
			if strings.Contains(a, "*") {
				t.Errorf("%s: wildcard action %q", name, a)
			}
		}
		if !bytes.Contains(deploy, []byte(name)) {
			t.Errorf("%s: deploy.sh does not use it", name)
		}
		for _, p := range regexp.MustCompile(`\$\{[A-Z_]+\}`).FindAll(data, -1) {
			if !bytes.Contains(deploy, []byte("'"+string(p)+"'")) {
				t.Errorf("%s: deploy.sh does not fill in %s", name, p)
			}
		}
	}
	if !slices.Equal(names, []string{"function-logs.json", "function-trust.json", "function-vpc.json", "graph-server-invoke.json", "graph-server-trust.json"}) {
		t.Errorf("policy files %v", names)
	}
	if ports := fmt.Sprintf("ports=(%d %d)", jobconfig.GraphServerPort, jobconfig.ParamServerPort); !bytes.Contains(deploy, []byte(ports)) {
		t.Errorf("deploy.sh opens other ports than the servers' %s", ports)
	}
}

// TestBuild runs build.sh for both architectures and checks what it wrote: a zip holding only
// bootstrap, an executable for the architecture, whose bytes a second zip of it repeats; and
// an image of that architecture whose entrypoint runs it as the function.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles dorylus twice")
	}
	out := t.TempDir()
	cmd := exec.Command("./build.sh")
	cmd.Env = append(os.Environ(), "OUT="+out, "TAG=test")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		name := filepath.Join(out, "dorylus-function-linux-"+arch+".zip")
		zr, err := zip.OpenReader(name)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" || zr.File[0].Mode() != 0o755 {
			t.Fatalf("%s: want one entry, bootstrap, mode 0755", name)
		}
		rc, err := zr.File[0].Open()
		if err != nil {
			t.Fatal(err)
		}
		bin, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil {
			t.Fatalf("%s: bootstrap: %v", name, err)
		}
		if f.Machine != machine || f.Type != elf.ET_EXEC {
			t.Errorf("%s: bootstrap is %v %v, want an executable for %v", name, f.Type, f.Machine, machine)
		}
		var again bytes.Buffer
		if err := writeZip(&again, bytes.NewReader(bin)); err != nil {
			t.Fatal(err)
		}
		if zipped, _ := os.ReadFile(name); !bytes.Equal(zipped, again.Bytes()) {
			t.Errorf("%s: zipping bootstrap again gives other bytes", name)
		}
		checkImage(t, filepath.Join(out, "dorylus-function-linux-"+arch+".tar"), arch, "dorylus-function:test-"+arch)
	}
}

// checkImage checks that the OCI image layout in file is of arch, named ref, and starts
// `/dorylus function`.
func checkImage(t *testing.T, file, arch, ref string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if blobs[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	blob := func(digest string) []byte { return blobs["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")] }
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
			Platform    struct{ Architecture, OS string }
		}
	}
	var manifest struct{ Config struct{ Digest string } }
	var config struct {
		Architecture string
		Config       struct{ Entrypoint []string }
	}
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("%s: index.json: %v, %d manifests", file, err, len(index.Manifests))
	}
	m := index.Manifests[0]
	if err := json.Unmarshal(blob(m.Digest), &manifest); err != nil {
		t.Fatalf("%s: manifest: %v", file, err)
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatalf("%s: config: %v", file, err)
	}
	if m.Platform.Architecture != arch || m.Platform.OS != "linux" || config.Architecture != arch || m.Annotations["io.containerd.image.name"] != ref ||
		!slices.Equal(config.Config.Entrypoint, []string{"/dorylus", "function"}) {
		t.Errorf("%s: %s/%s (config %s) named %q, entrypoint %q; want linux/%s named %q starting /dorylus function",
			file, m.Platform.OS, m.Platform.Architecture, config.Architecture, m.Annotations["io.containerd.image.name"], config.Config.Entrypoint, arch, ref)
	}
}
