package arenas

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/internal/proc"
)

// Glibc is everything snapctl knows of glibc's allocator in one process:
// where its state lies (Layout, from libc's symbol table), the layouts
// of its structs, and where each thread's per-thread cache (tcache) is
// found. Find fills it in; gdb's agent gets it over the heap reader's
// socket (the native backend's heapread.go) and reads the small heaps,
// the tcaches and the count of arenas itself with it, so that every
// offset into glibc's memory is written here alone.
type Glibc struct {
	Layout
	// Version is glibc's ("2.36"), "" when unknown.
	Version string `json:"version"`
	// NArenas is the address of glibc's count of arenas (narenas), 0
	// when unknown.
	NArenas uint64 `json:"narenas"`
	// Why says why the arenas cannot be read, "" when they can.
	Why string `json:"why,omitempty"`
	// Tcache is the distance of every thread's tcache pointer below its
	// thread pointer; TcacheWhy says why it is unknown, "" when known.
	Tcache       int64        `json:"tcache"`
	TcacheWhy    string       `json:"tcache_why,omitempty"`
	State        StateLayout  `json:"malloc_state"`
	Chunk        ChunkLayout  `json:"chunk"`
	TcacheStruct TcacheLayout `json:"tcache_struct"`
}

// StateLayout is struct malloc_state's layout (the constants of
// arenas.go) and the smallest chunk, as the agent's own walk takes it:
// Mutex is the lock, an int, 0 when free.
type StateLayout struct {
	Mutex     int `json:"mutex"`
	Size      int `json:"size"`
	Fastbins  int `json:"fastbins"`
	Top       int `json:"top"`
	Bins      int `json:"bins"`
	Next      int `json:"next"`
	SystemMem int `json:"system_mem"`
	NFastbins int `json:"nfastbins"`
	NBins     int `json:"nbins"`
	MinChunk  int `json:"min_chunk"`
}

// ChunkLayout is struct malloc_chunk's (arenas.go's constants): the size
// word at Head, its low Flags bits flags; the fd and bk links right
// after it at Links, where a chunk's user memory starts; chunks aligned
// to Align; safe-linked links shifted by MangleShift.
type ChunkLayout struct {
	Head        int `json:"head"`
	Links       int `json:"links"`
	Flags       int `json:"flags"`
	Align       int `json:"align"`
	MangleShift int `json:"mangle_shift"`
}

// TcacheLayout is struct tcache_perthread_struct's: Bins bins, bin i
// holding chunks of Min + Step i bytes, its counts[] first, each count
// as wide as Widths says by the size of the struct's own chunk (uint16_t
// in a 0x290-byte chunk from glibc 2.30, char in a 0x250-byte one
// before).
type TcacheLayout struct {
	Bins   int         `json:"bins"`
	Min    int         `json:"min"`
	Step   int         `json:"step"`
	Widths [][2]uint64 `json:"widths"`
}

var (
	stateLayout  = StateLayout{msMutex, msSize, msFastbins, msTop, msBins, msNext, msSystemMem, nFastbins, nBins, minChunk}
	chunkLayout  = ChunkLayout{chunkHead, chunkLinks, sizeFlags, chunkAlign, mangleShift}
	tcacheLayout = TcacheLayout{Bins: 64, Min: 32, Step: 16, Widths: [][2]uint64{{0x290, 2}, {0x250, 1}}}
)

// mpLayouts gives, by the size of mp_, the offsets of n_mmaps and
// mmapped_mem in it: 112 bytes up to glibc 2.34, 136 from 2.35 to 2.41
// (the transparent huge page fields).
var mpLayouts = map[uint64][2]int{112: {40, 56}, 136: {60, 80}}

// tcacheLast is the last glibc whose tcache is known to be laid out as
// tcacheLayout says; a program's own glibc of unknown version is checked
// by the struct's chunk size.
var tcacheLast = [2]int{2, 41}

// Query says where Find looks.
type Query struct {
	// Mallinfo2 is mallinfo2's address in the process (as gdb resolves
	// it): the file mapped there is the one whose symbol table gives the
	// rest, libc.so or a static program. 0: the process's libc.so,
	// which must be mapped.
	Mallinfo2 uint64 `json:"mallinfo2"`
	// DebugDirs are where that file's separate debug file is looked for
	// by build id (gdb's debug-file-directory, Debian's libc6-dbg under
	// /usr/lib/debug).
	DebugDirs []string `json:"debug_dirs"`
}

// glibcSymbols are the symbols Find reads.
var glibcSymbols = []string{"mallinfo2", "main_arena", "mp_", "narenas", "__libc_version",
	"tcache", "_thread_db_link_map_l_tls_offset", "_dl_main_map"}

// noSymbols is why nothing can be found without libc's symbol table.
const noSymbols = "no symbol table for libc (install Debian's libc6-dbg, or the distribution's libc debug symbols)"

// Find finds glibc's allocator in process pid, stopped, whose memory mem
// reads: the symbol table of the file that defines mallinfo2 (a static
// program that keeps its table) or of that file's separate debug file
// (Debian's libc6-dbg), found by build id as gdb finds it, placed where
// the file is loaded; no debug information is read. The layouts are
// glibc's from 2.27 to 2.41 on 64-bit little-endian x86-64: malloc_state
// is 2200 bytes throughout, mp_ 112 bytes up to 2.34 and 136 from 2.35;
// the symbol table's sizes select the layout, and any other size leaves
// the heap unread (Why). The error is for a process whose mappings
// cannot be read or that maps nothing at q.Mallinfo2.
func Find(pid int, mem io.ReaderAt, q Query) (Glibc, error) {
	g := Glibc{State: stateLayout, Chunk: chunkLayout, TcacheStruct: tcacheLayout}
	maps, err := proc.Maps(pid)
	if err != nil {
		return g, err
	}
	m, ok := definer(maps, q.Mallinfo2)
	if !ok {
		if q.Mallinfo2 == 0 {
			return g, fmt.Errorf("process %d maps no libc.so", pid)
		}
		return g, fmt.Errorf("process %d maps no file at mallinfo2 (0x%x)", pid, q.Mallinfo2)
	}
	path := m.Path
	if m.Deleted {
		// Replaced since it was loaded (an upgrade): the kernel still
		// holds the file the process runs.
		path = fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Lo, m.Hi)
	}
	f, err := elf.Open(path)
	if err != nil {
		return g, err
	}
	defer f.Close()
	syms, base := symbols(f, path, q, m)
	g.TcacheWhy = "glibc's per-thread caches cannot be found: " + noSymbols
	if syms == nil {
		g.Why = "glibc's arenas cannot be found: " + noSymbols
		return g, nil
	}
	if s, ok := syms["narenas"]; ok {
		g.NArenas = base + s.Value
	}
	// A static program may lack __libc_version (docs/facts.md, fact
	// 127): its version stays unknown, and its arenas unread.
	version := [2]int{}
	if s, ok := syms["__libc_version"]; ok {
		version = readVersion(mem, base+s.Value)
		if version != [2]int{} {
			g.Version = fmt.Sprintf("%d.%d", version[0], version[1])
		}
	}
	x86 := f.Class == elf.ELFCLASS64 && f.Machine == elf.EM_X86_64
	if d, err := tcacheDistance(pid, mem, f, syms, base, version, x86); err != nil {
		g.TcacheWhy = "glibc's per-thread caches cannot be found: " + err.Error()
	} else {
		g.Tcache, g.TcacheWhy = d, ""
	}
	arena, hasArena := syms["main_arena"]
	mp, hasMP := syms["mp_"]
	if !hasArena || !hasMP {
		g.Why = "glibc's arenas cannot be found: " + noSymbols
		return g, nil
	}
	offs, ok := mpLayouts[mp.Size]
	if arena.Size != msSize || !ok || less(version, [2]int{2, 27}) || !x86 {
		g.Why = fmt.Sprintf("glibc %d.%d's allocator is not one snapctl can read (malloc_state %d bytes, mp_ %d)",
			version[0], version[1], arena.Size, mp.Size)
		return g, nil
	}
	// Safe-linking (glibc 2.32) hides fastbin links: the link at address
	// A holds next ^ (A >> 12).
	g.Layout = Layout{MainArena: base + arena.Value, MP: base + mp.Value, NMmaps: offs[0], MmappedMem: offs[1],
		Mangled: !less(version, [2]int{2, 32})}
	return g, nil
}

// definer is the mapping of the file that holds mallinfo2 (its mapping
// at file offset 0), or libc.so's when mallinfo2 is 0.
func definer(maps []proc.Mapping, mallinfo2 uint64) (proc.Mapping, bool) {
	path := ""
	for _, m := range maps {
		if mallinfo2 != 0 && m.Lo <= mallinfo2 && mallinfo2 < m.Hi && strings.HasPrefix(m.Path, "/") {
			path = m.Path
		}
		if mallinfo2 == 0 && strings.HasPrefix(m.Path, "/") && strings.HasPrefix(filepath.Base(m.Path), "libc.so") {
			path = m.Path
		}
	}
	for _, m := range maps {
		if path != "" && m.Path == path && m.Offset == 0 {
			return m, true
		}
	}
	return proc.Mapping{}, false
}

// symbols reads glibcSymbols from f, at path, or from its separate debug
// files, whichever holds mallinfo2 and the most of them; the base is
// what their values are relative to in the process. nil when none holds
// mallinfo2.
func symbols(f *elf.File, path string, q Query, m proc.Mapping) (map[string]elf.Symbol, uint64) {
	paths := []string{path}
	if id := elfsym.BuildID(f); len(id) > 2 {
		for _, d := range q.DebugDirs {
			if d != "" {
				paths = append(paths, filepath.Join(d, ".build-id", id[:2], id[2:]+".debug"))
			}
		}
	}
	var best map[string]elf.Symbol
	for _, p := range paths {
		all, _ := elfsym.Open(p, elfsym.Static)
		found := map[string]elf.Symbol{}
		for _, s := range all {
			for _, n := range glibcSymbols {
				if s.Name == n {
					found[n] = s // the last one so named
				}
			}
		}
		if _, ok := found["mallinfo2"]; ok && len(found) > len(best) {
			best = found
		}
		if len(best) == len(glibcSymbols) {
			break
		}
	}
	if best == nil {
		return nil, 0
	}
	if q.Mallinfo2 == 0 {
		return best, m.Lo
	}
	return best, q.Mallinfo2 - best["mallinfo2"].Value
}

// readVersion reads __libc_version ("2.36") at addr; zeros when it
// cannot.
func readVersion(mem io.ReaderAt, addr uint64) [2]int {
	b := make([]byte, 16)
	if _, err := mem.ReadAt(b, int64(addr)); err != nil {
		return [2]int{}
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	var v [2]int
	if n, _ := fmt.Sscanf(string(b), "%d.%d", &v[0], &v[1]); n != 2 {
		return [2]int{}
	}
	return v
}

func less(a, b [2]int) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }

// tcacheDistance is where each thread's tcache pointer lies, as its
// distance below the thread pointer. The pointer is libc's thread-local
// `tcache`, its symbol's value an offset in libc's TLS block, which lies
// at a fixed distance below every thread's thread pointer (x86-64's TLS
// variant II): libc's l_tls_offset less that offset. l_tls_offset is read
// from libc's link_map at the offset glibc publishes for libthread_db
// (_thread_db_link_map_l_tls_offset); a static program's one TLS block
// lies right below the thread pointer (glibc's __libc_setup_tls).
func tcacheDistance(pid int, mem io.ReaderAt, f *elf.File, syms map[string]elf.Symbol, base uint64, version [2]int, x86 bool) (int64, error) {
	if !x86 {
		return 0, errors.New("not an x86-64 process")
	}
	if less(tcacheLast, version) {
		return 0, fmt.Errorf("glibc %d.%d's tcache is newer than the layout snapctl knows", version[0], version[1])
	}
	tc, ok := syms["tcache"]
	if !ok {
		return 0, errors.New("libc's symbol table has no tcache")
	}
	if _, static := syms["_dl_main_map"]; static {
		for _, p := range f.Progs {
			if p.Type == elf.PT_TLS {
				align := max(p.Align, 1)
				return int64((p.Memsz+align-1)/align*align) - int64(tc.Value), nil
			}
		}
		return 0, errors.New("the program has no TLS block")
	}
	desc, ok := syms["_thread_db_link_map_l_tls_offset"]
	if !ok {
		return 0, errors.New("libc's symbol table has no _thread_db_link_map_l_tls_offset")
	}
	// The descriptor glibc keeps for libthread_db: the field's size in
	// bits, a count, its offset in struct link_map.
	d := make([]byte, 12)
	if _, err := mem.ReadAt(d, int64(base+desc.Value)); err != nil {
		return 0, fmt.Errorf("reading _thread_db_link_map_l_tls_offset: %w", err)
	}
	if bits := binary.LittleEndian.Uint32(d); bits != 64 {
		return 0, fmt.Errorf("link_map's l_tls_offset is %d bits", bits)
	}
	lm, err := linkMap(pid, mem, base)
	if err != nil {
		return 0, err
	}
	tls, err := word(mem, lm+uint64(binary.LittleEndian.Uint32(d[8:])))
	if err != nil {
		return 0, err
	}
	if tls == 0 || tls >= 1<<32 {
		return 0, fmt.Errorf("libc's TLS block is not static (l_tls_offset 0x%x)", tls)
	}
	return int64(tls) - int64(tc.Value), nil
}

// atBase is the auxiliary vector's key of the dynamic linker's address.
const atBase = 7

// linkMap is the link_map of the object loaded at base, from the dynamic
// linker's list: its _r_debug (in its dynamic symbol table, where it is
// loaded: AT_BASE), r_map at 8; each link_map's public fields l_addr,
// then l_next at 24.
func linkMap(pid int, mem io.ReaderAt, base uint64) (uint64, error) {
	ld, ok := proc.Auxv(pid, atBase)
	if !ok || ld == 0 {
		return 0, errors.New("the process has no dynamic linker")
	}
	maps, err := proc.Maps(pid)
	if err != nil {
		return 0, err
	}
	m, ok := definer(maps, ld)
	if !ok {
		return 0, fmt.Errorf("the dynamic linker at 0x%x is no file", ld)
	}
	path := m.Path
	if m.Deleted {
		path = fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Lo, m.Hi)
	}
	rdebug, err := elfsym.Value(path, elfsym.Dynamic|elfsym.Static, "_r_debug")
	if err != nil {
		return 0, err
	}
	lm, err := word(mem, ld+rdebug+8)
	if err != nil {
		return 0, err
	}
	b := make([]byte, 32)
	for range 65536 {
		if lm == 0 {
			break
		}
		if _, err := mem.ReadAt(b, int64(lm)); err != nil {
			return 0, fmt.Errorf("the dynamic linker's list: %w", err)
		}
		if binary.LittleEndian.Uint64(b) == base {
			return lm, nil
		}
		lm = binary.LittleEndian.Uint64(b[24:])
	}
	return 0, errors.New("libc is not in the dynamic linker's list")
}

func word(mem io.ReaderAt, addr uint64) (uint64, error) {
	b := make([]byte, 8)
	if _, err := mem.ReadAt(b, int64(addr)); err != nil {
		return 0, fmt.Errorf("reading 8 bytes at 0x%x: %w", addr, err)
	}
	return binary.LittleEndian.Uint64(b), nil
}
