package heaptrack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Tools are heaptrack's installed parts that snapctl runs or loads.
type Tools struct {
	Preload   string // libheaptrack_preload.so, for LD_PRELOAD
	Inject    string // libheaptrack_inject.so, for dlopen into a running process
	Interpret string // heaptrack_interpret: raw stream on stdin, symbolized on stdout
}

// MissingError says which heaptrack part is missing and which Debian
// package installs it.
type MissingError struct {
	Path    string
	Package string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("heaptrack is not installed: %s is missing (install the Debian package %s)", e.Path, e.Package)
}

// libDirs are where distributions install heaptrack's libraries and
// interpreter; Debian's is first.
var libDirs = []string{"/usr/lib/heaptrack", "/usr/lib/x86_64-linux-gnu/heaptrack", "/usr/lib64/heaptrack"}

// FindTools finds heaptrack's preload and inject libraries and its
// interpreter, in dir when it is not empty, else where distributions put
// them. A missing part is a *MissingError.
func FindTools(dir string) (Tools, error) {
	dirs := libDirs
	if dir != "" {
		dirs = []string{dir}
	}
	var t Tools
	for _, part := range []struct {
		dst  *string
		name string
	}{{&t.Preload, "libheaptrack_preload.so"}, {&t.Inject, "libheaptrack_inject.so"}, {&t.Interpret, "libexec/heaptrack_interpret"}} {
		for _, d := range dirs {
			p := filepath.Join(d, part.name)
			if _, err := os.Stat(p); err == nil {
				*part.dst = p
				break
			}
		}
		if *part.dst == "" {
			return Tools{}, &MissingError{Path: filepath.Join(dirs[0], part.name), Package: "heaptrack"}
		}
	}
	return t, nil
}

// Env returns the environment entries that make a program started with
// them load the preload library and write its raw stream to out (the
// Recorder's FIFO). They are for the program only: gdb itself must not
// run with them (gdb's `set environment`, with `set startup-with-shell
// off` so that no shell is traced either).
func (t Tools) Env(out string) []string {
	return []string{"LD_PRELOAD=" + t.Preload, "DUMP_HEAPTRACK_OUTPUT=" + out}
}

// InjectCommands are the gdb CLI commands that start heaptrack in a
// running process stopped under gdb, writing its raw stream to out, as
// `heaptrack -p` does: dlmopen loads the inject library into the base
// namespace (RTLD_NOW), and heaptrack_inject opens out and hooks the
// allocation functions in every loaded module's relocation tables except
// ld.so's. Blocks allocated before are unknown: the interpreter drops
// their frees. gdb passes the strings by allocating them in the process,
// before heaptrack records.
func (t Tools) InjectCommands(out string) []string {
	return []string{
		`call (void) dlmopen(0, ` + cString(t.Inject) + `, 2)`,
		`call (void) heaptrack_inject(` + cString(out) + `)`,
	}
}

// StopCommand is the gdb CLI command that ends heaptrack's recording in a
// process it was injected into: the library writes its buffer out,
// closes its output (the stream ends) and restores the hooks; it stays
// loaded and idle, and the process runs on as before.
const StopCommand = `call (void) heaptrack_stop()`

// cString quotes s as a C string literal for gdb's expression parser.
func cString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range []byte(s) {
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, "\\%03o", c)
				continue
			}
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
