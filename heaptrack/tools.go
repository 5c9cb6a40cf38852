package heaptrack

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/snapctl/snapctl/internal/elfsym"
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
//
// Between the two, snapctl sizes libunwind's cache as heaptrack's
// Trace::setup would. heaptrack_inject hooks the allocation functions
// first and sets libunwind up after, and that setup maps a new cache
// without libunwind's lock, while the program's other threads, already
// hooked, unwind through the old one: in a program whose threads
// allocate, about one injection in 70 died of SIGSEGV inside libunwind
// (docs/facts.md, fact 151). Set up before any hook is in, the cache is
// already of that size when heaptrack asks again, and libunwind leaves
// it alone.
func (t Tools) InjectCommands(out string) []string {
	cmds := []string{`call (void) dlmopen(0, ` + cString(t.Inject) + `, 2)`}
	cmds = append(cmds, unwindCacheCommands(t.Inject)...)
	return append(cmds, `call (void) heaptrack_inject(`+cString(out)+`)`)
}

// unwindCacheCommands are the gdb commands that set libunwind's local
// address space up as heaptrack 1.4's Trace::setup does (trace_libunwind.cpp):
// per-thread caching (which a libunwind built without thread-local
// storage takes as its global cache, under its lock) and a cache of 1024
// entries. unw_set_cache_size is called twice: on a cache never used,
// libunwind 1.6 only puts its default arrays in and records the default
// size, and maps the cache asked for at the next call; a call that finds
// the size already asked for returns at once. The names are libunwind's
// for the host's architecture (its unw_ macros), and the commands are
// made only where the inject library calls libunwind's through them, as
// Debian's does; a heaptrack that unwinds otherwise, or on an
// architecture whose names are not known here, gets none.
func unwindCacheCommands(inject string) []string {
	arch, ok := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	if !ok || !imports(inject, "_UL"+arch+"_set_cache_size") {
		return nil
	}
	space := `*(void **) &_UL` + arch + `_local_addr_space`
	size := `call (void) ((int (*)(void *, unsigned long, int)) _UL` + arch + `_set_cache_size)(` + space + `, 1024, 0)`
	return []string{
		`call (void) ((int (*)(void *, int)) _UL` + arch + `_set_caching_policy)(` + space + `, 2)`,
		size,
		size,
	}
}

// imports reports whether the ELF file at path calls the function name
// of another module: name is among its dynamic symbols, undefined.
func imports(path, name string) bool {
	syms, _ := elfsym.Open(path, elfsym.Dynamic)
	for _, s := range syms {
		if s.Name == name && s.Section == elf.SHN_UNDEF {
			return true
		}
	}
	return false
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
