package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quickStartMarker is the line of README.md right above the quick start's commands: a fenced
// sh block that TestQuickStart runs as written.
const quickStartMarker = "<!-- quickstart:"

// readmeBlock returns the commands of the fenced sh block that follows the line of readme
// starting with marker, and the README line the block's first command is on.
func readmeBlock(readme []byte, marker string) (string, int, error) {
	sc := bufio.NewScanner(bytes.NewReader(readme))
	n, start := 0, 0
	var block []string
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case start == 0 && strings.HasPrefix(line, marker):
			start = n
		case start == n-1 && start > 0:
			if strings.TrimSpace(line) != "```sh" {
				return "", 0, fmt.Errorf("README.md:%d: want the line ```sh after %q, got %q", n, marker, line)
			}
		case start > 0 && strings.TrimSpace(line) == "```":
			if len(block) == 0 {
				return "", 0, fmt.Errorf("README.md:%d: the block after %q is empty", start+1, marker)
			}
			return strings.Join(block, "\n") + "\n", start + 2, nil
		case start > 0:
			block = append(block, line)
		}
	}
	if start == 0 {
		return "", 0, fmt.Errorf("README.md: no line starting with %q", marker)
	}
	return "", 0, fmt.Errorf("README.md:%d: the block after %q has no closing ```", start+1, marker)
}

// TestQuickStartBlock checks, without a cluster, that README.md holds the quick start's
// block and that every file its commands name with -f exists, so that make test catches
// what would make TestQuickStart fail before it starts a cluster.
func TestQuickStartBlock(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, line, err := readmeBlock(readme, quickStartMarker)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for i, l := range strings.Split(block, "\n") {
		f := strings.Fields(l)
		for j := 0; j+1 < len(f); j++ {
			if f[j] != "-f" {
				continue
			}
			files++
			if _, err := os.Stat(filepath.Join("..", "..", f[j+1])); err != nil {
				t.Errorf("README.md:%d: %s names %s: %v", line+i, f[0], f[j+1], err)
			}
		}
	}
	if files == 0 {
		t.Errorf("README.md:%d: the quick start applies no file with kubectl apply -f:\n%s", line, block)
	}
}

// TestReadmeBlock checks the extraction on well-formed and broken READMEs.
func TestReadmeBlock(t *testing.T) {
	good := "# x\n\n<!-- quickstart: runs -->\n```sh\nmake a   # one\nmake b\n```\nafter\n"
	block, line, err := readmeBlock([]byte(good), quickStartMarker)
	if err != nil || block != "make a   # one\nmake b\n" || line != 5 {
		t.Errorf("readmeBlock = %q, line %d, %v; want the two commands from line 5", block, line, err)
	}
	for name, bad := range map[string]string{
		"no marker":     "```sh\nmake a\n```\n",
		"not sh":        "<!-- quickstart: -->\n```console\nmake a\n```\n",
		"text between":  "<!-- quickstart: -->\n\n```sh\nmake a\n```\n",
		"empty":         "<!-- quickstart: -->\n```sh\n```\n",
		"never closed":  "<!-- quickstart: -->\n```sh\nmake a\n",
		"marker at end": "x\n<!-- quickstart: -->",
	} {
		if block, _, err := readmeBlock([]byte(bad), quickStartMarker); err == nil {
			t.Errorf("%s: readmeBlock = %q, want an error", name, block)
		}
	}
}
