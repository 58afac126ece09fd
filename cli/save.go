package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
)

// saver writes a run's artifacts under one directory for `airlock run --out DIR`. The
// names come from the sandboxed program, so they are hostile: every file is opened
// through an os.Root, which refuses any path (.., an absolute name, a symlink planted
// in DIR) that resolves outside it, no hidden name is written, and nothing is
// overwritten unless asked.
type saver struct {
	dir   string
	root  *os.Root
	force bool
}

// newSaver creates dir when missing and opens it; it runs before the program does, so a
// bad --out costs no run.
func newSaver(dir string, force bool) (*saver, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &saver{dir: dir, root: root, force: force}, nil
}

func (s *saver) close() { _ = s.root.Close() }

var errExists = errors.New("exists; pass --force to overwrite it")

// save writes one file at name (slash-separated, relative to the output directory).
func (s *saver) save(name string, data []byte) error {
	// A name the sandbox could write but a person could not read back safely (controls,
	// line breaks and tabs, BiDi and other invisible characters, backslashes: whatever
	// Escape rewrites) or that is not a plain relative path is never written.
	if sanitize.Escape(name) != name || !filepath.IsLocal(filepath.FromSlash(name)) {
		return fmt.Errorf("refused: not a plain relative file name")
	}
	// Nor a hidden name: --out is often a project or home directory, where tools read
	// dot files and run what they say (.git/config's core.fsmonitor at the next git
	// status, .ssh/authorized_keys, .envrc, .config/autostart). A program's figures and
	// tables need none.
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") {
			return fmt.Errorf("refused: a hidden name (a tool may read and run a dot file)")
		}
	}
	if dir := path.Dir(name); dir != "." {
		if err := s.root.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	if !s.force {
		return writeNew(s.root, name, data, errExists)
	}
	// Overwrite a regular file only: never write through a symlink or into a device.
	fi, err := s.root.Lstat(name)
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return fmt.Errorf("exists and is not a regular file")
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	// A new file renamed over the old one, not the old one truncated: that would keep
	// its mode (a script's execute bit, for the program's text) and write through its
	// other hard links.
	tmp := path.Join(path.Dir(name), fmt.Sprintf(".%s.airlock-%d", path.Base(name), os.Getpid()))
	if err := writeNew(s.root, tmp, data, nil); err != nil {
		return err
	}
	if err := s.root.Rename(tmp, name); err != nil {
		_ = s.root.Remove(tmp)
		return err
	}
	return nil
}

// writeNew creates name (mode 0644, never an existing file: exists is the error then)
// and writes data to it.
func writeNew(root *os.Root, name string, data []byte, exists error) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) && exists != nil {
		return exists
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = root.Remove(name)
	}
	return err
}

// saveArtifacts writes the returned artifacts when s is set, and says on w what it did;
// without --out it says how to keep them. It reports whether every file was saved.
func saveArtifacts(s *saver, outDir string, arts []sandbox.Artifact, w io.Writer) bool {
	returned := func(a sandbox.Artifact) bool {
		// The same rule as the result's "returned": an empty file comes back with a hash.
		return a.Skipped == "" && (a.Data != nil || a.Size == 0 && a.SHA256 != "")
	}
	if s == nil {
		if n := len(slices.DeleteFunc(slices.Clone(arts), func(a sandbox.Artifact) bool { return !returned(a) })); n > 0 {
			fmt.Fprintf(w, "airlock run: %d file(s) in %s/ not saved; pass --out DIR to save them\n", n, outDir)
		}
		return true
	}
	ok := true
	for _, a := range arts {
		if !returned(a) {
			// What the sandbox did not return (a symlink, a FIFO, a file over a cap, the
			// entries past the listed ones, which come as one named "...") is named too,
			// and fails the run like a file that could not be written: with --out, exit 0
			// and the "saved" lines are the whole story, not a JSON field a script never
			// reads.
			why := a.Skipped
			if why == "" {
				why = "not returned by the sandbox"
			}
			fmt.Fprintf(w, "airlock run: not saved: %s/%s: %s\n", outDir, sanitize.Escape(a.Path), sanitize.Escape(why))
			ok = false
			continue
		}
		if err := s.save(a.Path, a.Data); err != nil {
			// The name as the program wrote it, escaped to one line (a line break in it
			// would forge a "saved" line): joined to DIR, a "../x" would read as if it
			// had been aimed somewhere else.
			fmt.Fprintf(w, "airlock run: not saved: %s/%s: %v\n", outDir, sanitize.Escape(a.Path), err)
			ok = false
			continue
		}
		fmt.Fprintf(w, "airlock run: saved %s (%d bytes)\n", filepath.Join(s.dir, a.Path), len(a.Data))
	}
	return ok
}
