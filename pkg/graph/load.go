package graph

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dorylus-gnn/dorylus/datasets"
)

// DataDirEnv names the environment variable holding the folder searched for shipped datasets.
const DataDirEnv = "DORYLUS_DATA_DIR"

// shipped are the datasets of the repository's datasets/ folder; the first is embedded.
var shipped = []string{"cora", "citeseer", "pubmed", "amazon_computers", "coauthor_cs"}

// Builtins returns the dataset names Load knows: cora (embedded in the binary) and the other
// shipped datasets (found under $DORYLUS_DATA_DIR or ./datasets).
func Builtins() []string { return slices.Clone(shipped) }

// Load loads the dataset named by spec:
//   - "cora": the copy embedded in the binary;
//   - another name of Builtins: directory NAME under $DORYLUS_DATA_DIR, else ./datasets/NAME;
//   - "rmat:nodes=N,edges=E,..." : a synthetic R-MAT graph (see ParseRMATSpec and RMAT);
//   - any other string: a path to a plain-text dataset directory (it holds meta.json), a
//     prepared directory (it holds PreparedFileName) or a prepared file (detected by its magic).
//
// Names take precedence over paths; write ./cora for a directory called cora. A dataset without
// features is refused with an error wrapping ErrNoFeatures unless opts.AllowMissingFeatures.
func Load(spec string, opts LoadOptions) (*Dataset, error) {
	d, err := load(spec, opts)
	if err != nil {
		return nil, err
	}
	if !opts.AllowMissingFeatures {
		if err := d.RequireFeatures(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func load(spec string, opts LoadOptions) (*Dataset, error) {
	switch {
	case spec == "":
		return nil, fmt.Errorf("graph: empty dataset spec; want one of %s, an rmat: spec or a path", strings.Join(shipped, ", "))
	case strings.HasPrefix(spec, "s3://") || strings.HasPrefix(spec, "http://") || strings.HasPrefix(spec, "https://"):
		return nil, fmt.Errorf("graph: dataset %s is remote: fetch it to a local path first (package source)", spec)
	case strings.HasPrefix(spec, "rmat:"):
		p, err := ParseRMATSpec(spec)
		if err != nil {
			return nil, err
		}
		return RMAT(p)
	case spec == shipped[0]:
		return loadText(datasets.Cora, spec, "embedded:"+spec, opts)
	case slices.Contains(shipped, spec):
		var looked []string
		if root := os.Getenv(DataDirEnv); root != "" {
			dir := filepath.Join(root, spec)
			if isDir(dir) {
				return loadPath(dir, opts)
			}
			looked = append(looked, "$"+DataDirEnv+"/"+spec+" = "+dir)
		} else {
			looked = append(looked, "$"+DataDirEnv+" (not set)")
		}
		dir := filepath.Join("datasets", spec)
		if isDir(dir) {
			return loadPath(dir, opts)
		}
		abs, _ := filepath.Abs(dir)
		looked = append(looked, "./"+filepath.ToSlash(dir)+" = "+abs)
		return nil, fmt.Errorf("graph: dataset %s not found (looked in %s): %w; set %s to the folder holding it",
			spec, strings.Join(looked, ", "), fs.ErrNotExist, DataDirEnv)
	}
	return loadPath(spec, opts)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Format is a dataset layout Load reads from a path.
type Format string

// The layouts Load reads from a path.
const (
	FormatText     Format = "text"     // the plain-text layout of datasets/FORMAT.md (meta.json)
	FormatPrepared Format = "prepared" // the prepared binary format (a file, or a directory holding PreparedFileName)
	FormatOGB      Format = "ogb"      // OGB's node-property-prediction layout (LoadOGB)
	FormatNumPy    Format = "numpy"    // NumPy arrays with PyG's names: a directory of .npy files or a .npz (LoadNumPy)
)

// Formats lists the layouts Load reads from a path.
var Formats = []Format{FormatText, FormatPrepared, FormatOGB, FormatNumPy}

// DetectFormat returns the layout of the dataset at path p, a directory or a file.
func DetectFormat(p string) (Format, error) {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("graph: dataset %q is not a builtin (%s), an rmat: spec, or an existing path: %w",
				p, strings.Join(shipped, ", "), err)
		}
		return "", fmt.Errorf("graph: dataset %q: %w", p, err)
	}
	switch {
	case st.IsDir() && isFile(filepath.Join(p, metaFile)):
		return FormatText, nil
	case st.IsDir() && isFile(filepath.Join(p, PreparedFileName)):
		return FormatPrepared, nil
	case st.IsDir() && IsOGBDir(os.DirFS(p), "."):
		return FormatOGB, nil
	case IsNumPy(p):
		return FormatNumPy, nil
	case st.IsDir():
		if parts, ok := partitionedDir(p); ok {
			return "", fmt.Errorf("graph: directory %s holds the %d partition files of `dorylus prepare --partitions %d`, not a whole dataset: "+
				"train it with --graph-servers %d, or load the dataset it was cut from", p, parts, parts, parts)
		}
		return "", fmt.Errorf("graph: directory %s holds neither %s (plain-text dataset), %s (prepared dataset), %s (OGB layout) nor %s.npy (NumPy arrays)",
			p, metaFile, PreparedFileName, ogbNumNodes, npEdgeIndex)
	case IsPreparedFile(p):
		return FormatPrepared, nil
	case filepath.Base(p) == metaFile:
		return FormatText, nil
	}
	return "", fmt.Errorf("graph: %s is not a prepared dataset file (%w), a .npz archive nor a dataset directory", p, ErrNotPrepared)
}

// CheckFormat returns an error unless the dataset at path p is in layout want, or want is
// empty.
func CheckFormat(p string, want Format) error {
	if want == "" {
		return nil
	}
	_, err := formatOf(p, want)
	return err
}

// formatOf returns the layout of the dataset at path p, which must be want unless want is
// empty.
func formatOf(p string, want Format) (Format, error) {
	if want != "" && !slices.Contains(Formats, want) {
		return "", fmt.Errorf("graph: dataset %s: format %q is none of %v", p, want, Formats)
	}
	f, err := DetectFormat(p)
	if err != nil {
		return "", err
	}
	if want != "" && f != want {
		return "", fmt.Errorf("graph: dataset %s is in the %s layout, not the %s layout its configuration names", p, f, want)
	}
	return f, nil
}

// loadPath loads the dataset at path p in the layout DetectFormat finds, which must be
// opts.Format when that is set.
func loadPath(p string, opts LoadOptions) (*Dataset, error) {
	f, err := formatOf(p, opts.Format)
	if err != nil {
		return nil, err
	}
	switch f {
	case FormatText:
		if filepath.Base(p) == metaFile && !isDir(p) {
			p = filepath.Dir(p)
		}
		return loadText(os.DirFS(p), ".", p, opts)
	case FormatOGB:
		return LoadOGB(os.DirFS(p), ".", displayDir(p), opts)
	case FormatNumPy:
		return LoadNumPy(p, opts)
	}
	return ReadPrepared(p)
}

// displayDir is how errors name directory p: as given, or its absolute path when its base
// name would not name it (".", "..").
func displayDir(p string) string {
	if b := filepath.Base(p); b == "." || b == ".." || b == string(filepath.Separator) {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	return filepath.Clean(p)
}

// Prepare loads srcSpec (as Load does, keeping graph-only datasets) and writes it in the prepared
// format to dst: a file path, or a directory (existing, or named with a trailing separator) that
// then receives PreparedFileName.
func Prepare(srcSpec, dst string) error {
	d, err := Load(srcSpec, LoadOptions{AllowMissingFeatures: true})
	if err != nil {
		return err
	}
	if (dst != "" && os.IsPathSeparator(dst[len(dst)-1])) || isDir(dst) {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("graph: prepare: %w", err)
		}
		dst = filepath.Join(dst, PreparedFileName)
	}
	return WritePreparedFile(dst, d)
}

// partitionedDir reports whether dir holds the file of partition 0 of some partitioning, and
// the number of parts its name gives.
func partitionedDir(dir string) (parts int, ok bool) {
	names, _ := filepath.Glob(filepath.Join(dir, PartitionFileGlob))
	for _, n := range names {
		if p, parts, ok := ParsePartitionFileName(filepath.Base(n)); ok && p == 0 {
			return parts, true
		}
	}
	return 0, false
}
