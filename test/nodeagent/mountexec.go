package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// mountExecCommand is the hidden subcommand that runs inside a pod's
// namespaces (started through `ip netns exec`, which gives it the pod's
// network namespace and a private mount namespace): it bind-mounts the
// pod's volumes and hosts file and then execs the container's process.
const mountExecCommand = "mount-exec"

// launchSpec is what mount-exec reads from its argument, a JSON file.
type launchSpec struct {
	Mounts []mountSpec `json:"mounts"`
	Argv   []string    `json:"argv"`
	Env    []string    `json:"env"`
	Dir    string      `json:"dir,omitempty"`
}

// mountSpec is one bind mount.
type mountSpec struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

func mountExec(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: nodeagent %s SPEC.json", mountExecCommand)
	}
	raw, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var spec launchSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if len(spec.Argv) == 0 {
		return fmt.Errorf("%s: no argv", args[0])
	}
	// Open the program before mounting: a volume (an emptyDir at /tmp, say)
	// may hide the folder it lies in, as when the checkout is under /tmp.
	path := spec.Argv[0]
	if filepath.Base(path) == path {
		if path, err = exec.LookPath(path); err != nil {
			return err
		}
	}
	prog, err := unix.Open(path, unix.O_PATH, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	for _, m := range spec.Mounts {
		if err := bindMount(m); err != nil {
			return err
		}
	}
	if spec.Dir != "" {
		if err := os.Chdir(spec.Dir); err != nil {
			return fmt.Errorf("workingDir: %w", err)
		}
	}
	if err := syscall.Exec(fmt.Sprintf("/proc/self/fd/%d", prog), spec.Argv, spec.Env); err != nil {
		return fmt.Errorf("exec %s: %w", path, err)
	}
	return nil
}

// bindMount mounts m.Source at m.Target, creating the target (an empty
// folder, or an empty file for a file source) when it is missing.
func bindMount(m mountSpec) error {
	st, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("mount %s: %w", m.Target, err)
	}
	if st.IsDir() {
		err = os.MkdirAll(m.Target, 0o755)
	} else if _, serr := os.Stat(m.Target); os.IsNotExist(serr) {
		if err = os.MkdirAll(filepath.Dir(m.Target), 0o755); err == nil {
			err = os.WriteFile(m.Target, nil, 0o644)
		}
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", m.Target, err)
	}
	if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		if err := unix.Mount("", m.Target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", m.Target, err)
		}
	}
	return nil
}
