package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/preflight"
)

// TestDoctor runs the doctor tests. Doctor runs in the test process, and
// the gdb and valgrind it starts carry no test's mark, so the leftover check
// of any other test running beside it would take them for its own and kill
// them (testenv.NoLeftovers): TestDoctor does not run in parallel with the
// package's other tests. Its own cases, which differ only in doctor's
// arguments, run in parallel with each other, and its leftover check,
// once they are all over, covers every process their doctors started.
func TestDoctor(t *testing.T) {
	testenv.NoLeftovers(t)
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"GoodBinary", testDoctorGoodBinary},
		{"WithoutBinary", testDoctorWithoutBinary},
		{"NoDebugInfo", testDoctorNoDebugInfo},
		{"MissingGdb", testDoctorMissingGdb},
		{"GdbWithoutPython", testDoctorGdbWithoutPython},
		{"Memcheck", testDoctorMemcheck},
		{"ValgrindIsADirectory", testDoctorValgrindIsADirectory},
		{"Script", testDoctorScript},
		{"NotExecutable", testDoctorNotExecutable},
		{"Libraries", testDoctorLibraries},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t)
		})
	}
}

// runDoctorCmd runs `snapctl doctor args...` and returns its output split
// into lines, and its error. The test's leftover check is its parent's
// (TestDoctor's) or its own when it runs alone (TestDoctorHits).
func runDoctorCmd(t *testing.T, args ...string) ([]string, error) {
	t.Helper()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	root := newRootCmd("dev")
	var out, stderr bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&stderr)
	root.SetArgs(append([]string{"doctor"}, args...))
	err := root.ExecuteContext(context.Background())
	if stderr.Len() > 0 {
		t.Errorf("doctor wrote to stderr: %q", stderr.String())
	}
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), err
}

// runDoctorBinary runs doctor's checks of bin alone, for the tests of
// what doctor says about a program: testDoctorGoodBinary runs them after
// the tool checks, as `snapctl doctor BINARY` does, and
// testDoctorWithoutBinary checks the tools.
func runDoctorBinary(t *testing.T, bin string) ([]string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runDoctor(context.Background(), &out, &doctorOptions{Binary: bin, binaryOnly: true})
	return strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), err
}

// doctorProgram compiles a trivial C program with extra compiler flags.
func doctorProgram(t *testing.T, flags ...string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "prog.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return testenv.Build(t, src, flags...)
}

// checkToolLines checks the lines for gdb, valgrind, massif, vgdb,
// memcheck and ptrace, which depend on the machine, by their beginnings.
func checkToolLines(t *testing.T, lines []string) {
	t.Helper()
	prefixes := []string{
		"OK    gdb         GNU gdb ",
		"OK    python      gdb's Python runs snapctl's agent",
		"OK    valgrind    valgrind-3.",
		"OK    massif      valgrind runs a program under massif",
		"OK    vgdb        /",
		"OK    memcheck    valgrind runs a program under memcheck, and --backend memcheck has vgdb and gdb's Python",
		"ptrace      ",
	}
	if len(lines) < len(prefixes) {
		t.Fatalf("doctor printed %d lines, want at least %d:\n%s", len(lines), len(prefixes), strings.Join(lines, "\n"))
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(strings.TrimPrefix(strings.TrimPrefix(lines[i], "OK    "), "WARN  "), strings.TrimPrefix(p, "OK    ")) {
			t.Errorf("line %d = %q, want it to start with %q", i+1, lines[i], p)
		}
	}
}

// binaryLines returns the lines after the tool and ptrace checks, whose
// explanations (indented) follow the ptrace line when ptrace is limited.
func binaryLines(lines []string) []string {
	for i, l := range lines {
		if strings.Contains(l, "  binary  ") {
			return lines[i:]
		}
	}
	return nil
}

func testDoctorGoodBinary(t *testing.T) {
	bin := doctorProgram(t)
	lines, err := runDoctorCmd(t, bin)
	if err != nil {
		t.Fatalf("doctor on a good binary: %v\n%s", err, strings.Join(lines, "\n"))
	}
	checkToolLines(t, lines)
	want := []string{
		"OK    binary      " + bin + ": ELF x86-64 position-independent executable",
		"OK    debug info  DWARF with line tables",
		// libc, the system's
		"OK    library     1 system libraries, not checked (their debug info comes from -dbg packages or debuginfod)",
	}
	if diff := cmp.Diff(want, binaryLines(lines)); diff != "" {
		t.Errorf("binary lines (-want +got):\n%s", diff)
	}
}

func testDoctorWithoutBinary(t *testing.T) {
	lines, err := runDoctorCmd(t)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, strings.Join(lines, "\n"))
	}
	checkToolLines(t, lines)
	if got := binaryLines(lines); got != nil {
		t.Errorf("binary lines without a binary: %q", got)
	}
}

func testDoctorNoDebugInfo(t *testing.T) {
	bin := doctorProgram(t, "-g0")
	lines, err := runDoctorBinary(t, bin)
	if err != nil {
		t.Fatalf("a binary without debug info is a warning, not a failure: %v", err)
	}
	want := []string{
		"OK    binary      " + bin + ": ELF x86-64 position-independent executable",
		"WARN  debug info  has no debug info",
		"                  gdb cannot resolve file:line breakpoints in it and reports show no source lines for its frames; breakpoints on the functions of the libraries it links (libc's getpid, malloc) are not affected",
		"                  rebuild it with -g (and -O0 for exact lines)",
		"OK    library     1 system libraries, not checked (their debug info comes from -dbg packages or debuginfod)",
	}
	if diff := cmp.Diff(want, binaryLines(lines)); diff != "" {
		t.Errorf("binary lines (-want +got):\n%s", diff)
	}
}

func testDoctorMissingGdb(t *testing.T) {
	lines, err := runDoctorCmd(t, "--gdb", "/nonexistent/gdb")
	want := []string{
		"FAIL  gdb         not found at /nonexistent/gdb",
		"                  install it with: sudo apt-get install gdb",
	}
	if diff := cmp.Diff(want, lines[:2]); diff != "" {
		t.Errorf("gdb lines (-want +got):\n%s", diff)
	}
	var me *preflight.MissingToolError
	if !errors.As(err, &me) || me.Tool != "gdb" {
		t.Fatalf("doctor error %v does not hold a *MissingToolError for gdb", err)
	}
	if got, want := err.Error(), "doctor: 1 check failed"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if code, _ := describe(err); code != exitEnvironment {
		t.Errorf("exit code %d, want %d", code, exitEnvironment)
	}
}

// A gdb built without Python (Debian's gdb-minimal) still drives snapctl,
// every stop over GDB/MI: doctor warns and does not fail.
func testDoctorGdbWithoutPython(t *testing.T) {
	gdb := filepath.Join(t.TempDir(), "gdb")
	script := "#!/bin/sh\n" +
		"if [ \"$1\" = --version ]; then echo 'GNU gdb (Debian 13.1-3) 13.1'; exit 0; fi\n" +
		"echo 'Python scripting is not supported in this copy of GDB.' >&2\n"
	if err := os.WriteFile(gdb, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	lines, err := runDoctorCmd(t, "--gdb", gdb)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, strings.Join(lines, "\n"))
	}
	want := []string{
		"WARN  python      gdb cannot run snapctl's agent: Python scripting is not supported in this copy of GDB.",
		"                  every stop goes over GDB/MI, about 1.5 times slower, and --backend memcheck cannot run;",
		"                  Debian's gdb package has Python, gdb-minimal has not",
	}
	if diff := cmp.Diff(want, lines[1:4]); diff != "" {
		t.Errorf("python lines (-want +got):\n%s", diff)
	}
	// A memcheck run's measurement is a gdb command in Python.
	want = []string{
		"WARN  memcheck    valgrind runs a program under memcheck, but --backend memcheck also needs gdb with Python (Debian's gdb package; gdb-minimal has none)",
		"                  its measurement is a gdb command in Python that sends memcheck's monitor commands through vgdb",
	}
	if diff := cmp.Diff(want, linesFrom(lines, "memcheck", 2)); diff != "" {
		t.Errorf("memcheck lines (-want +got):\n%s", diff)
	}
}

// linesFrom returns the n lines from the first of check's.
func linesFrom(lines []string, check string, n int) []string {
	for i, l := range lines {
		if len(l) > 6 && strings.HasPrefix(l[6:], check+" ") {
			return lines[i:min(i+n, len(lines))]
		}
	}
	return nil
}

// testDoctorMemcheck: a valgrind that runs massif but not memcheck fails
// no check (only --backend memcheck needs memcheck) and says why, in
// valgrind's words.
func testDoctorMemcheck(t *testing.T) {
	real, err := preflight.FindTool("valgrind", "")
	if err != nil {
		t.Skip(err)
	}
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	valgrind := filepath.Join(dir, "valgrind")
	script := "#!/bin/sh\n" +
		"for a; do [ \"$a\" = --tool=memcheck ] && { echo \"valgrind: failed to start tool 'memcheck' for platform 'amd64-linux': No such file or directory\" >&2; exit 1; }; done\n" +
		"exec " + real + " \"$@\"\n"
	if err := os.WriteFile(valgrind, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	lines, err := runDoctorCmd(t, "--valgrind", valgrind)
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, strings.Join(lines, "\n"))
	}
	want := []string{
		"WARN  memcheck    valgrind cannot run memcheck here: --backend memcheck needs valgrind's memcheck, vgdb and gdb with Python; massif and native runs do not",
		"                  valgrind --tool=memcheck " + prog + ": exit status 1",
		"                  valgrind: failed to start tool 'memcheck' for platform 'amd64-linux': No such file or directory",
	}
	if diff := cmp.Diff(want, linesFrom(lines, "memcheck", 3)); diff != "" {
		t.Errorf("memcheck lines (-want +got):\n%s", diff)
	}
	if got := linesFrom(lines, "massif", 1); len(got) != 1 || !strings.HasPrefix(got[0], "OK ") {
		t.Errorf("massif line %q, want OK", got)
	}
}

func testDoctorValgrindIsADirectory(t *testing.T) {
	dir := t.TempDir()
	lines, err := runDoctorCmd(t, "--valgrind", dir)
	want := []string{
		"FAIL  valgrind    not found at " + dir + ": it is a directory",
		"                  install it with: sudo apt-get install valgrind",
		"FAIL  vgdb        not checked: valgrind is missing",
		"                  vgdb comes with valgrind: sudo apt-get install valgrind",
		"WARN  memcheck    not checked: valgrind is missing; --backend memcheck needs valgrind's memcheck, vgdb and gdb with Python; massif and native runs do not",
	}
	if len(lines) < 7 {
		t.Fatalf("doctor printed:\n%s", strings.Join(lines, "\n"))
	}
	if diff := cmp.Diff(want, lines[2:7]); diff != "" {
		t.Errorf("valgrind lines (-want +got):\n%s", diff)
	}
	if got, want := err.Error(), "doctor: 2 checks failed"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func testDoctorScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "tool.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	lines, err := runDoctorBinary(t, script)
	want := []string{
		"FAIL  binary      " + script,
		"                  is a script (#!/bin/sh), not a compiled program: valgrind and gdb need the native program that runs it",
		"                  profile the interpreter instead, e.g. snapctl run PLAN /bin/sh " + script,
	}
	if diff := cmp.Diff(want, binaryLines(lines)); diff != "" {
		t.Errorf("binary lines (-want +got):\n%s", diff)
	}
	var be *preflight.BinaryError
	if !errors.As(err, &be) || be.Problem != preflight.BinaryScript {
		t.Fatalf("doctor error %v does not hold a *BinaryError for a script", err)
	}
	if code, _ := describe(err); code != exitInput {
		t.Errorf("exit code %d, want %d", code, exitInput)
	}
}

func testDoctorNotExecutable(t *testing.T) {
	data, err := os.ReadFile(doctorProgram(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "prog")
	if err := os.WriteFile(bin, data, 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := runDoctorBinary(t, bin)
	want := []string{
		"FAIL  binary      " + bin,
		"                  is not executable (chmod +x " + bin + ")",
	}
	if diff := cmp.Diff(want, binaryLines(lines)); diff != "" {
		t.Errorf("binary lines (-want +got):\n%s", diff)
	}
	var be *preflight.BinaryError
	if !errors.As(err, &be) || be.Problem != preflight.BinaryNotExecutable {
		t.Fatalf("doctor error %v does not hold a *BinaryError", err)
	}
}

func TestDoctorTooManyArguments(t *testing.T) {
	root := newRootCmd("dev")
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"doctor", "a", "b"})
	err := root.Execute()
	if code, msg := describe(err); code != exitUsage || msg != "doctor takes at most one BINARY, got 2 arguments (see 'snapctl help')" {
		t.Errorf("describe(%v) = %d, %q", err, code, msg)
	}
}

// doctor BINARY checks the debug info of the libraries the program links
// that are not the system's, and counts the system's.
func testDoctorLibraries(t *testing.T) {
	lib := testenv.Build(t, filepath.Join(fixtures, "libkeep.c"), "-shared", "-fPIC")
	bare := testenv.Build(t, filepath.Join(fixtures, "libkeep.c"), "-shared", "-fPIC", "-g0")
	for _, tc := range []struct {
		name, lib, want string
	}{
		{"with debug info", lib, "OK    library     " + lib + ": DWARF with line tables"},
		{"without", bare, "WARN  library     " + bare + " has no debug info"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := testenv.Build(t, filepath.Join(fixtures, "libmain.c"), "-Wl,--no-as-needed", tc.lib, "-ldl")
			lines, err := runDoctorBinary(t, bin)
			if err != nil {
				t.Fatalf("doctor: %v\n%s", err, strings.Join(lines, "\n"))
			}
			var libs []string
			for _, l := range lines {
				if strings.Contains(l, "library") {
					libs = append(libs, l)
				}
			}
			if len(libs) != 2 || libs[0] != tc.want || !strings.Contains(libs[1], "system libraries, not checked") {
				t.Errorf("library lines:\n%s\nwant %q, then the system libraries", strings.Join(libs, "\n"), tc.want)
			}
		})
	}
}

// doctor says which way a native run counts hits: in the kernel where it
// lets snapctl, by gdb where it does not or SNAPCTL_HITS=gdb is set.
func TestDoctorHits(t *testing.T) {
	testenv.NoLeftovers(t)
	// The first look runs doctor whole, the second only its check of
	// the hits, whose line is what changes.
	hitsLine := func(whole bool) string {
		var lines []string
		if whole {
			lines, _ = runDoctorCmd(t)
		} else {
			var out bytes.Buffer
			checkHits(&doctorReport{w: &out})
			lines = strings.Split(out.String(), "\n")
		}
		for _, l := range lines {
			if strings.Contains(l, "  hits  ") {
				return l
			}
		}
		t.Fatalf("no hits line:\n%s", strings.Join(lines, "\n"))
		return ""
	}
	t.Setenv("SNAPCTL_HITS", "gdb")
	got := hitsLine(true)
	if !strings.HasPrefix(got, "OK    hits        counted by gdb: ") {
		t.Errorf("hits line %q, want gdb's way", got)
	}
	if uprobes.Available() == nil && !strings.HasSuffix(got, "costs microseconds)") {
		t.Errorf("hits line %q does not offer the kernel's way", got)
	}
	t.Setenv("SNAPCTL_HITS", "")
	want := "OK    hits        counted in the kernel (uprobes and eBPF)"
	if err := uprobes.Available(); err != nil {
		want = "WARN  hits        counted by gdb: "
	}
	if got := hitsLine(false); !strings.HasPrefix(got, want) {
		t.Errorf("hits line %q, want it to start with %q", got, want)
	}
}
