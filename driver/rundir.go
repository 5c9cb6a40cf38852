package driver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Names inside a run directory (see DESIGN.md, "What a run leaves behind").
const (
	planFile     = "plan.yaml"
	manifestFile = "run.json"
	reportFile   = "report.md"
	snapshotDir  = "snapshots"
	valgrindLog  = "valgrind.log"
	massifOut    = "massif.out"
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
// snapshots it kept. Files snapctl does not write are left alone.
func clearRunFiles(dir string) error {
	names := []string{manifestFile, reportFile, traceFile, agentTrace, valgrindLog, massifOut}
	snaps, err := filepath.Glob(filepath.Join(dir, snapshotDir, "*.massif"))
	if err != nil {
		return err
	}
	for _, name := range names {
		snaps = append(snaps, filepath.Join(dir, name))
	}
	for _, path := range snaps {
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

// writeFileAtomicFunc writes what write streams to path through a temporary
// file in the same directory and a rename, so a reader never sees half a
// file: a run.json that exists is complete.
func writeFileAtomicFunc(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// newPrivateDir creates the session's private directory: mode 0700, owned by
// the user, with a name free of spaces (fact 6: monitor command lines are
// split on spaces). It holds the vgdb FIFOs (fact 10) and snapshots while
// massif writes them.
func newPrivateDir() (string, error) {
	dir, err := os.MkdirTemp("", "snapctl-")
	if err != nil {
		return "", fmt.Errorf("creating private directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("creating private directory: %w", err)
	}
	for _, r := range dir {
		if r == ' ' || r == '\t' || r == '\n' {
			// TMPDIR with a space: fall back to /tmp, which has none.
			os.RemoveAll(dir)
			dir, err = os.MkdirTemp("/tmp", "snapctl-")
			if err != nil {
				return "", fmt.Errorf("creating private directory: %w", err)
			}
			break
		}
	}
	return dir, nil
}

// moveFile renames src to dst, copying when they are on different file
// systems (the private directory lives in TMPDIR, the run directory anywhere).
func moveFile(src, dst string) error {
	if err := os.Rename(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return err
	}
	return os.Remove(src)
}
