package driver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/internal/fsutil"
)

// Names inside a run directory (docs/design.md, "The run directory").
const (
	planFile     = "plan.yaml"
	manifestFile = "run.json"
	reportFile   = "report.md"
	snapshotDir  = backend.SnapshotDir
	traceFile    = "gdb-mi.log"
	agentTrace   = "gdb-agent.jsonl"
)

// DefaultRunDir returns the run directory used when the user names none:
// ./snapctl-runs/YYYYMMDD-HHMMSS-BINARY, made unique with a numeric suffix
// when a run of the same binary started in the same second.
func DefaultRunDir(binary string, now time.Time) string {
	base := unsafeName.ReplaceAllString(filepath.Base(binary), "_")
	name := now.Format("20060102-150405") + "-" + base
	dir := filepath.Join("snapctl-runs", name)
	for i := 2; ; i++ {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			return dir
		}
		dir = filepath.Join("snapctl-runs", fmt.Sprintf("%s-%d", name, i))
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)

// prepareRunDir creates dir (and its parents) or, when it exists, accepts it
// only if it is an empty directory or force is set. It returns the absolute
// path. The snapshots folder is created inside.
func prepareRunDir(dir string, force bool) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &OutputDirError{Path: dir, Err: err}
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return "", &OutputDirError{Path: dir, Err: errors.New("exists and is not a directory")}
	case err == nil && !force:
		empty, err := isEmptyDir(abs)
		if err != nil {
			return "", &OutputDirError{Path: dir, Err: err}
		}
		if !empty {
			return "", &OutputDirError{Path: dir, Err: errDirNotEmpty}
		}
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", &OutputDirError{Path: dir, Err: err}
	}
	if err := os.MkdirAll(filepath.Join(abs, snapshotDir), 0o755); err != nil {
		return "", &OutputDirError{Path: dir, Err: err}
	}
	if force {
		if err := clearRunFiles(abs); err != nil {
			return "", &OutputDirError{Path: dir, Err: err}
		}
	}
	return abs, nil
}

// clearRunFiles removes the files an earlier run left in dir, which would
// otherwise be taken for this run's output: snapctl's own files and the
// snapshots it kept or staged, and what a snapctl killed outright leaves
// (hidden snapshots run.json does not list, spools, half-written
// files). Files snapctl does not write are left alone, and so is what is
// not a regular file under those names (a symlink, a FIFO): the run
// writes through it.
func clearRunFiles(dir string) error {
	names := []string{manifestFile, reportFile, htmlFile, traceFile, agentTrace}
	var snaps []string
	patterns := []string{".stops-*.jsonl", ".events-*.jsonl", ".diffs-*.jsonl", "." + manifestFile + ".tmp-*", "." + reportFile + ".tmp-*", "." + htmlFile + ".tmp-*"}
	for _, b := range backends {
		patterns = append(patterns, b.files...)
	}
	for _, pattern := range patterns {
		more, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		snaps = append(snaps, more...)
	}
	for _, name := range names {
		snaps = append(snaps, filepath.Join(dir, name))
	}
	for _, path := range snaps {
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// writeFileAtomicFunc writes what write streams to path: a regular file
// is replaced through a temporary file and a rename, so a reader never
// sees half a file (a run.json that exists is complete); what is not a
// regular file is written through (see fsutil.WriteFile).
func writeFileAtomicFunc(path string, write func(io.Writer) error) error {
	return fsutil.WriteFile(path, 0o644, write)
}

// newPrivateDir creates the session's private directory: mode 0700, owned by
// the user, with a name free of spaces (docs/facts.md, fact 6: monitor
// command lines are split on spaces), locked for the session's life. It
// holds the vgdb FIFOs (fact 10) and snapshots while massif writes them
// (docs/design.md, "The private directory"). Before that it sweeps what
// dead runs left beside it (sweepDeadRuns). release unlocks it; the caller
// removes it.
func newPrivateDir() (dir string, release func(), err error) {
	dir, err = makePrivateDir(os.TempDir())
	for err == nil && strings.ContainsAny(dir, " \t\n%") {
		// TMPDIR with a space, or a % that valgrind would expand in
		// --vgdb-prefix: fall back to /tmp, which has neither.
		os.RemoveAll(dir)
		dir, err = makePrivateDir("/tmp")
	}
	if err != nil {
		return "", nil, fmt.Errorf("creating private directory: %w", err)
	}
	if release, err = lockPrivateDir(dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("locking private directory: %w", err)
	}
	sweepDeadRuns(filepath.Dir(dir))
	return dir, release, nil
}

func makePrivateDir(tmp string) (string, error) {
	dir, err := os.MkdirTemp(tmp, "snapctl-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// unlistedPath is where a kept snapshot waits, compressed, until run.json
// lists it: its name in run.json (snapshots/NNNN-BP-HIT.massif.gz) with a
// dot before the base name. A snapshot takes its own name only once a
// run.json that lists it is written (publish), so that a snapctl killed
// at any moment, or a run directory too full for run.json, leaves no
// snapshot under its own name that run.json does not list
// (docs/design.md, "The run directory").
func (s *session) unlistedPath(name string) string {
	return unlistedPath(s.dir, name)
}

func unlistedPath(dir, name string) string { return backend.UnlistedPath(dir, name) }

// publish gives the snapshots that the run.json just written lists their
// own names. A snapctl killed before it ends leaves a run.json that lists
// a few snapshots still under their unlisted names; never a file that
// run.json does not list. A file that cannot be moved is left where it
// is, and the first error returned.
func (s *session) publish() error {
	err := publish(s.dir, s.rec.unlisted)
	s.rec.unlisted = s.rec.unlisted[:0]
	return err
}

// publish gives the snapshots names, unlisted in the run directory dir,
// their own names.
func publish(dir string, names []string) error {
	var first error
	for _, name := range names {
		if err := backend.MoveFile(unlistedPath(dir, name), filepath.Join(dir, name)); err != nil && first == nil {
			first = fmt.Errorf("keeping snapshot %s: %w", name, err)
		}
	}
	return first
}

// dropUnlisted removes the snapshots that no run.json lists, when the
// last one could not be written: the run directory then holds only what
// the run.json it has lists, and a full disk gets its space back.
func (s *session) dropUnlisted() {
	for _, name := range s.rec.unlisted {
		os.Remove(s.unlistedPath(name))
	}
	s.rec.unlisted = nil
}
