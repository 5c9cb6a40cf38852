package heaptrack

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/internal/proc"
)

// Modules are the modules (the program and its libraries) of a recorded
// process and where each is loaded, as heaptrack's library lists them in
// its raw stream, which heaptrack_interpret does not pass on: `x LEN
// PATH` names the program, `m LEN PATH BASE [VADDR MEMSZ]...` a module
// loaded at BASE (the program as "x"), `m 1 -` starts the list again
// after a dlopen or dlclose. A frame the interpreter could not name is
// named by its module and its offset there (memcached+0x1a2b3), which
// addr2line, gdb and heaptrack_print take back to a line given the
// module's debug file; its build-id tells which debug file.
//
// A module loaded after the last list (a library dlopen'ed whose
// constructor allocates before the library writes the list again) is
// found in the process's /proc/PID/maps once Pid is set, and named from
// its own symbols and line table when it has them, as massif names it
// (docs/facts.md, fact 92).
type Modules struct {
	mu      sync.Mutex
	program string
	mods    map[string]*module // by path
	pid     int
	missed  map[uint64]bool // addresses in no file of the process
	// lib is heaptrack's library: its own dependencies' start-up
	// allocations (libstdc++'s emergency pool) are not the program's.
	lib   string
	hpOwn map[string]bool // by module path, made once the program is known
}

type module struct {
	path string
	base uint64
	segs [][2]uint64 // loaded address ranges
	// named says that a frame was named by the module and an offset.
	named bool
	// Read once, when a frame needs them.
	read, symsRead bool
	buildID        string
	syms           []elf.Symbol // functions, by address
	lines          *dwarf.Data
}

// NewModules returns an empty table; lib is heaptrack's library that
// records the process.
func NewModules(lib string) *Modules {
	return &Modules{mods: make(map[string]*module), lib: lib}
}

// SetPid says which process the stream is of, for the modules loaded
// after the stream last listed them.
func (m *Modules) SetPid(pid int) {
	m.mu.Lock()
	m.pid = pid
	m.mu.Unlock()
}

// Program returns the program's path, "" before the stream named it.
func (m *Modules) Program() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.program
}

// line reads one line of the raw stream ('x' or 'm', without its
// newline).
func (m *Modules) line(l []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case len(l) > 2 && l[0] == 'x':
		if p, ok := lenText(l[2:]); ok {
			m.program = string(p)
		}
	case len(l) > 2 && l[0] == 'm':
		p, ok := lenText(l[2:])
		if !ok || string(p) == "-" {
			return
		}
		rest := strings.Fields(string(l[2:])[strings.Index(string(l[2:]), " ")+1+len(p):])
		path := string(p)
		if path == "x" && m.program != "" {
			path = m.program
		}
		if len(rest) == 0 {
			return
		}
		base, err := strconv.ParseUint(rest[0], 16, 64)
		if err != nil {
			return
		}
		mod := &module{path: path, base: base}
		for i := 1; i+1 < len(rest); i += 2 {
			v, e1 := strconv.ParseUint(rest[i], 16, 64)
			n, e2 := strconv.ParseUint(rest[i+1], 16, 64)
			if e1 == nil && e2 == nil {
				mod.segs = append(mod.segs, [2]uint64{base + v, base + v + n})
			}
		}
		if old := m.mods[path]; old != nil && old.base == base {
			return
		}
		m.mods[path] = mod
	}
}

// lenText reads "LEN TEXT..." (LEN in hex) and returns TEXT's LEN bytes.
func lenText(b []byte) ([]byte, bool) {
	n, rest, ok := bytes.Cut(b, []byte{' '})
	k, ok2 := hex(n)
	if !ok || !ok2 || k > uint64(len(rest)) {
		return nil, false
	}
	return rest[:k], true
}

// find returns the module at addr, or the module path names; nil when
// none is known. Called with m.mu held.
func (m *Modules) find(path string, addr uint64) *module {
	if mod := m.mods[path]; mod != nil {
		return mod
	}
	for _, mod := range m.mods {
		for _, s := range mod.segs {
			if addr >= s[0] && addr < s[1] {
				return mod
			}
		}
	}
	if m.pid == 0 || m.missed[addr] {
		return nil
	}
	// Loaded since the stream last listed the modules. An address in
	// no file (code the program made, a trampoline) is looked for once.
	if mod := mapsModule(m.pid, addr); mod != nil {
		m.mods[mod.path] = mod
		return mod
	}
	if m.missed == nil {
		m.missed = make(map[uint64]bool)
	}
	m.missed[addr] = true
	return nil
}

// mapsModule finds the file mapped at addr in process pid and where it
// is loaded: the start of its mapping at file offset 0 less the first
// loadable segment's address.
func mapsModule(pid int, addr uint64) *module {
	all, err := proc.Maps(pid)
	if err != nil {
		return nil
	}
	path := ""
	for _, mp := range all {
		if strings.HasPrefix(mp.Path, "/") && addr >= mp.Lo && addr < mp.Hi {
			path = mp.Path
		}
	}
	if path == "" {
		return nil
	}
	mod := &module{path: path}
	found := false
	for _, mp := range all {
		if mp.Path == path {
			mod.segs = append(mod.segs, [2]uint64{mp.Lo, mp.Hi})
			if mp.Offset == 0 && !found {
				mod.base, found = mp.Lo, true
			}
		}
	}
	if !found {
		return nil
	}
	if ef, err := elf.Open(path); err == nil {
		for _, p := range ef.Progs {
			if p.Type == elf.PT_LOAD {
				mod.base -= p.Vaddr &^ 0xfff
				break
			}
		}
		ef.Close()
	}
	return mod
}

// load reads a module's build-id, once; with syms, also its functions and
// line table, which only a module the interpreter did not know needs.
func (mod *module) load(syms bool) {
	if mod.read && (!syms || mod.symsRead) {
		return
	}
	ef, err := elf.Open(mod.path)
	if err != nil {
		mod.read, mod.symsRead = true, true
		return
	}
	defer ef.Close()
	if !mod.read {
		mod.read = true
		mod.buildID = elfsym.BuildID(ef)
	}
	if !syms || mod.symsRead {
		return
	}
	mod.symsRead = true
	all, _ := elfsym.Read(ef, elfsym.Static)
	for _, s := range all {
		if elfsym.Defines(s) && s.Value != 0 {
			mod.syms = append(mod.syms, s)
		}
	}
	sort.Slice(mod.syms, func(i, j int) bool { return mod.syms[i].Value < mod.syms[j].Value })
	if len(mod.syms) > 0 {
		mod.lines, _ = ef.DWARF()
	}
}

// name names the frame at return address addr of the module path (the
// interpreter's, "" when it knew none): its function, file and line from
// the module's own symbols when it has them (the interpreter lists only
// the modules it knew when it met the address), else the module's base
// name and the offset, "memcached+0x1a2b3". ok is false when no module
// is known at addr.
func (m *Modules) name(path string, addr uint64) (f frameName, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mod := m.find(path, addr)
	if mod == nil {
		return frameName{}, false
	}
	mod.load(path == "")
	off := addr - mod.base
	f = frameName{object: mod.path, offset: off, buildID: mod.buildID,
		function: filepath.Base(mod.path) + "+0x" + strconv.FormatUint(off, 16)}
	i := sort.Search(len(mod.syms), func(i int) bool { return mod.syms[i].Value > off }) - 1
	if path != "" || i < 0 || (mod.syms[i].Size != 0 && off >= mod.syms[i].Value+mod.syms[i].Size) {
		// The interpreter knew the module and found no name, or the
		// module has none there.
		mod.named = true
		return f, true
	}
	f.function = mod.syms[i].Name
	f.file, f.line = lineOf(mod.lines, off-1)
	return f, true
}

// offset returns the offset of return address addr in the module path
// (the interpreter's, "" when it knew none); ok is false when no module
// is known at addr.
func (m *Modules) offset(path string, addr uint64) (off uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mod := m.find(path, addr)
	if mod == nil || addr < mod.base {
		return 0, false
	}
	return addr - mod.base, true
}

// Named returns the modules that named a frame by an offset, sorted, as
// pairs of path and build-id.
//
// A module only heaptrack's library brings in (libstdc++ in a C program)
// is left out: its frames are heaptrack's own allocations, which are not
// the program's and name no site.
func (m *Modules) Named() [][2]string {
	m.mu.Lock()
	var out [][2]string
	for _, mod := range m.mods {
		if mod.named {
			out = append(out, [2]string{mod.path, mod.buildID})
		}
	}
	m.mu.Unlock()
	out = slices.DeleteFunc(out, func(p [2]string) bool { return m.heaptrackOwn(p[0]) })
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// frameName is what Modules.name found of a frame.
type frameName struct {
	function, object, file, buildID string
	line                            int
	offset                          uint64
}

// lineOf returns the file (base name) and line of pc in d's line table.
func lineOf(d *dwarf.Data, pc uint64) (string, int) {
	if d == nil {
		return "", 0
	}
	r := d.Reader()
	for {
		cu, err := r.Next()
		if err != nil || cu == nil {
			return "", 0
		}
		if cu.Tag != dwarf.TagCompileUnit {
			r.SkipChildren()
			continue
		}
		ranges, err := d.Ranges(cu)
		r.SkipChildren()
		if err != nil {
			continue
		}
		for _, rg := range ranges {
			if pc < rg[0] || pc >= rg[1] {
				continue
			}
			lr, err := d.LineReader(cu)
			if err != nil || lr == nil {
				return "", 0
			}
			var e dwarf.LineEntry
			if lr.SeekPC(pc, &e) != nil {
				return "", 0
			}
			return filepath.Base(e.File.Name), e.Line
		}
	}
}

// heaptrackOwn reports whether module path was loaded for heaptrack's
// library alone: one of its dependencies (libstdc++, libunwind) that the
// program does not use. Their start-up allocations (libstdc++'s
// emergency pool, 72,704 bytes) are heaptrack's, not the program's.
func (m *Modules) heaptrackOwn(path string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hpOwn == nil {
		if m.program == "" || m.lib == "" {
			return false
		}
		byName := map[string]string{}
		for p := range m.mods {
			byName[filepath.Base(p)] = p
		}
		theirs := needed(m.lib, byName)
		ours := needed(m.program, byName)
		m.hpOwn = map[string]bool{}
		for p := range theirs {
			if !ours[p] {
				m.hpOwn[p] = true
			}
		}
	}
	return m.hpOwn[path]
}

// needed returns the libraries that the ELF file at path needs, and those
// they need, as paths of byName (modules by base name); libraries not
// loaded are left out.
func needed(path string, byName map[string]string) map[string]bool {
	out := map[string]bool{}
	todo := []string{path}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		ef, err := elf.Open(p)
		if err != nil {
			continue
		}
		libs, _ := ef.ImportedLibraries()
		ef.Close()
		for _, l := range libs {
			if q, ok := byName[l]; ok && !out[q] {
				out[q] = true
				todo = append(todo, q)
			}
		}
	}
	return out
}

// moduleScanner passes the raw stream on to w, reading its module lines
// into mods on the way.
type moduleScanner struct {
	w    io.WriteCloser
	mods *Modules
	bol  bool   // the next byte begins a line
	in   bool   // inside an x or m line
	line []byte // that line so far
}

func (s *moduleScanner) Write(b []byte) (int, error) {
	s.scan(b)
	return s.w.Write(b)
}

func (s *moduleScanner) Close() error { return s.w.Close() }

func (s *moduleScanner) scan(b []byte) {
	for len(b) > 0 {
		if s.in {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				s.line = append(s.line, b...)
				return
			}
			s.line = append(s.line, b[:i]...)
			s.mods.line(s.line)
			s.in, s.line, s.bol = false, s.line[:0], true
			b = b[i+1:]
			continue
		}
		if s.bol && (b[0] == 'm' || b[0] == 'x') {
			s.in = true
			continue
		}
		// The next line that begins with m or x.
		i := -1
		for _, sep := range [][]byte{[]byte("\nm "), []byte("\nx ")} {
			if j := bytes.Index(b, sep); j >= 0 && (i < 0 || j < i) {
				i = j
			}
		}
		if i < 0 {
			s.bol = b[len(b)-1] == '\n'
			return
		}
		b, s.bol = b[i+1:], true
	}
}
