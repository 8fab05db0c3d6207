package export

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dorylus-gnn/dorylus/pkg/checkpoint"
)

// versionPrefix starts the name of a version's folder: v-RUN-N.
const versionPrefix = "v-"

// ErrExists is wrapped by the error of Begin for a location that already holds a model or
// predictions, or other files, and was not asked to replace them.
var ErrExists = errors.New("already holds an export")

// Target is a new version of an export's location, a checkpoint.Store: every file goes to the
// version's own folder beside the older version's, and the card or manifest, put last, goes to
// the top of the location naming the version (Card.Version, Manifest.Version). That one Put —
// a rename on a file system, one PutObject on S3 — switches readers from the old version to
// the new one; only then are the older versions deleted. A crash at any moment leaves the old
// export or the new, whole.
type Target struct {
	Root    checkpoint.Store
	Version string
	older   []string // top-level objects and version folders to delete after the switch
}

// top reports whether name is a file that goes to the top of the location: the card or the
// manifest, which name the version.
func top(name string) bool { return name == CardFile || name == ManifestFile }

// pointer is what Begin reads of the card or manifest at the top of a location.
type pointer struct {
	Version string `json:"version"`
	Files   []File `json:"files"`
}

// Begin starts a new version of run's export at root. A location holding a model or
// predictions (or any other file) is refused, wrapping ErrExists, unless overwrite, or unless
// what it holds is a version of the same run (a job exporting again after a restart).
func Begin(ctx context.Context, root checkpoint.Store, run string, overwrite bool) (*Target, error) {
	if run == "" || strings.ContainsAny(run, `/\`) {
		return nil, fmt.Errorf("export to %s: bad run id %q", root, run)
	}
	names, err := root.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", root, err)
	}
	folders, err := root.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("export to %s: %w", root, err)
	}
	t := &Target{Root: root}
	current, attempt := "", 0
	for _, n := range names {
		if !top(n) {
			continue
		}
		b, err := root.Get(ctx, n)
		if err != nil {
			return nil, fmt.Errorf("export to %s: %w", root, err)
		}
		var p pointer
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("export to %s: %s: %w", root, n, err)
		}
		current = n + " (" + describeVersion(p.Version) + ")"
		if k, ok := attemptOf(p.Version, run); ok {
			attempt = max(attempt, k)
		} else if !overwrite {
			return nil, fmt.Errorf("%s holds %s: pass --overwrite (spec.output.overwrite) to replace it, or choose another location: %w", root, current, ErrExists)
		}
	}
	if current == "" && len(names) > 0 && !overwrite {
		return nil, fmt.Errorf("%s holds %d files (%s) and no model: pass --overwrite (spec.output.overwrite) to write there, or choose another location: %w",
			root, len(names), strings.Join(names, ", "), ErrExists)
	}
	t.Version = versionPrefix + run + "-" + strconv.Itoa(attempt+1)
	for _, n := range names {
		if n != CardFile && n != ManifestFile {
			t.older = append(t.older, n) // files of an export written before versions
		}
	}
	for _, f := range folders {
		if strings.HasPrefix(f, versionPrefix) && f != t.Version {
			t.older = append(t.older, f+"/")
		}
	}
	return t, nil
}

// describeVersion names a version for messages.
func describeVersion(v string) string {
	if v == "" {
		return "written before versions"
	}
	return "version " + v
}

// attemptOf returns N of a version v-RUN-N of run.
func attemptOf(version, run string) (int, bool) {
	rest, ok := strings.CutPrefix(version, versionPrefix+run+"-")
	if !ok {
		return 0, false
	}
	k, err := strconv.Atoi(rest)
	return k, err == nil && k > 0
}

// folder returns the store of the new version's files.
func (t *Target) folder() checkpoint.Store { return t.Root.Sub(t.Version) }

// Put publishes a file of the new version; the card or manifest goes to the top, switching to
// the version, and then the older versions are deleted.
func (t *Target) Put(ctx context.Context, name string, data []byte) error {
	if !top(name) {
		return t.folder().Put(ctx, name, data)
	}
	if err := t.Root.Put(ctx, name, data); err != nil {
		return err
	}
	other := ManifestFile
	if name == ManifestFile {
		other = CardFile
	}
	// The other pointer first (its files are among the older), then what it named.
	for _, n := range append([]string{other}, t.older...) {
		var err error
		if f, ok := strings.CutSuffix(n, "/"); ok {
			err = removeFolder(ctx, t.Root, f)
		} else {
			err = t.Root.Delete(ctx, n)
		}
		if err != nil {
			return fmt.Errorf("%s now holds version %s, but removing the older %s failed: %w", t.Root, t.Version, n, err)
		}
	}
	t.older = nil
	return nil
}

// removeFolder deletes every object in root's folder name, then the folder (on S3 there is
// none: that Delete finds no object).
func removeFolder(ctx context.Context, root checkpoint.Store, name string) error {
	st := root.Sub(name)
	names, err := st.List(ctx)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := st.Delete(ctx, n); err != nil {
			return err
		}
	}
	return root.Delete(ctx, name)
}

// Get reads a file of the new version.
func (t *Target) Get(ctx context.Context, name string) ([]byte, error) {
	if top(name) {
		return t.Root.Get(ctx, name)
	}
	return t.folder().Get(ctx, name)
}

// List returns the files of the new version written so far.
func (t *Target) List(ctx context.Context) ([]string, error) { return t.folder().List(ctx) }

// Delete removes a file of the new version.
func (t *Target) Delete(ctx context.Context, name string) error {
	return t.folder().Delete(ctx, name)
}

// Sub returns a folder of the new version.
func (t *Target) Sub(name string) checkpoint.Store { return t.folder().Sub(name) }

// Folders returns the folders of the new version.
func (t *Target) Folders(ctx context.Context) ([]string, error) { return t.folder().Folders(ctx) }

// String returns the location.
func (t *Target) String() string { return t.Root.String() }

// versionOf returns the folder of the files a store's writer lists: the version of a Target,
// "" (the top) otherwise.
func versionOf(st checkpoint.Store) string {
	if t, ok := st.(*Target); ok {
		return t.Version
	}
	return ""
}

// Files returns the store holding the files a card or manifest of version lists, checking that
// version names one folder.
func Files(root checkpoint.Store, version string) (checkpoint.Store, error) {
	switch {
	case version == "":
		return root, nil
	case !strings.HasPrefix(version, versionPrefix) || strings.ContainsAny(version, `/\`) || slices.Contains([]string{".", ".."}, version):
		return nil, fmt.Errorf("%s: version %q is not a version folder", root, version)
	}
	return root.Sub(version), nil
}
