package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// imageMap maps image repositories to folders of local binaries (--image).
type imageMap map[string]string

// String implements flag.Value.
func (m imageMap) String() string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value: REPOSITORY=DIR.
func (m imageMap) Set(s string) error {
	repo, dir, ok := strings.Cut(s, "=")
	if !ok || repo == "" || dir == "" {
		return fmt.Errorf("%q: want REPOSITORY=DIR", s)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return fmt.Errorf("%q: %s is not a folder", s, dir)
	}
	m[repo] = abs
	return nil
}

// repository is the image reference without its tag or digest.
func repository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// resolve is the local binary that runs command (the image's path, such as
// /dorylus) of image.
func (m imageMap) resolve(image, command string) (string, error) {
	dir, ok := m[repository(image)]
	if !ok {
		return "", fmt.Errorf("image %s: no local folder maps its repository %s (nodeagent --image)", image, repository(image))
	}
	path := filepath.Join(dir, filepath.Clean("/"+command))
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("image %s, command %s: %w", image, command, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("image %s, command %s: %s is not an executable file", image, command, path)
	}
	return path, nil
}
