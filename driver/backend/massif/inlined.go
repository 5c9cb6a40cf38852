package massif

import (
	"debug/dwarf"
	"debug/elf"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/snapctl/snapctl/snapshots"
)

// Valgrind names an inlined frame by the function's DWARF name alone, which
// for C++ has no scope: `add (inl.cpp:6)` for store::Cache::add, and
// `allocate (new_allocator.h:137)` for std::allocator's, which then escapes
// the std::* library frames and is reported as the site. inlineNames puts
// the scope back from the program's own DWARF: the function of that short
// name declared in that file, at the last declaration line before the
// frame's line.
type inlineNames struct {
	byName map[string][]inlineFn // short name -> its scoped declarations
	mu     sync.Mutex
	cache  map[snapshots.Frame]string
}

// inlineFn is one scoped function of the program: where it is declared and
// its qualified name.
type inlineFn struct {
	file      string // base name of the declaring file
	line      int
	qualified string
}

// loadInlineNames reads the scoped functions of binary's DWARF; nil when
// it has none (a C program, no debug info).
func loadInlineNames(binary string) *inlineNames {
	ef, err := elf.Open(binary)
	if err != nil {
		return nil
	}
	defer ef.Close()
	d, err := ef.DWARF()
	if err != nil {
		return nil
	}
	type fn struct {
		name, scope, file string
		line              int
		spec, origin      dwarf.Offset
	}
	fns := make(map[dwarf.Offset]*fn)
	r := d.Reader()
	var files []*dwarf.LineFile
	var scopes []string // the scope of each open entry with children
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			if len(scopes) > 0 {
				scopes = scopes[:len(scopes)-1]
			}
			continue
		}
		scope := ""
		if len(scopes) > 0 {
			scope = scopes[len(scopes)-1]
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			files = nil
			if lr, err := d.LineReader(e); err == nil && lr != nil {
				files = lr.Files()
			}
			scope = ""
		case dwarf.TagSubprogram:
			f := &fn{scope: scope}
			f.name, _ = e.Val(dwarf.AttrName).(string)
			if i, ok := e.Val(dwarf.AttrDeclFile).(int64); ok && i >= 0 && int(i) < len(files) && files[i] != nil {
				f.file = filepath.Base(files[i].Name)
			}
			if l, ok := e.Val(dwarf.AttrDeclLine).(int64); ok {
				f.line = int(l)
			}
			f.spec, _ = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
			f.origin, _ = e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
			fns[e.Offset] = f
		}
		if !e.Children {
			continue
		}
		switch e.Tag {
		case dwarf.TagNamespace, dwarf.TagClassType, dwarf.TagStructType, dwarf.TagUnionType:
			name, _ := e.Val(dwarf.AttrName).(string)
			if name == "" {
				name = "(anonymous namespace)"
			}
			if scope != "" {
				name = scope + "::" + name
			}
			scopes = append(scopes, name)
		default:
			scopes = append(scopes, scope)
		}
	}
	// resolve follows specification and abstract origin to the entry that
	// has the name and the scope.
	var resolve func(off dwarf.Offset, depth int) *fn
	resolve = func(off dwarf.Offset, depth int) *fn {
		f := fns[off]
		if f == nil || depth > 8 {
			return nil
		}
		if f.name != "" {
			return f
		}
		if f.spec != 0 {
			return resolve(f.spec, depth+1)
		}
		if f.origin != 0 {
			return resolve(f.origin, depth+1)
		}
		return nil
	}
	n := &inlineNames{byName: make(map[string][]inlineFn), cache: make(map[snapshots.Frame]string)}
	seen := make(map[inlineFn]bool)
	for off, f := range fns {
		named := resolve(off, 0)
		if named == nil || named.scope == "" {
			continue
		}
		file, line := f.file, f.line
		if file == "" {
			file, line = named.file, named.line
		}
		if file == "" {
			continue
		}
		e := inlineFn{file: file, line: line, qualified: named.scope + "::" + named.name}
		if !seen[e] {
			seen[e] = true
			n.byName[named.name] = append(n.byName[named.name], e)
		}
	}
	if len(n.byName) == 0 {
		return nil
	}
	for _, c := range n.byName {
		sort.Slice(c, func(i, j int) bool { return c[i].line < c[j].line })
	}
	return n
}

// qualify returns the qualified name of frame f when it is a bare name
// (no scope, no parameters) that one of the program's scoped functions
// declared in f's file explains, else f.Function.
func (n *inlineNames) qualify(f snapshots.Frame) string {
	if f.File == "" || strings.ContainsAny(f.Function, ":(") {
		return f.Function
	}
	cands := n.byName[f.Function]
	if len(cands) == 0 {
		return f.Function
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if q, ok := n.cache[f]; ok {
		return q
	}
	q := f.Function
	file := filepath.Base(f.File)
	for _, c := range cands { // by declaration line
		if c.file == file && c.line <= f.Line {
			q = c.qualified
		}
	}
	n.cache[f] = q
	return q
}

// inlined returns the program's scoped function names, read from its DWARF
// at the first snapshot (the target runs meanwhile); nil when it has none.
func (b *Backend) inlined() *inlineNames {
	b.inlineOnce.Do(func() { b.inline = loadInlineNames(b.cfg.Binary) })
	return b.inline
}

// qualify is the sites' Qualify hook: the qualified name of an inlined
// C++ frame valgrind names bare (inlineNames.qualify), else its name.
func (b *Backend) qualify(f snapshots.Frame) string {
	if n := b.inlined(); n != nil {
		return n.qualify(f)
	}
	return f.Function
}
