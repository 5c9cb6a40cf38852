package preflight

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
)

// buildProgram compiles a trivial C program with extra compiler flags.
func buildProgram(t *testing.T, flags ...string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "prog.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return testenv.Build(t, src, flags...)
}

// writeFile writes a file with the given mode into a fresh directory.
func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFindTool(t *testing.T) {
	testenv.MustHave(t, "gdb")
	gdb, _ := exec.LookPath("gdb")
	dir := t.TempDir()
	notExec := writeFile(t, "gdb", "", 0o644)

	if got, err := FindTool("gdb", ""); err != nil || got != gdb {
		t.Errorf(`FindTool("gdb", "") = %q, %v; want %q`, got, err, gdb)
	}
	if got, err := FindTool("gdb", "gdb"); err != nil || got != gdb {
		t.Errorf(`FindTool("gdb", "gdb") = %q, %v; want %q`, got, err, gdb)
	}
	for _, tt := range []struct {
		tool, path, want string
	}{
		{"gdb", "/nonexistent/gdb", "gdb not found at /nonexistent/gdb; install it with: sudo apt-get install gdb"},
		{"gdb", "no-such-gdb-here", `gdb "no-such-gdb-here" not found on PATH; install it with: sudo apt-get install gdb`},
		{"valgrind", dir, "valgrind not found at " + dir + ": it is a directory; install it with: sudo apt-get install valgrind"},
		{"gdb", notExec, "gdb at " + notExec + " is not executable; install it with: sudo apt-get install gdb"},
	} {
		_, err := FindTool(tt.tool, tt.path)
		var me *MissingToolError
		if !errors.As(err, &me) || me.Tool != tt.tool || me.Package != tt.tool {
			t.Errorf("FindTool(%q, %q) error = %#v, want a *MissingToolError for %s", tt.tool, tt.path, err, tt.tool)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("FindTool(%q, %q) error = %q, want %q", tt.tool, tt.path, err, tt.want)
		}
	}

	t.Setenv("PATH", t.TempDir())
	_, err := FindTool("valgrind", "")
	if want := "valgrind not found on PATH; install it with: sudo apt-get install valgrind"; err == nil || err.Error() != want {
		t.Errorf("FindTool with an empty PATH: %v, want %q", err, want)
	}
}

func TestFindVgdb(t *testing.T) {
	testenv.MustHave(t, "valgrind", "vgdb")
	// vgdb next to valgrind wins over the one on PATH.
	dir := t.TempDir()
	valgrind := filepath.Join(dir, "valgrind")
	vgdb := filepath.Join(dir, "vgdb")
	for _, p := range []string{valgrind, vgdb} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FindVgdb(valgrind); err != nil || got != vgdb {
		t.Errorf("FindVgdb(%q) = %q, %v; want %q", valgrind, got, err, vgdb)
	}
	// Through a symlink to valgrind, the folder of the real file counts.
	links := t.TempDir()
	if err := os.Symlink(valgrind, filepath.Join(links, "valgrind")); err != nil {
		t.Fatal(err)
	}
	if got, err := FindVgdb(filepath.Join(links, "valgrind")); err != nil || got != vgdb {
		t.Errorf("FindVgdb through a symlink = %q, %v; want %q", got, err, vgdb)
	}
	// Without one beside it, vgdb comes from PATH.
	onPath, _ := exec.LookPath("vgdb")
	alone := writeFile(t, "valgrind", "", 0o755)
	if got, err := FindVgdb(alone); err != nil || got != onPath {
		t.Errorf("FindVgdb(%q) = %q, %v; want %q from PATH", alone, got, err, onPath)
	}
	t.Setenv("PATH", t.TempDir())
	_, err := FindVgdb(alone)
	want := "vgdb not found next to " + alone + " nor on PATH (it comes with valgrind); install it with: sudo apt-get install valgrind"
	if err == nil || err.Error() != want {
		t.Errorf("FindVgdb without vgdb: %v, want %q", err, want)
	}
}

func TestToolVersion(t *testing.T) {
	testenv.MustHave(t, "gdb", "valgrind")
	testenv.NoLeftovers(t)
	ctx := context.Background()
	gdb, _ := exec.LookPath("gdb")
	valgrind, _ := exec.LookPath("valgrind")

	v, err := ToolVersion(ctx, "gdb", gdb)
	if err != nil || !strings.HasPrefix(v.Text, "GNU gdb") || v.Major < 9 {
		t.Errorf("gdb version = %+v, %v", v, err)
	}
	v, err = ToolVersion(ctx, "valgrind", valgrind)
	if err != nil || !strings.HasPrefix(v.Text, "valgrind-3.") || v.Major != 3 || v.Minor < 13 {
		t.Errorf("valgrind version = %+v, %v", v, err)
	}

	for _, tt := range []struct {
		tool, script, want string
		version            Version
	}{
		{"gdb", "echo 'GNU gdb (Ubuntu 12.1-0ubuntu1~22.04) 12.1'", "", Version{"GNU gdb (Ubuntu 12.1-0ubuntu1~22.04) 12.1", 12, 1}},
		{"gdb", "echo 'GNU gdb (GDB) Red Hat Enterprise Linux 8.2-15.el8'", "gdb 8.2 at PATH is too old: snapctl needs 9.0 or later; install it with: sudo apt-get install gdb", Version{"GNU gdb (GDB) Red Hat Enterprise Linux 8.2-15.el8", 8, 2}},
		{"valgrind", "echo valgrind-3.12.0", "valgrind 3.12 at PATH is too old: snapctl needs 3.13 or later; install it with: sudo apt-get install valgrind", Version{"valgrind-3.12.0", 3, 12}},
		{"valgrind", "echo hello", `valgrind at PATH does not look like valgrind: --version printed "hello"; install it with: sudo apt-get install valgrind`, Version{"hello", 0, 0}},
		{"gdb", "exit 3", "gdb at PATH does not run (gdb --version: exit status 3); install it with: sudo apt-get install gdb", Version{}},
	} {
		path := writeFile(t, tt.tool, "#!/bin/sh\n"+tt.script+"\n", 0o755)
		v, err := ToolVersion(ctx, tt.tool, path)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if want := strings.ReplaceAll(tt.want, "PATH", path); got != want || v != tt.version {
			t.Errorf("%s printing %q: %+v, %q; want %+v, %q", tt.tool, tt.script, v, got, tt.version, want)
		}
	}
}

func TestInspectBinary(t *testing.T) {
	good := buildProgram(t)
	noDebug := buildProgram(t, "-g0")
	stripped := buildProgram(t, "-g0", "-s")

	notExec := filepath.Join(t.TempDir(), "prog")
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notExec, data, 0o644); err != nil {
		t.Fatal(err)
	}
	script := writeFile(t, "tool.sh", "#!/bin/sh -e\necho hi\n", 0o755)
	text := writeFile(t, "notes.txt", "hello\n", 0o755)
	empty := writeFile(t, "empty", "", 0o755)
	obj := filepath.Join(t.TempDir(), "prog.o")
	src := writeFile(t, "prog.c", "int f(void) { return 1; }\n", 0o644)
	if out, err := exec.Command("gcc", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc -c: %v\n%s", err, out)
	}
	dir := t.TempDir()

	for _, tt := range []struct {
		path    string
		problem BinaryProblem
		want    string
	}{
		{"/nonexistent/prog", BinaryMissing, "binary /nonexistent/prog does not exist"},
		{dir, BinaryIsDir, "binary " + dir + " is a directory, not a program"},
		{script, BinaryScript, "binary " + script + " is a script (#!/bin/sh -e), not a compiled program: valgrind and gdb need the native program that runs it; " +
			"profile the interpreter instead, e.g. snapctl run PLAN /bin/sh " + script},
		{text, BinaryNotELF, "binary " + text + " is not an ELF executable (snapctl profiles compiled Linux programs)"},
		{empty, BinaryNotELF, "binary " + empty + " is not an ELF executable (snapctl profiles compiled Linux programs)"},
		{obj, BinaryNotProgram, "binary " + obj + " is an ELF relocatable object (link it into a program first), not a program that can run"},
		{notExec, BinaryNotExecutable, "binary " + notExec + " is not executable (chmod +x " + notExec + ")"},
	} {
		_, err := InspectBinary(tt.path)
		var be *BinaryError
		if !errors.As(err, &be) || be.Problem != tt.problem {
			t.Errorf("InspectBinary(%q) = %v, want problem %d", tt.path, err, tt.problem)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("InspectBinary(%q):\n got %s\nwant %s", tt.path, err, tt.want)
		}
	}

	noLines := []string{"gdb cannot resolve file:line breakpoints in it and reports show no source lines for its frames; breakpoints on the functions of the libraries it links (libc's getpid, malloc) are not affected", "rebuild it with -g (and -O0 for exact lines)"}
	for _, tt := range []struct {
		path string
		want BinaryInfo
	}{
		{good, BinaryInfo{Path: good, Kind: "position-independent executable", Machine: "x86-64", DebugInfo: true, Symbols: true}},
		{noDebug, BinaryInfo{Path: noDebug, Kind: "position-independent executable", Machine: "x86-64", Symbols: true,
			Warnings: []Finding{{Check: "debug info", Subject: noDebug, Summary: "has no debug info", Explain: noLines}}}},
		{stripped, BinaryInfo{Path: stripped, Kind: "position-independent executable", Machine: "x86-64",
			Warnings: []Finding{
				{Check: "debug info", Subject: stripped, Summary: "has no debug info", Explain: noLines},
				{Check: "symbols", Subject: stripped, Summary: "is stripped (no symbol table)",
					Explain: []string{"gdb can break on *addresses in it but not on its own functions (the functions of the libraries it links still work), and reports name its frames ??? under massif, by module and offset with --sites (prog+0x1a2b3)", "build it without stripping"}},
			}}},
	} {
		got, err := InspectBinary(tt.path)
		if err != nil {
			t.Errorf("InspectBinary(%q): %v", tt.path, err)
			continue
		}
		if diff := cmp.Diff(&tt.want, got); diff != "" {
			t.Errorf("InspectBinary(%q) (-want +got):\n%s", tt.path, diff)
		}
	}
	// snapctl run prints a finding as one sentence.
	info, _ := InspectBinary(stripped)
	if got, want := info.Warnings[1].String(), stripped+" is stripped (no symbol table): gdb can break on *addresses in it but not on its own functions (the functions of the libraries it links still work), and reports name its frames ??? under massif, by module and offset with --sites (prog+0x1a2b3); build it without stripping"; got != want {
		t.Errorf("warning sentence:\n got %s\nwant %s", got, want)
	}
}

// TestInspectBinarySeparateDebugInfo checks a binary whose debug info was
// moved to a file named by .gnu_debuglink, as distributions ship them.
func TestInspectBinarySeparateDebugInfo(t *testing.T) {
	testenv.MustHave(t, "objcopy")
	dir := t.TempDir()
	bin := filepath.Join(dir, "prog")
	data, err := os.ReadFile(buildProgram(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	debug := filepath.Join(dir, "prog.debug")
	for _, args := range [][]string{
		{"--only-keep-debug", bin, debug},
		{"--strip-debug", "--add-gnu-debuglink=" + debug, bin},
	} {
		if out, err := exec.Command("objcopy", args...).CombinedOutput(); err != nil {
			t.Fatalf("objcopy %q: %v\n%s", args, err, out)
		}
	}
	info, err := InspectBinary(bin)
	if err != nil {
		t.Fatal(err)
	}
	if !info.DebugInfo || info.DebugFile != debug || len(info.Warnings) != 0 {
		t.Errorf("with %s beside it: %+v", debug, info)
	}
	if err := os.Remove(debug); err != nil {
		t.Fatal(err)
	}
	info, err = InspectBinary(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := []Finding{{Check: "debug info", Subject: bin, Summary: "keeps its debug info in a separate file (prog.debug) that is not installed",
		Explain: []string{"gdb cannot resolve file:line breakpoints in it and reports show no source lines for its frames; breakpoints on the functions of the libraries it links (libc's getpid, malloc) are not affected", "install the matching -dbgsym/-dbg package or rebuild with -g"}}}
	if info.DebugInfo || !cmp.Equal(info.Warnings, want) {
		t.Errorf("without %s: DebugInfo %v, warnings (-want +got):\n%s", debug, info.DebugInfo, cmp.Diff(want, info.Warnings))
	}
}

func TestCheckPtrace(t *testing.T) {
	dir := t.TempDir()
	scope := func(s string) string {
		p := filepath.Join(dir, "scope-"+s)
		os.WriteFile(p, []byte(s+"\n"), 0o644)
		return p
	}
	status := func(capEff string) string {
		p := filepath.Join(dir, "status-"+capEff)
		os.WriteFile(p, []byte("Name:\tsnapctl\nCapInh:\t0000000000000000\nCapEff:\t"+capEff+"\nCapBnd:\t000001ffffffffff\n"), 0o644)
		return p
	}
	const all, none = "000001ffffffffff", "0000000000000000"
	const cost = "vgdb cannot wake a target blocked in a system call, so a stop may come late " +
		"(when a blocked thread next returns from the kernel) and Ctrl-C may wait for it"
	for _, tt := range []struct {
		name              string
		scopeFile, status string
		container         bool
		want              Ptrace
		str, problem      string
	}{
		{"no Yama", filepath.Join(dir, "absent"), status(none), false, Ptrace{Scope: -1}, "no Yama ptrace restrictions, no CAP_SYS_PTRACE", ""},
		{"scope 1", scope("1"), status(none), false, Ptrace{Scope: 1}, "kernel.yama.ptrace_scope=1, no CAP_SYS_PTRACE", ""},
		{"scope 2 with the capability", scope("2"), status(all), false, Ptrace{Scope: 2, CapSysPtrace: true}, "kernel.yama.ptrace_scope=2, CAP_SYS_PTRACE held", ""},
		{"scope 2", scope("2"), status(none), false, Ptrace{Scope: 2}, "kernel.yama.ptrace_scope=2, no CAP_SYS_PTRACE",
			"ptrace is restricted to administrators (kernel.yama.ptrace_scope=2) and snapctl lacks CAP_SYS_PTRACE: " + cost + "; allow it with: sudo sysctl kernel.yama.ptrace_scope=1"},
		{"scope 3", scope("3"), status(all), false, Ptrace{Scope: 3, CapSysPtrace: true}, "kernel.yama.ptrace_scope=3, CAP_SYS_PTRACE held",
			"ptrace is disabled (kernel.yama.ptrace_scope=3): " + cost + "; ptrace_scope 3 can only be lowered by a reboot"},
		{"container", filepath.Join(dir, "absent"), status("00000000a80425fb"), true, Ptrace{Scope: -1, Container: true}, "no Yama ptrace restrictions, in a container, no CAP_SYS_PTRACE",
			"snapctl runs in a container without CAP_SYS_PTRACE, where ptrace is usually blocked: " + cost + "; start the container with --cap-add=SYS_PTRACE"},
		{"container with the capability", filepath.Join(dir, "absent"), status("00000000a80c25fb"), true, Ptrace{Scope: -1, CapSysPtrace: true, Container: true}, "no Yama ptrace restrictions, in a container, CAP_SYS_PTRACE held", ""},
	} {
		got := checkPtrace(tt.scopeFile, tt.status, tt.container)
		problem := ""
		if f, ok := got.Finding(); ok {
			problem = f.String()
		}
		if got != tt.want || got.String() != tt.str || problem != tt.problem || got.Allowed() != (tt.problem == "") {
			t.Errorf("%s: %+v\n String %q\nProblem %q\nwant %+v\n String %q\nProblem %q", tt.name, got, got.String(), problem, tt.want, tt.str, tt.problem)
		}
	}
}

func TestCheck(t *testing.T) {
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	testenv.NoLeftovers(t)
	ctx := context.Background()
	bin := buildProgram(t, "-g0")

	env, err := Check(ctx, Options{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	if env.Gdb == "" || env.Valgrind == "" || env.Vgdb == "" || env.GdbVersion.Major == 0 || env.ValgrindVersion.Major != 3 {
		t.Errorf("Check found %+v", env)
	}
	if env.Binary == nil || env.Binary.Path != bin || len(env.Warnings) == 0 || env.Warnings[0].Summary != "has no debug info" {
		t.Errorf("Check binary %+v, warnings %q", env.Binary, env.Warnings)
	}

	// Every problem at once: both tools and the binary.
	_, err = Check(ctx, Options{Gdb: "/nonexistent/gdb", Valgrind: "/nonexistent/valgrind", Binary: "/nonexistent/prog"})
	want := "gdb not found at /nonexistent/gdb; install it with: sudo apt-get install gdb\n" +
		"valgrind not found at /nonexistent/valgrind; install it with: sudo apt-get install valgrind\n" +
		"binary /nonexistent/prog does not exist"
	if err == nil || err.Error() != want {
		t.Errorf("Check error:\n%v\nwant:\n%s", err, want)
	}
	var me *MissingToolError
	var be *BinaryError
	if !errors.As(err, &me) || me.Tool != "gdb" || !errors.As(err, &be) {
		t.Errorf("Check error does not hold the typed errors: %#v", err)
	}
}

// TestCheckGivenGdbVersion: a version the caller read from its own
// gdb is judged as gdb --version's first line would be.
func TestCheckGivenGdbVersion(t *testing.T) {
	testenv.MustHave(t, "gdb")
	for _, tt := range []struct{ line, wantErr string }{
		{"GNU gdb (Debian 13.1-3) 13.1", ""},
		{"GNU gdb (GDB) 7.0", "too old"},
		{"not a gdb", "does not look like gdb"},
	} {
		env, err := Check(context.Background(), Options{NoValgrind: true, GdbVersion: func() string { return tt.line }})
		switch {
		case tt.wantErr == "" && (err != nil || env.GdbVersion.Text != tt.line || env.GdbVersion.Major != 13 || env.GdbVersion.Minor != 1):
			t.Errorf("%q: version %+v, error %v", tt.line, env.GdbVersion, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: error %v, want one that says %q", tt.line, err, tt.wantErr)
		}
	}
}
