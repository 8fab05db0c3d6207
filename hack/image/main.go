// Command image writes container images as OCI image layouts in a tar,
// without Docker and byte for byte the same for the same inputs (every time
// is the Unix epoch, entries are sorted, the owner is root). Load one with
// `ctr -n k8s.io images import FILE` or push it with any OCI tool (README).
//
//	go run ./hack/image runtime --bin DIR --tag TAG --out FILE
//	    the project's runtime image: DIR/manager and DIR/dorylus (static
//	    binaries), the builtin datasets under /datasets, user 65532
//	go run ./hack/image custom --name REPO:TAG --add SRC=DST... --entrypoint A,B --user U [--arch ARCH] --out FILE
//	    any other image of static files (the tests' pause and emulator images,
//	    the Lambda function's of hack/lambda)
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Repository is the runtime image's repository; its tag is the chart's appVersion.
const Repository = "docker.io/dorylus-gnn/dorylus"

// NonRootUser is the runtime image's user, distroless's nonroot.
const NonRootUser = "65532:65532"

// DataDir is where the builtin datasets live in the runtime image.
const DataDir = "/datasets"

// Datasets are the builtin datasets of the CRD's enum (spec.dataset.builtin.name),
// shipped under DataDir; a test keeps them, the CRD and the Dockerfile in step.
var Datasets = []string{"cora", "citeseer", "amazon_computers", "coauthor_cs"}

// RuntimeSpec is the runtime image built from the binaries in bin and the
// repository at root.
func RuntimeSpec(root, bin, tag string) Spec {
	files := append(baseFiles(),
		File{Dst: "/manager", Src: filepath.Join(bin, "manager"), Mode: 0o755},
		File{Dst: "/dorylus", Src: filepath.Join(bin, "dorylus"), Mode: 0o755},
	)
	for _, d := range Datasets {
		files = append(files, File{Dst: DataDir + "/" + d, Src: filepath.Join(root, "datasets", d)})
	}
	return Spec{
		Name:       Repository + ":" + tag,
		Files:      files,
		User:       NonRootUser,
		Entrypoint: []string{"/manager"},
		Env:        []string{"PATH=/", "DORYLUS_DATA_DIR=" + DataDir},
		WorkingDir: "/",
	}
}

// baseFiles are what the Dockerfile's base image (distroless static:nonroot)
// gives that the runtime needs: the nonroot user and a writable /tmp.
func baseFiles() []File {
	return []File{
		{Dst: "/etc/passwd", Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), Mode: 0o644},
		{Dst: "/etc/group", Data: []byte("root:x:0:\nnonroot:x:65532:\n"), Mode: 0o644},
		{Dst: "/home/nonroot", Mode: fs.ModeDir | 0o700},
		{Dst: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}
}

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, " ") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: image runtime|custom [flags] (see go doc ./hack/image)")
	}
	fset := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fset.String("out", "", "the image tar to write")
	var spec Spec
	switch args[0] {
	case "runtime":
		bin := fset.String("bin", "bin/image", "folder holding the static manager and dorylus binaries")
		tag := fset.String("tag", "", "image tag (the chart's appVersion)")
		root := fset.String("root", ".", "the repository (for datasets/)")
		if err := fset.Parse(args[1:]); err != nil {
			return err
		}
		if *tag == "" {
			return errors.New("image runtime: --tag is required")
		}
		spec = RuntimeSpec(*root, *bin, *tag)
	case "custom":
		var adds listFlag
		fset.Var(&adds, "add", "SRC=DST: copy file SRC to absolute path DST (repeatable)")
		name := fset.String("name", "", "image reference REPOSITORY:TAG")
		entry := fset.String("entrypoint", "", "comma-separated entrypoint")
		user := fset.String("user", NonRootUser, "uid:gid")
		arch := fset.String("arch", "amd64", "the binaries' GOARCH: amd64 or arm64")
		if err := fset.Parse(args[1:]); err != nil {
			return err
		}
		if *arch != "amd64" && *arch != "arm64" {
			return fmt.Errorf("image custom: --arch %q: want amd64 or arm64", *arch)
		}
		spec = Spec{Name: *name, Arch: *arch, User: *user, Env: []string{"PATH=/"}, WorkingDir: "/"}
		if *entry != "" {
			spec.Entrypoint = strings.Split(*entry, ",")
		}
		for _, a := range adds {
			src, dst, ok := strings.Cut(a, "=")
			if !ok {
				return fmt.Errorf("image custom: --add %q: want SRC=DST", a)
			}
			spec.Files = append(spec.Files, File{Dst: dst, Src: src, Mode: 0o755})
		}
		spec.Files = append(spec.Files, File{Dst: "/tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777})
	default:
		return fmt.Errorf("image: unknown kind %q: want runtime or custom", args[0])
	}
	if *out == "" {
		return errors.New("image: --out is required")
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	tmp := *out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := Write(w, spec); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, *out)
}
