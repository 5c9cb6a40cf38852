package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/preflight"
)

// Glibc is the allocator the native backend reads (mallinfo2, glibc's
// arenas).
const Glibc = "glibc"

// allocatorLibraries are the shared libraries that replace malloc, by
// the start of their file names, and the allocator each is.
var allocatorLibraries = []struct{ prefix, name string }{
	{"libjemalloc", "jemalloc"},
	{"libtcmalloc", "tcmalloc"},
	{"libmimalloc", "mimalloc"},
	{"libsnmalloc", "snmalloc"},
	{"librpmalloc", "rpmalloc"},
	{"libhoard", "Hoard"},
	{"libtbbmalloc", "TBB's scalable allocator"},
	{"libscudo", "Scudo"},
}

// allocatorSymbols are symbols that only an allocator of that name
// defines, for a program that links it statically.
var allocatorSymbols = []struct{ symbol, name string }{
	{"mallctl", "jemalloc"},
	{"je_mallctl", "jemalloc"},
	{"tc_malloc", "tcmalloc"},
	{"mi_malloc", "mimalloc"},
	{"rpmalloc", "rpmalloc"},
	{"__libc_malloc", Glibc},
}

// allocatorOf names the allocator whose malloc a program calls, from
// the libraries it loads (libs: one that replaces malloc, such as
// libjemalloc.so.2, linked or preloaded), else from the symbols of the
// program itself (a static program carries its allocator), else glibc.
// heaptrack's own library, which wraps malloc, is not one. The name
// says where it was found: "jemalloc (libjemalloc.so.2)". glibc's
// figures under another allocator say nothing of the program's heap
// (docs/facts.md, fact 89).
func allocatorOf(libs []string, program string) string {
	for _, lib := range libs {
		base := filepath.Base(lib)
		for _, l := range allocatorLibraries {
			if strings.HasPrefix(base, l.prefix) {
				return fmt.Sprintf("%s (%s)", l.name, base)
			}
		}
	}
	if name := programAllocator(program); name != "" {
		return name
	}
	return Glibc
}

// programLibraries are the shared libraries the program loads: those
// mapped in process pid when it runs (snapctl attach), else those the
// dynamic loader would load at its start (ldd) with env in its
// environment (the plan's target.env after snapctl's own: a user's
// LD_PRELOAD counts), in dir.
func programLibraries(ctx context.Context, pid int, program, dir string, env []string) []string {
	if pid > 0 {
		if maps, err := proc.Maps(pid); err == nil {
			var libs []string
			for _, m := range maps {
				if strings.HasPrefix(m.Path, "/") {
					libs = append(libs, m.Path)
				}
			}
			return libs
		}
	}
	return preflight.LinkedLibraries(ctx, program, dir, append(os.Environ(), env...))
}

// programAllocator names the allocator program defines malloc with
// itself, "" when malloc comes from a library (glibc's libc.so.6, unless
// another one is mapped).
func programAllocator(program string) string {
	syms, _ := elfsym.Open(program, elfsym.Static|elfsym.Dynamic)
	defined := make(map[string]bool)
	for _, s := range syms {
		if elfsym.Defines(s) {
			defined[s.Name] = true
		}
	}
	if !defined["malloc"] {
		return ""
	}
	for _, s := range allocatorSymbols {
		if defined[s.symbol] {
			if s.name == Glibc {
				return Glibc
			}
			return s.name + " (linked into the program)"
		}
	}
	return "the program's own malloc"
}

// isJemalloc says that an allocator name of allocatorOf is jemalloc's,
// whose own statistics the agent reads (agent/jemalloc.py, jemalloc_stats).
func isJemalloc(name string) bool { return strings.HasPrefix(name, "jemalloc") }

// isGlibc says that an allocator name of allocatorOf is glibc's.
func isGlibc(name string) bool { return name == Glibc }
