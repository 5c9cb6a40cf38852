package backend

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/fsutil"
)

// SnapshotDir is the run directory's folder of measurement files.
const SnapshotDir = "snapshots"

// UnlistedPath is where a kept file of the run directory dir waits until
// run.json lists it: its name in run.json (snapshots/NNNN-BP-HIT.massif.gz)
// with a dot before the base name. A file takes its own name only once a
// run.json that lists it is written, so that a snapctl killed at any
// moment, or a run directory too full for run.json, leaves no file under
// its own name that run.json does not list (docs/design.md, "The run
// directory").
func UnlistedPath(dir, name string) string {
	return filepath.Join(dir, filepath.Dir(name), "."+filepath.Base(name))
}

// MoveFile renames src to dst, copying when they are on different file
// systems (the private directory lives in TMPDIR, the run directory
// anywhere) or when dst is not a regular file, which is written through
// (see fsutil.WriteFile).
func MoveFile(src, dst string) error {
	if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		in, err := os.Open(src)
		if err != nil {
			return err
		}
		defer in.Close()
		if err := fsutil.WriteFile(dst, 0o644, func(w io.Writer) error { _, err := io.Copy(w, in); return err }); err != nil {
			return err
		}
		return os.Remove(src)
	}
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

// PyDict returns a Python dict literal of string and bool values, in the
// order given: a measurement as agent.py takes it.
func PyDict(kv ...any) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		v := "False"
		switch x := kv[i+1].(type) {
		case string:
			v = gdb.PyString(x)
		case bool:
			if x {
				v = "True"
			}
		}
		parts = append(parts, gdb.PyString(kv[i].(string))+": "+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
