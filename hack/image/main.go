// Command image writes container images as OCI image layouts in a tar,
// without Docker and byte for byte the same for the same inputs (every time
// is the Unix epoch, entries are sorted, the owner is root). Load one with
// `ctr -n k8s.io images import FILE` or push it with any OCI tool (README).
//
//	go run ./hack/image runtime --bin ARCH=DIR... --tag TAG --out FILE
//	    the project's runtime image: for each ARCH (amd64, arm64) given,
//	    DIR/manager and DIR/dorylus (static binaries built for it) in a layer
//	    of its own, on one layer of the builtin datasets under /datasets that
//	    every architecture shares; user 65532. With two architectures the tar
//	    holds an image index of both (a multi-platform image).
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
	"maps"
	"os"
	"path/filepath"
	"slices"
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

// RuntimeSpec is the runtime image built from the repository at root and, for
// each architecture, the binaries in bins[arch].
func RuntimeSpec(root string, bins map[string]string, tag string) Spec {
	files := baseFiles()
	for _, d := range Datasets {
		files = append(files, File{Dst: DataDir + "/" + d, Src: filepath.Join(root, "datasets", d)})
	}
	var arches []Arch
	for _, arch := range slices.Sorted(maps.Keys(bins)) {
		arches = append(arches, Arch{Name: arch, Files: []File{
			{Dst: "/manager", Src: filepath.Join(bins[arch], "manager"), Mode: 0o755},
			{Dst: "/dorylus", Src: filepath.Join(bins[arch], "dorylus"), Mode: 0o755},
		}})
	}
	return Spec{
		Name:       Repository + ":" + tag,
		Files:      files,
		Arches:     arches,
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
		var bins listFlag
		fset.Var(&bins, "bin", "ARCH=DIR: the folder holding the static manager and dorylus binaries built for GOARCH ARCH (repeatable)")
		tag := fset.String("tag", "", "image tag (the chart's appVersion)")
		root := fset.String("root", ".", "the repository (for datasets/)")
		if err := fset.Parse(args[1:]); err != nil {
			return err
		}
		if *tag == "" {
			return errors.New("image runtime: --tag is required")
		}
		dirs := map[string]string{}
		for _, b := range bins {
			arch, dir, ok := strings.Cut(b, "=")
			if !ok || !slices.Contains(Arches, arch) || dir == "" {
				return fmt.Errorf("image runtime: --bin %q: want ARCH=DIR with ARCH one of %s", b, strings.Join(Arches, ", "))
			}
			if _, dup := dirs[arch]; dup {
				return fmt.Errorf("image runtime: --bin %s given twice", arch)
			}
			dirs[arch] = dir
		}
		if len(dirs) == 0 {
			return errors.New("image runtime: --bin ARCH=DIR is required")
		}
		spec = RuntimeSpec(*root, dirs, *tag)
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
		spec = Spec{Name: *name, Arches: []Arch{{Name: *arch}}, User: *user, Env: []string{"PATH=/"}, WorkingDir: "/"}
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
