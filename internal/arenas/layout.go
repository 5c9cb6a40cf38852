package arenas

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/internal/proc"
)

// mpLayouts gives, by the size of mp_, the offsets of n_mmaps and
// mmapped_mem in it: 112 bytes up to glibc 2.34, 136 from 2.35 to 2.41
// (the transparent huge page fields).
var mpLayouts = map[uint64][2]int{112: {40, 56}, 136: {60, 80}}

// LayoutOf finds the layout of process pid's glibc the way agent.py does
// (libc_symbols): libc's symbol table, in its separate debug file under
// /usr/lib/debug/.build-id (Debian's libc6-dbg), at the address libc is
// loaded at. For tests and benchmarks: a run takes the layout from gdb's
// agent. Dynamically linked programs only.
func LayoutOf(pid int) (Layout, error) {
	var l Layout
	path, base, err := libcMapping(pid)
	if err != nil {
		return l, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return l, err
	}
	id := elfsym.BuildID(f)
	f.Close()
	if len(id) < 3 {
		return l, fmt.Errorf("%s: no build id", path)
	}
	debug := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
	df, err := elf.Open(debug)
	if err != nil {
		return l, fmt.Errorf("libc's symbol table (Debian's libc6-dbg): %w", err)
	}
	syms, err := elfsym.Read(df, elfsym.Static)
	df.Close()
	if err != nil {
		return l, fmt.Errorf("%s: %w", debug, err)
	}
	found := map[string]elf.Symbol{}
	for _, s := range syms {
		switch s.Name {
		case "main_arena", "mp_", "__libc_version":
			found[s.Name] = s
		}
	}
	arena, mp, ver := found["main_arena"], found["mp_"], found["__libc_version"]
	offs, ok := mpLayouts[mp.Size]
	if arena.Size != msSize || !ok || ver.Value == 0 {
		return l, fmt.Errorf("%s: main_arena %d bytes, mp_ %d: not a layout this reader knows", debug, arena.Size, mp.Size)
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return l, err
	}
	defer mem.Close()
	v := make([]byte, 16)
	if _, err := mem.ReadAt(v, int64(base+ver.Value)); err != nil {
		return l, fmt.Errorf("reading __libc_version: %w", err)
	}
	var major, minor int
	fmt.Sscanf(string(v[:bytes.IndexByte(v, 0)]), "%d.%d", &major, &minor)
	return Layout{MainArena: base + arena.Value, MP: base + mp.Value, NMmaps: offs[0], MmappedMem: offs[1],
		Mangled: major > 2 || major == 2 && minor >= 32}, nil
}

// libcMapping is the path of the libc process pid maps and where it is
// loaded (its mapping at file offset 0).
func libcMapping(pid int) (string, uint64, error) {
	maps, err := proc.Maps(pid)
	if err != nil {
		return "", 0, err
	}
	for _, m := range maps {
		if m.Offset == 0 && strings.HasPrefix(m.Path, "/") && strings.HasPrefix(filepath.Base(m.Path), "libc.so") {
			return m.Path, m.Lo, nil
		}
	}
	return "", 0, fmt.Errorf("process %d maps no libc.so", pid)
}
