package driver

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// massifLaunch runs the target under valgrind's massif, which gdb reaches
// through vgdb.
type massifLaunch struct{}

func newMassifLaunch(*backendPlan) launcher { return massifLaunch{} }

func (massifLaunch) beforeClose(*session) {}
func (massifLaunch) local() bool          { return false }
func (massifLaunch) fate() string         { return "" }

// launch starts valgrind and connects gdb to valgrind's gdbserver through
// vgdb: the gdb started during Run's checks, which has read the binary
// by now, or else one started here, which reads it while valgrind gets
// ready.
func (massifLaunch) launch(ctx context.Context, s *session) error {
	vargs := s.valgrindArgs()
	s.m.Valgrind = append([]string{s.tools.valgrind}, vargs...)
	vg, err := startValgrind(valgrindConfig{
		Path:       s.tools.valgrind,
		Args:       vargs,
		Dir:        s.cwd,
		Env:        append(s.childEnv(), s.plan.Target.Env...),
		Stdout:     s.stdout,
		Stderr:     s.stderr,
		Tail:       s.consoleTail(),
		Drain:      func() { s.console.drain(s.opts.Grace) },
		Log:        filepath.Join(s.dir, valgrindLog),
		VgdbPrefix: s.vgdbPrefix(),
	})
	// The console keeps its ends of the terminals open until teardown:
	// valgrind's stderr may reach them through snapctl (startValgrind
	// keeps the tail of what valgrind says), so they must outlive
	// valgrind.
	if err != nil {
		return err
	}
	s.vg = vg
	s.groups.Add(vg.proc)
	if !s.adoptEarlyGDB() {
		if err := s.startGDB(ctx, []string{s.binary}, s.childEnv()); err != nil {
			return err
		}
	}
	if err := vg.waitReady(ctx, s.opts.ReadyTimeout); err != nil {
		// valgrind's gdbserver needs room in the private directory for
		// its shared memory file: without it valgrind exits.
		return s.diskFull(err)
	}
	if err := s.connectVgdb(ctx); err != nil {
		return s.explain(ctx, err)
	}
	return nil
}

// start resumes the target, which valgrind holds at its first
// instruction until gdb says so.
func (massifLaunch) start(ctx context.Context, s *session) error {
	// The stop that connecting produced is not a breakpoint's.
	s.gdb.Drain()
	if _, err := s.gdb.Send(ctx, "-exec-continue"); err != nil {
		return fmt.Errorf("starting the target: %w", err)
	}
	return nil
}

// connectVgdb attaches gdb to valgrind's gdbserver through vgdb.
func (s *session) connectVgdb(ctx context.Context) error {
	// gdb runs the pipe command with $SHELL -c, or /bin/sh when SHELL is
	// unset. bash execs a lone command, but Debian's /bin/sh (dash) forks
	// it and waits: vgdb would be gdb's grandchild, behind a shell that
	// neither a signal to gdb's child nor the stall watch reaches
	// (docs/design.md, fact 30). exec makes vgdb gdb's child in every
	// shell.
	pipe := fmt.Sprintf("| exec %s --vgdb-prefix=%s --pid=%d", s.tools.vgdb, s.vgdbPrefix(), s.vg.Pid())
	// gdb gives up on a reply that takes longer than remotetimeout (2s by
	// default) and goes on reading the late one as the next packet's
	// answer: on a loaded machine valgrind's gdbserver can take that long,
	// and gdb then fails to connect or, mid-run, loses track of the
	// target for good (docs/design.md, fact 28). snapctl's own deadlines
	// bound every exchange instead, so gdb waits longer than any of them.
	if _, err := s.gdb.Send(ctx, "-gdb-set", "remotetimeout", remoteTimeout(s.opts.CommandTimeout, s.stopTimeout())); err != nil {
		return fmt.Errorf("setting up gdb: %w", err)
	}
	// -target-select passes its arguments to the CLI unparsed: the pipe
	// command must not be quoted.
	if _, err := s.gdb.Send(ctx, "-target-select", "remote", pipe); err != nil {
		if s.gdbDied(err) {
			return s.gdbGone()
		}
		if verr := s.valgrindKilled(); verr != nil {
			return verr
		}
		// valgrind's gdbserver needs room in the private directory
		// for the FIFOs' shared memory.
		return s.diskFull(&ToolError{Tool: "vgdb", Msg: "gdb cannot connect to valgrind", Err: err, Tail: logTail(filepath.Join(s.dir, valgrindLog), 8)})
	}
	return nil
}

// valgrindArgs is valgrind's command line after the executable.
func (s *session) valgrindArgs() []string {
	args := []string{
		"--tool=massif",
		"--vgdb=yes",
		"--vgdb-error=0",
		"--vgdb-prefix=" + s.vgdbPrefix(),
		// massif's own periodic profile, the heap over time that ms_print
		// and massif-visualizer show.
		"--massif-out-file=" + valgrindPath(filepath.Join(s.dir, massifOut)),
		"--log-file=" + valgrindPath(filepath.Join(s.dir, valgrindLog)),
	}
	// Without chasing, a block never crosses a call, so the pc that
	// valgrind's gdbserver reports with a signal lies in the function
	// that faulted: crash stacks start where the program died. A plan may
	// turn chasing back on in valgrind.args, which come later.
	args = append(args, "--vex-guest-chase=no")
	// Valgrind's gdbserver reports the guest registers as its JIT last
	// stored them, and by default it keeps only the stack pointer exact
	// in the program's own code: at a breakpoint in a leaf function the
	// frame pointer can still hold the caller's value. gdb then unwinds
	// one frame too far: the caller vanishes from the backtrace and
	// around_call's finish waits at the caller's caller. Keeping the
	// unwinding registers exact costs a few per cent of run time.
	args = append(args, "--px-file-backed=unwindregs-at-mem-access")
	// No --xtree-memory: `monitor xtmemory` builds its tree from the live
	// blocks whenever it is asked, and with allocs valgrind would only
	// write the whole run's tree once more at exit (docs/design.md, fact
	// 33).
	args = append(args, massifPlanArgs(s.plan)...)
	return append(args, s.argv...)
}

// valgrindPath escapes a path for the valgrind options that expand %p,
// %q{VAR} and %% in file names (--log-file, --massif-out-file): a run
// directory named "run 100% done" must reach valgrind as it is.
func valgrindPath(path string) string {
	return strings.ReplaceAll(path, "%", "%%")
}

// vgdbPrefix is valgrind's and vgdb's --vgdb-prefix: in the private
// directory, where the FIFOs vgdb and valgrind talk through are made.
func (s *session) vgdbPrefix() string { return filepath.Join(s.priv, "vgdb") }
