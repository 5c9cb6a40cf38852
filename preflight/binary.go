package preflight

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/snapctl/snapctl/internal/elfsym"
)

// BinaryProblem says why a binary cannot be profiled.
type BinaryProblem int

// The problems InspectBinary reports.
const (
	BinaryMissing       BinaryProblem = iota + 1 // no such file
	BinaryIsDir                                  // a directory
	BinaryUnreadable                             // cannot be opened for reading
	BinaryScript                                 // starts with #!
	BinaryNotELF                                 // not an ELF file
	BinaryNotProgram                             // an ELF object or core file
	BinaryWrongMachine                           // built for another architecture
	BinaryNotExecutable                          // no permission to execute it
	BinaryStatic                                 // statically linked, for a backend that must preload into it
	BinaryNewline                                // a newline in its path, which heaptrack's line-by-line trace cannot carry
)

// BinaryError reports a target binary that cannot be profiled.
type BinaryError struct {
	Path    string
	Problem BinaryProblem
	Detail  string // the script's #! line, the ELF type or machine
	// Shim names the version manager (pyenv, asdf, rbenv) whose shim
	// the script is: it execs the program the manager picks.
	Shim string
	Err  error // the underlying error, if any
}

func (e *BinaryError) Error() string {
	var why string
	switch e.Problem {
	case BinaryMissing:
		why = "does not exist"
	case BinaryIsDir:
		why = "is a directory, not a program"
	case BinaryUnreadable:
		why = fmt.Sprintf("cannot be read: %v", e.Err)
	case BinaryScript:
		if e.Shim != "" {
			// The shim's interpreter, bash, would exec the program:
			// the program itself is the one to run.
			why = fmt.Sprintf("is a %s shim (%s), a script that runs the version %s picks: valgrind and gdb need that program itself; "+
				"give its path instead, e.g. snapctl run PLAN $(%s which %s) ARGS...", e.Shim, e.Detail, e.Shim, e.Shim, filepath.Base(e.Path))
			break
		}
		interp := scriptInterpreter(e.Detail)
		why = fmt.Sprintf("is a script (%s), not a compiled program: valgrind and gdb need the native program that runs it; "+
			"profile the interpreter instead, e.g. snapctl run PLAN %s %s", e.Detail, interp, e.Path)
	case BinaryNotELF:
		why = "is not an ELF executable (snapctl profiles compiled Linux programs)"
	case BinaryNotProgram:
		why = fmt.Sprintf("is an ELF %s, not a program that can run", e.Detail)
	case BinaryWrongMachine:
		why = fmt.Sprintf("is built for %s; this machine runs %s programs", e.Detail, hostMachine())
	case BinaryNotExecutable:
		why = fmt.Sprintf("is not executable (chmod +x %s)", e.Path)
	case BinaryStatic:
		why = "is statically linked: " + e.Detail
	case BinaryNewline:
		why = "has a newline in its path: heaptrack writes each module's path on a line of its trace, and its interpreter fails on this one, " +
			"so --sites would record no call site; run it through a path without a newline (mv or ln, not a symlink: heaptrack reads the real path), or without --sites"
	default:
		why = "cannot be profiled"
	}
	return fmt.Sprintf("binary %s %s", e.Path, why)
}

// Unwrap returns the underlying error.
func (e *BinaryError) Unwrap() error { return e.Err }

// Static reports whether the ELF program at path is statically linked:
// it names no dynamic loader (PT_INTERP), so no library can be
// preloaded into it. Valgrind replaces malloc by preloading its own, and
// heaptrack records by preloading (or injecting, which needs dlopen)
// its library: neither can in a static program (docs/facts.md, fact
// 88). False when path cannot
// be read as ELF (InspectBinary says why).
func Static(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return false
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	// A shared library (no entry point to speak of) is not a program.
	return f.Type == elf.ET_EXEC || hasDynFlag(f, elf.DF_1_PIE)
}

// hasDynFlag reports whether the DT_FLAGS_1 entry of f has flag.
func hasDynFlag(f *elf.File, flag elf.DynFlag1) bool {
	vals, err := f.DynValue(elf.DT_FLAGS_1)
	if err != nil {
		return false
	}
	for _, v := range vals {
		if v&uint64(flag) != 0 {
			return true
		}
	}
	return false
}

// StaticError is what a backend that preloads into the program says of
// a static one (Static): why it would measure nothing, and what to run.
// sites says the native backend's --sites (heaptrack), else massif.
func StaticError(path string, sites bool) error {
	detail := "valgrind cannot replace malloc in a static program, so massif would measure a heap of 0 B at every stop; run it with --backend native, which reads glibc's allocator in a static program"
	if sites {
		detail = "heaptrack's library cannot be preloaded or injected into a static program, so --sites would record no call site; run it with --backend native without --sites, or link it dynamically"
	}
	return &BinaryError{Path: path, Problem: BinaryStatic, Detail: detail}
}

// NewlineError reports a program whose real path (symlinks resolved, as
// the kernel's /proc/PID/exe gives it) holds a newline: heaptrack's trace
// names each module on a line, and heaptrack_interpret aborts on the
// broken line (docs/facts.md, fact 93). Nil otherwise.
func NewlineError(path string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	if !strings.Contains(real, "\n") {
		return nil
	}
	return &BinaryError{Path: path, Problem: BinaryNewline}
}

// scriptInterpreter returns the interpreter named on a #! line, resolving
// "/usr/bin/env NAME" through PATH.
func scriptInterpreter(shebang string) string {
	f := strings.Fields(strings.TrimPrefix(shebang, "#!"))
	if len(f) == 0 {
		return "INTERPRETER"
	}
	if filepath.Base(f[0]) == "env" {
		for _, a := range f[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			// A PATH entry that is itself a script (a pyenv or asdf shim)
			// is no better than the name.
			if p, err := exec.LookPath(a); err == nil && !isScript(p) {
				return p
			}
			return a
		}
	}
	return f[0]
}

// The checks of InspectBinary's findings.
const (
	CheckDebugInfo = "debug info"
	CheckSymbols   = "symbols"
)

// BinaryInfo describes a binary that can be profiled.
type BinaryInfo struct {
	// Path is the binary's absolute path. A path without '/' names a file
	// in the current directory when there is one, else a program on PATH;
	// the session runs valgrind and gdb on Path so both see the same file.
	Path string
	// Kind says what the ELF file is: "executable", "position-independent
	// executable" or "shared object".
	Kind string
	// Machine is the ELF machine, e.g. "x86-64".
	Machine string
	// DebugInfo is true when DWARF debug info was found, in the binary or
	// in a separate file (DebugFile).
	DebugInfo bool
	// DebugFile is the separate debug file gdb will load, when the binary
	// has none of its own.
	DebugFile string
	// Symbols is true when the binary has a symbol table.
	Symbols bool
	// Warnings are problems that do not stop a session.
	Warnings []Finding
}

// InspectBinary checks that path is a native program snapctl can run
// under valgrind: it exists, is an ELF executable for this machine and may
// be executed. A problem is a *BinaryError. Missing debug info or symbols
// is not an error but a warning in BinaryInfo.Warnings.
func InspectBinary(path string) (*BinaryInfo, error) {
	if !strings.ContainsRune(path, '/') {
		if _, err := os.Stat(path); err != nil {
			if p, err := exec.LookPath(path); err == nil {
				path = p
			}
		}
	}
	fail := func(p BinaryProblem, detail string, err error) (*BinaryInfo, error) {
		return nil, &BinaryError{Path: path, Problem: p, Detail: detail, Err: err}
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fail(BinaryMissing, "", err)
	case err != nil:
		return fail(BinaryUnreadable, "", err)
	case st.IsDir():
		return fail(BinaryIsDir, "", nil)
	}
	f, err := os.Open(path)
	if err != nil {
		return fail(BinaryUnreadable, "", err)
	}
	defer f.Close()

	head := make([]byte, 256)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fail(BinaryUnreadable, "", err)
	}
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bytes.Cut(head, []byte("\n"))
		e := &BinaryError{Path: path, Problem: BinaryScript, Detail: strings.TrimSpace(string(line)), Shim: shimOf(f)}
		return nil, e
	}
	if !bytes.HasPrefix(head, []byte(elf.ELFMAG)) {
		return fail(BinaryNotELF, "", nil)
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return fail(BinaryNotELF, "", err)
	}
	defer ef.Close()

	info := &BinaryInfo{Machine: machineName(ef.Machine)}
	switch ef.Type {
	case elf.ET_EXEC:
		info.Kind = "executable"
	case elf.ET_DYN:
		info.Kind = "shared object"
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				info.Kind = "position-independent executable"
			}
		}
	case elf.ET_REL:
		return fail(BinaryNotProgram, "relocatable object (link it into a program first)", nil)
	case elf.ET_CORE:
		return fail(BinaryNotProgram, "core dump", nil)
	default:
		return fail(BinaryNotProgram, fmt.Sprintf("file of type %v", ef.Type), nil)
	}
	if host, ok := hostMachines[runtime.GOARCH]; ok && ef.Machine != host && !(host == elf.EM_X86_64 && ef.Machine == elf.EM_386) {
		return fail(BinaryWrongMachine, info.Machine, nil)
	}
	if err := syscall.Access(path, 1 /* X_OK */); err != nil {
		return fail(BinaryNotExecutable, "", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fail(BinaryUnreadable, "", err)
	}
	info.Path = abs

	info.Symbols = ef.Section(".symtab") != nil
	hasInfo, hasLine := hasSection(ef, "info"), hasSection(ef, "line")
	info.DebugInfo = hasInfo
	if !hasInfo {
		info.DebugFile = separateDebugFile(ef, abs)
		info.DebugInfo = info.DebugFile != ""
	}
	warn := func(check, summary string, explain ...string) {
		info.Warnings = append(info.Warnings, Finding{Check: check, Subject: path, Summary: summary, Explain: explain})
	}
	const noLines = "gdb cannot resolve file:line breakpoints in it and reports show no source lines for its frames; breakpoints on the functions of the libraries it links (libc's getpid, malloc) are not affected"
	// Without a symbol table gdb still knows the functions the binary
	// exports (.dynsym): a program built with -rdynamic, or an
	// interpreter such as python3, which distributions ship stripped.
	// The libraries' functions keep their names either way.
	breaksOn := "gdb can break on *addresses in it but not on its own functions (the functions of the libraries it links still work), and reports name its frames ??? under massif, by module and offset with --sites (prog+0x1a2b3)"
	if exportsFunctions(ef) {
		breaksOn = "gdb can break on the functions it exports and on *addresses in it, not on its other functions (the functions of the libraries it links still work), and reports name those frames ??? under massif, by module and offset with --sites (prog+0x1a2b3)"
	}
	switch link := debugLink(ef); {
	case !info.DebugInfo && link != "" && !info.Symbols:
		// One warning: the symbol table went into the same file.
		warn(CheckDebugInfo, fmt.Sprintf("keeps its debug info and symbol table in a separate file (%s) that is not installed", link),
			noLines, breaksOn, "install the matching -dbgsym/-dbg package or rebuild with -g")
	case !info.DebugInfo && link != "":
		warn(CheckDebugInfo, fmt.Sprintf("keeps its debug info in a separate file (%s) that is not installed", link),
			noLines, "install the matching -dbgsym/-dbg package or rebuild with -g")
	case !info.DebugInfo:
		warn(CheckDebugInfo, "has no debug info", noLines, "rebuild it with -g (and -O0 for exact lines)")
		if !info.Symbols {
			warn(CheckSymbols, "is stripped (no symbol table)", breaksOn, "build it without stripping")
		}
	case hasInfo && !hasLine:
		warn(CheckDebugInfo, "has debug info without line tables (.debug_line)",
			"file:line breakpoints and source lines in reports will not work", "rebuild it with -g")
	}
	return info, nil
}

// exportsFunctions reports whether the binary's dynamic symbol table
// defines a function, one that gdb can break on without a symbol table.
func exportsFunctions(ef *elf.File) bool {
	syms, err := elfsym.Read(ef, elfsym.Dynamic)
	if err != nil {
		return false
	}
	for _, s := range syms {
		if elfsym.Defines(s) && s.Value != 0 {
			return true
		}
	}
	return false
}

// hasSection reports whether the binary carries a non-empty DWARF section
// .debug_NAME (or its compressed form .zdebug_NAME).
func hasSection(ef *elf.File, name string) bool {
	for _, s := range []string{".debug_" + name, ".zdebug_" + name} {
		if sec := ef.Section(s); sec != nil && sec.Type != elf.SHT_NOBITS && sec.Size > 0 {
			return true
		}
	}
	return false
}

// debugLink returns the file name in the binary's .gnu_debuglink section.
func debugLink(ef *elf.File) string {
	sec := ef.Section(".gnu_debuglink")
	if sec == nil {
		return ""
	}
	data, err := sec.Data()
	if err != nil {
		return ""
	}
	name, _, _ := bytes.Cut(data, []byte{0})
	return string(name)
}

// separateDebugFile finds the debug file gdb would load for the binary:
// by build ID under /usr/lib/debug/.build-id, then by .gnu_debuglink next
// to the binary, in its .debug folder and under /usr/lib/debug.
func separateDebugFile(ef *elf.File, abs string) string {
	var candidates []string
	if id := elfsym.BuildID(ef); len(id) > 2 {
		candidates = append(candidates, filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug"))
	}
	if link := debugLink(ef); link != "" && !strings.ContainsRune(link, '/') {
		dir := filepath.Dir(abs)
		candidates = append(candidates,
			filepath.Join(dir, link),
			filepath.Join(dir, ".debug", link),
			filepath.Join("/usr/lib/debug", dir, link))
	}
	for _, c := range candidates {
		if c == abs {
			continue
		}
		df, err := elf.Open(c)
		if err != nil {
			continue
		}
		ok := hasSection(df, "info")
		df.Close()
		if ok {
			return c
		}
	}
	return ""
}

var hostMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"386":     elf.EM_386,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"ppc64le": elf.EM_PPC64,
	"ppc64":   elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

func machineName(m elf.Machine) string {
	switch m {
	case elf.EM_X86_64:
		return "x86-64"
	case elf.EM_386:
		return "i386"
	case elf.EM_AARCH64:
		return "AArch64"
	case elf.EM_ARM:
		return "ARM"
	case elf.EM_PPC64:
		return "PowerPC64"
	case elf.EM_S390:
		return "s390x"
	case elf.EM_RISCV:
		return "RISC-V"
	}
	return strings.TrimPrefix(m.String(), "EM_")
}

func hostMachine() string {
	if m, ok := hostMachines[runtime.GOARCH]; ok {
		return machineName(m)
	}
	return runtime.GOARCH
}

// isScript reports whether the file at path starts with #!.
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2)
	n, _ := io.ReadFull(f, head)
	return n == 2 && string(head) == "#!"
}

// shimOf names the version manager whose shim the script f is (pyenv,
// asdf, rbenv: a script that execs `MANAGER exec NAME`), "" for another
// script.
func shimOf(f *os.File) string {
	text := make([]byte, 4096)
	n, _ := f.ReadAt(text, 0)
	text = text[:n]
	for _, m := range []string{"pyenv", "rbenv", "asdf"} {
		if bytes.Contains(text, []byte("/"+m+"\" exec")) || bytes.Contains(text, []byte(m+" exec")) || bytes.Contains(text, []byte("libexec/"+m+"\" exec")) {
			return m
		}
	}
	return ""
}
