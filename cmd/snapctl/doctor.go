package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/preflight"
	"github.com/spf13/cobra"
)

// doctorOptions are the flags and argument of `snapctl doctor`.
type doctorOptions struct {
	Gdb      string // --gdb
	Valgrind string // --valgrind
	// Heaptrack is --heaptrack: heaptrack's library directory.
	Heaptrack string
	Binary    string // the optional BINARY argument

	// binaryOnly skips every check but BINARY's: the tests of what
	// doctor says about a program, whose tool checks (two valgrind
	// runs, gdb's, about a second of processor time) are the same
	// as those of the test that checks them.
	binaryOnly bool
}

func newDoctorCmd() *cobra.Command {
	opts := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor [BINARY]",
		Short: "Check that gdb, valgrind and a program are ready for snapctl",
		Long: `doctor checks the environment snapctl needs and explains each problem it
finds: gdb and valgrind (their versions), vgdb, whether ptrace is permitted
(vgdb uses it to wake a program blocked in a system call), gdbserver (snapctl
attach has it trace the process, which then survives a killed gdb),
heaptrack (the native backend's per-site recording, --sites), whether the
kernel counts a native run's hits (uprobes and eBPF) or gdb does, whether
valgrind can run massif and memcheck here (a memcheck run also needs vgdb
and gdb's Python) and, given BINARY, whether it is a native program with
debug info.

Each line reads OK, WARN or FAIL. The exit code is non-zero when a check
fails: 4 for a missing or unusable tool, 5 for a binary that cannot be
profiled.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageError{fmt.Errorf("doctor takes at most one BINARY, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Binary = args[0]
			}
			return runDoctor(cmd.Context(), cmd.OutOrStdout(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Gdb, "gdb", "", "the gdb to check (default: gdb on PATH)")
	cmd.Flags().StringVar(&opts.Valgrind, "valgrind", "", "the valgrind to check (default: valgrind on PATH; vgdb is looked for next to it)")
	cmd.Flags().StringVar(&opts.Heaptrack, "heaptrack", "", "the directory of heaptrack's libraries to check (default: where Debian's heaptrack package puts them)")
	return cmd
}

// doctorError is returned when at least one check failed. It unwraps to
// the failures, so the exit code follows the first typed one
// (*preflight.MissingToolError, *preflight.BinaryError).
type doctorError struct {
	failed []error
}

func (e *doctorError) Error() string {
	if len(e.failed) == 1 {
		return "doctor: 1 check failed"
	}
	return fmt.Sprintf("doctor: %d checks failed", len(e.failed))
}

func (e *doctorError) Unwrap() []error { return e.failed }

// checkState is the outcome of one check.
type checkState string

const (
	checkOK   checkState = "OK"
	checkWarn checkState = "WARN"
	checkFail checkState = "FAIL"
)

// doctorReport prints one line per check and collects the failures.
type doctorReport struct {
	w      io.Writer
	failed []error
}

// line prints a check's outcome; explanation lines follow, indented.
func (r *doctorReport) line(state checkState, check, summary string, explain ...string) {
	fmt.Fprintf(r.w, "%-4s  %-10s  %s\n", state, check, summary)
	for _, e := range explain {
		fmt.Fprintf(r.w, "%-4s  %-10s  %s\n", "", "", e)
	}
}

func (r *doctorReport) fail(check, summary string, err error, explain ...string) {
	r.failed = append(r.failed, err)
	r.line(checkFail, check, summary, explain...)
}

// toolFailure prints a *preflight.MissingToolError as a FAIL line.
func (r *doctorReport) toolFailure(check string, err error) {
	var me *preflight.MissingToolError
	if errors.As(err, &me) {
		r.fail(check, me.Reason, err, fmt.Sprintf("install it with: sudo apt-get install %s", me.Package))
		return
	}
	r.fail(check, err.Error(), err)
}

// runDoctor runs every check and prints the outcome to w.
func runDoctor(ctx context.Context, w io.Writer, opts *doctorOptions) error {
	r := &doctorReport{w: w}
	if !opts.binaryOnly {
		checkTools(ctx, r, opts)
	}
	if opts.Binary != "" {
		if checkBinary(r, opts.Binary) {
			checkLibraries(ctx, r, opts.Binary)
		}
	}

	if len(r.failed) > 0 {
		return &doctorError{failed: r.failed}
	}
	return nil
}

// checkTools checks the tools and what the system permits: every line
// doctor prints before the binary's.
func checkTools(ctx context.Context, r *doctorReport, opts *doctorOptions) {
	// What a memcheck run needs besides valgrind running memcheck.
	var python, vgdbFound bool

	if gdb, err := preflight.FindTool("gdb", opts.Gdb); err != nil {
		r.toolFailure("gdb", err)
	} else if v, err := preflight.ToolVersion(ctx, "gdb", gdb); err != nil {
		r.toolFailure("gdb", err)
	} else {
		r.line(checkOK, "gdb", fmt.Sprintf("%s (%s)", v, gdb))
		if err := driver.CheckAgent(ctx, gdb); err != nil {
			r.line(checkWarn, "python", "gdb cannot run snapctl's agent: "+err.Error(),
				"every stop goes over GDB/MI, about 1.5 times slower, and --backend memcheck cannot run;",
				"Debian's gdb package has Python, gdb-minimal has not")
		} else {
			python = true
			r.line(checkOK, "python", "gdb's Python runs snapctl's agent, which takes plain stops inside gdb")
		}
	}

	valgrind, err := preflight.FindTool("valgrind", opts.Valgrind)
	if err != nil {
		r.toolFailure("valgrind", err)
		r.fail("vgdb", "not checked: valgrind is missing", err, "vgdb comes with valgrind: sudo apt-get install valgrind")
		r.line(checkWarn, "memcheck", "not checked: valgrind is missing; "+memcheckNeeds)
	} else {
		version, verr := preflight.ToolVersion(ctx, "valgrind", valgrind)
		if verr != nil {
			r.toolFailure("valgrind", verr)
		} else {
			r.line(checkOK, "valgrind", fmt.Sprintf("%s (%s)", version, valgrind))
			checkMassif(ctx, r, valgrind)
		}
		if vgdb, err := preflight.FindVgdb(valgrind); err != nil {
			r.toolFailure("vgdb", err)
		} else {
			vgdbFound = true
			r.line(checkOK, "vgdb", vgdb)
		}
		if verr == nil {
			checkMemcheck(ctx, r, valgrind, vgdbFound, python)
		} else {
			r.line(checkWarn, "memcheck", "not checked: valgrind does not run; "+memcheckNeeds)
		}
	}

	p := preflight.CheckPtrace()
	if f, restricted := p.Finding(); restricted {
		r.line(checkWarn, "ptrace", p.String(), append([]string{f.Summary}, f.Explain...)...)
	} else {
		r.line(checkOK, "ptrace", p.String())
	}
	checkGdbserver(ctx, r)
	checkHeaptrack(ctx, r, opts.Heaptrack)
	checkHits(r)
}

// checkHits says which way a native run would count its breakpoints'
// hits here: in the kernel, where only the measured hits stop the program,
// or by gdb, every hit a stop (docs/native.md, "Hits counted in the
// kernel").
func checkHits(r *doctorReport) {
	const gdbWay = "counted by gdb: every hit of a native run's breakpoint, measured or not, stops the program for about 0.3 ms"
	if os.Getenv(uprobes.ForceEnv) == "gdb" {
		if uprobes.Available() == nil {
			r.line(checkOK, "hits", gdbWay+" ("+uprobes.ForceEnv+"=gdb; without it the kernel here counts them: a hit not measured then costs microseconds)")
		} else {
			r.line(checkOK, "hits", gdbWay+" ("+uprobes.ForceEnv+"=gdb)")
		}
		return
	}
	if err := uprobes.Available(); err != nil {
		r.line(checkWarn, "hits", gdbWay+": "+err.Error(),
			"as root, or with CAP_BPF and CAP_PERFMON on a kernel with uprobes, the kernel counts the hits and only the measured ones stop")
		return
	}
	r.line(checkOK, "hits", "counted in the kernel (uprobes and eBPF): a native run's hit that is not measured costs microseconds")
}

// checkGdbserver looks for gdbserver on PATH. snapctl attach has gdb
// attach through it (--guard, the default), so that the process survives
// a gdb killed mid-run (gdbserver, its tracer, then removes the
// breakpoints and detaches). Only attach needs it, and it runs without it,
// unprotected: a missing gdbserver is a warning.
func checkGdbserver(ctx context.Context, r *doctorReport) {
	const unguarded = "snapctl attach runs without it, gdb tracing the process: a process it attached to dies of SIGTRAP if gdb is killed while the process runs into a breakpoint"
	path, err := exec.LookPath("gdbserver")
	if err != nil {
		r.line(checkWarn, "gdbserver", "not found on PATH: "+unguarded,
			"install it with: sudo apt-get install gdbserver")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil || !strings.Contains(first, "gdbserver") {
		r.line(checkWarn, "gdbserver", fmt.Sprintf("at %s does not run (gdbserver --version: %v, %q): %s", path, err, first, unguarded),
			"install it with: sudo apt-get install gdbserver")
		return
	}
	r.line(checkOK, "gdbserver", fmt.Sprintf("%s (%s)", first, path))
}

// checkHeaptrack looks for heaptrack's preload and inject libraries and
// its interpreter, and reads where the preload library keeps its buffer
// (heaptrack.ReadLayout), which a cut at a stop needs. Only native.sites
// (--sites) needs heaptrack: missing, it is a warning, and a run that
// asks for sites exits 4 before anything starts.
func checkHeaptrack(ctx context.Context, r *doctorReport, dir string) {
	const why = "the native backend's per-site recording (--sites, native.sites) needs it; runs without sites do not"
	tools, err := heaptrack.FindTools(dir)
	if err != nil {
		var me *heaptrack.MissingError
		if errors.As(err, &me) {
			r.line(checkWarn, "heaptrack", fmt.Sprintf("not installed (%s is missing): %s", me.Path, why),
				"install it with: sudo apt-get install "+me.Package)
			return
		}
		r.line(checkWarn, "heaptrack", err.Error()+": "+why)
		return
	}
	if _, err := heaptrack.ReadLayout(tools.Preload); err != nil {
		r.line(checkWarn, "heaptrack", fmt.Sprintf("%v: snapctl cannot cut its stream at a stop; %s", err, why))
		return
	}
	if err := checkInterpreter(ctx, tools.Interpret); err != nil {
		r.line(checkWarn, "heaptrack", fmt.Sprintf("%s does not work: %v: not OK for --sites, whose runs would record no call site (they exit 1)", tools.Interpret, err),
			"reinstall it with: sudo apt-get install --reinstall heaptrack")
		return
	}
	r.line(checkOK, "heaptrack", filepath.Dir(tools.Preload))
}

// checkInterpreter has heaptrack's interpreter read the first line of a
// stream, its version, and checks that it answers with it and ends well,
// as it does when a program's stream ends.
func checkInterpreter(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path)
	cmd.WaitDelay = time.Second
	cmd.Stdin = strings.NewReader("v 10100 3\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	said := strings.TrimSpace(stderr.String())
	if said != "" {
		said = ", saying " + strconv.Quote(firstLine(said))
	}
	switch {
	case err != nil:
		return fmt.Errorf("it failed (%v%s)", err, said)
	case !strings.HasPrefix(string(out), "v 10100 3"):
		return fmt.Errorf("it did not pass a stream's version line through (it wrote %q%s)", firstLine(string(out)), said)
	}
	return nil
}

// firstLine is the first line of text.
func firstLine(text string) string {
	line, _, _ := strings.Cut(text, "\n")
	return line
}

// checkMassif runs a trivial program under massif: valgrind may be
// installed and still unable to run here (no massif tool, a kernel or
// container it does not support).
func checkMassif(ctx context.Context, r *doctorReport, valgrind string) {
	dir, err := os.MkdirTemp("", "snapctl-doctor-")
	if err != nil {
		r.fail("massif", "cannot create a temporary directory", err, err.Error())
		return
	}
	defer os.RemoveAll(dir)
	ran, explain, err := runValgrindTool(ctx, valgrind, "massif", "--massif-out-file="+filepath.Join(dir, "massif.out"))
	switch {
	case !ran:
		r.line(checkWarn, "massif", "not checked: no `true` program on PATH to run under it")
	case err != nil:
		r.fail("massif", "valgrind cannot run massif here", fmt.Errorf("valgrind cannot run massif: %w", err), explain...)
	default:
		r.line(checkOK, "massif", "valgrind runs a program under massif")
	}
}

// memcheckNeeds is what a memcheck run needs: its measurement is a gdb
// command in Python (memcheck.py) that sends memcheck's monitor commands
// through vgdb.
const memcheckNeeds = "--backend memcheck needs valgrind's memcheck, vgdb and gdb with Python; massif and native runs do not"

// checkMemcheck runs a trivial program under memcheck and says whether a
// memcheck run has the rest of what it needs: vgdb and gdb's Python.
// Only --backend memcheck needs them: what is missing is a warning.
func checkMemcheck(ctx context.Context, r *doctorReport, valgrind string, vgdb, python bool) {
	ran, explain, err := runValgrindTool(ctx, valgrind, "memcheck")
	switch {
	case !ran:
		r.line(checkWarn, "memcheck", "not checked: no `true` program on PATH to run under it; "+memcheckNeeds)
		return
	case err != nil:
		r.line(checkWarn, "memcheck", "valgrind cannot run memcheck here: "+memcheckNeeds, explain...)
		return
	}
	var missing []string
	if !vgdb {
		missing = append(missing, "vgdb (Debian's valgrind package)")
	}
	if !python {
		missing = append(missing, "gdb with Python (Debian's gdb package; gdb-minimal has none)")
	}
	if len(missing) > 0 {
		r.line(checkWarn, "memcheck", "valgrind runs a program under memcheck, but --backend memcheck also needs "+strings.Join(missing, " and "),
			"its measurement is a gdb command in Python that sends memcheck's monitor commands through vgdb")
		return
	}
	r.line(checkOK, "memcheck", "valgrind runs a program under memcheck, and --backend memcheck has vgdb and gdb's Python")
}

// runValgrindTool runs `true` under valgrind's tool with args; ran is
// false when there is no `true` on PATH. On failure, explain is the
// command and the first lines valgrind wrote.
func runValgrindTool(ctx context.Context, valgrind, tool string, args ...string) (ran bool, explain []string, err error) {
	prog, err := exec.LookPath("true")
	if err != nil {
		return false, nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// --vgdb=no: valgrind's gdbserver is not what is checked here, and a
	// valgrind killed with its FIFOs open (doctor interrupted, or past its
	// deadline) would leave them in /tmp under the default prefix.
	cmd := exec.CommandContext(ctx, valgrind, append(append([]string{"--tool=" + tool, "--vgdb=no"}, args...), "-q", prog)...)
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		explain := []string{fmt.Sprintf("valgrind --tool=%s %s: %v", tool, prog, err)}
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if l != "" && len(explain) < 6 {
				explain = append(explain, l)
			}
		}
		return true, explain, err
	}
	return true, nil, nil
}

// checkBinary prints what snapctl needs to know about the target binary,
// and reports whether it can be profiled.
func checkBinary(r *doctorReport, path string) bool {
	info, err := preflight.InspectBinary(path)
	if err != nil {
		var be *preflight.BinaryError
		if errors.As(err, &be) {
			r.fail("binary", be.Path, err, clauses(strings.TrimPrefix(be.Error(), "binary "+be.Path+" "))...)
			return false
		}
		r.fail("binary", path, err, err.Error())
		return false
	}
	r.line(checkOK, "binary", fmt.Sprintf("%s: ELF %s %s", info.Path, info.Machine, info.Kind))
	if preflight.Static(info.Path) {
		r.line(checkWarn, "static", "statically linked: not OK for --backend massif or --sites, which would measure nothing (snapctl refuses them); use --backend native",
			"valgrind cannot replace malloc in a static program (its heap would read 0 B at every stop),",
			"and heaptrack's library cannot be preloaded or injected into one;",
			"the native backend reads glibc's allocator in a static program that keeps its symbol table")
	}
	switch {
	case len(info.Warnings) > 0:
		for _, f := range info.Warnings {
			r.line(checkWarn, f.Check, f.Summary, f.Explain...)
		}
	case info.DebugFile != "":
		r.line(checkOK, "debug info", "in "+info.DebugFile)
	default:
		r.line(checkOK, "debug info", "DWARF with line tables")
	}
	return true
}

// checkLibraries checks the debug info of the libraries the binary links
// that are not the system's: a breakpoint or a call site in one needs it as
// much as in the program.
func checkLibraries(ctx context.Context, r *doctorReport, binary string) {
	system := 0
	for _, lib := range preflight.LinkedLibraries(ctx, binary, "", nil) {
		if preflight.SystemLibrary(lib) {
			system++
			continue
		}
		info, err := preflight.InspectBinary(lib)
		switch {
		case err != nil:
			r.line(checkWarn, "library", lib, clauses(err.Error())...)
		case len(info.Warnings) > 0:
			for _, f := range info.Warnings {
				r.line(checkWarn, "library", f.Subject+" "+f.Summary, f.Explain...)
			}
		case info.DebugFile != "":
			r.line(checkOK, "library", fmt.Sprintf("%s: debug info in %s", lib, info.DebugFile))
		default:
			r.line(checkOK, "library", lib+": DWARF with line tables")
		}
	}
	if system > 0 {
		r.line(checkOK, "library", fmt.Sprintf("%d system libraries, not checked (their debug info comes from -dbg packages or debuginfod)", system))
	}
}

// clauses splits an explanation into its clauses, one per line, so long
// messages stay readable without breaking paths or commands.
func clauses(text string) []string {
	var lines []string
	for _, c := range strings.Split(text, "; ") {
		if c = strings.TrimSpace(c); c != "" {
			lines = append(lines, c)
		}
	}
	return lines
}
