package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/snapshots"
)

// runOptions are the flags and arguments of `snapctl run`.
type runOptions struct {
	Out      string
	Force    bool
	Format   string
	Quiet    bool
	Trace    bool
	Timeout  time.Duration
	Valgrind string
	GDB      string
	// Heaptrack is heaptrack's library directory (--heaptrack).
	Heaptrack string
	// KeepSnapshots overrides the plan's keep_snapshots: "all" or
	// "changed"; "" keeps the plan's.
	KeepSnapshots string
	// Backend overrides the plan's backend: one of driver.BackendNames.
	Backend string
	// Sites records per-site heap data natively (--sites, the plan's
	// native.sites).
	Sites bool
	// Pid is the process snapctl attach attaches to.
	Pid int
	// Guard has gdbserver trace the process snapctl attach attaches to
	// (attach --guard).
	Guard bool

	Plan   string
	Binary string
	Args   []string
}

func newRunCmd() *cobra.Command { return newRunCmdWith(runRun) }

// newRunCmdWith builds the command with the function that runs it, so the
// flag parsing can be tested on its own.
func newRunCmdWith(run func(*cobra.Command, *runOptions) error) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run [flags] PLAN BINARY [ARGS...]",
		Short: "Run a program, measure its heap at the plan's breakpoints and report growth",
		Long: `run starts BINARY with ARGS under gdb, stops at every breakpoint of PLAN,
measures the heap at each stop, and reports what grew between stops. With
the massif backend (the default) the program runs under valgrind's massif
and each stop takes a heap snapshot per allocation call site; with the
native backend (--backend native) it runs at native speed and each stop
records resident memory and the allocator's state (glibc's or jemalloc's), and --sites adds a
per-site snapshot recorded with heaptrack.

Flags come before PLAN (or before BINARY); everything after BINARY is passed
to the program unchanged, so program flags such as -v need no quoting. "--"
also ends snapctl's flags.

The run directory (--out, default ./snapctl-runs/TIME-BINARY) receives
plan.yaml, run.json, report.md, report.html and snapshots/ (the per-site
snapshots, with massif or --sites); with massif also valgrind.log and
massif.out.`,
		Example: `  snapctl run plan.yaml ./server --requests 200
  snapctl run --out /tmp/leak --format markdown plan.yaml ./server`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.parseArgs(cmd, args); err != nil {
				return err
			}
			return run(cmd, opts)
		},
	}
	// Stop at the first positional argument so the target's own flags
	// pass through untouched.
	cmd.Flags().SetInterspersed(false)
	f := cmd.Flags()
	f.StringVarP(&opts.Out, "out", "o", "", "run directory (default: a new folder under ./snapctl-runs/)")
	f.BoolVar(&opts.Force, "force", false, "write into an existing, non-empty run directory")
	formatFlag(cmd, &opts.Format, "report printed on stdout (json: run.json)", "text", "markdown", "json")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "no status line on stderr")
	f.BoolVar(&opts.Trace, "trace", false, "keep the GDB/MI transcript as gdb-mi.log in the run directory")
	f.DurationVar(&opts.Timeout, "timeout", 0, "stop the whole run after this long (e.g. 10m); 0 for none")
	f.StringVar(&opts.Valgrind, "valgrind", "", "valgrind executable (default: valgrind on PATH)")
	f.StringVar(&opts.GDB, "gdb", "", "gdb executable (default: gdb on PATH)")
	f.StringVar(&opts.Heaptrack, "heaptrack", "", "directory of heaptrack's libraries and heaptrack_interpret, for --sites (default: /usr/lib/heaptrack, where Debian's heaptrack package puts them)")
	f.StringVar(&opts.KeepSnapshots, "keep-snapshots", "", `snapshot files to keep: all, or changed (drop a snapshot whose tree equals the breakpoint's previous kept one); overrides the plan's keep_snapshots`)
	f.StringVar(&opts.Backend, "backend", "", "how memory is measured: massif (per call site, under valgrind), memcheck (per call site under valgrind's memcheck, with what is lost and what holds the rest) or native (the allocator's and the kernel's figures, at native speed); overrides the plan's backend")
	f.BoolVar(&opts.Sites, "sites", false, "native backend: also record every allocation's call site with heaptrack, for per-site diffs between stops as massif gives them, at native speed; implies --backend native")
	enumFlag(cmd, "keep-snapshots", "all", "changed")
	enumFlag(cmd, "backend", driver.BackendNames()...)
	cmd.SetUsageTemplate(cmd.UsageTemplate() + exitCodeHelp())
	return cmd
}

// parseArgs splits PLAN BINARY [ARGS...]. Flags are also accepted between
// PLAN and BINARY.
func (o *runOptions) parseArgs(cmd *cobra.Command, args []string) error {
	if len(args) >= 2 && len(args[1]) > 1 && args[1][0] == '-' && cmd.Flags().ArgsLenAtDash() != 1 {
		rest := args[1:]
		if err := cmd.Flags().Parse(rest); err != nil {
			return usageError{err}
		}
		args = append([]string{args[0]}, cmd.Flags().Args()...)
	}
	if len(args) < 2 {
		if cmd.Name() == "attach" {
			return usageError{fmt.Errorf("attach needs a PLAN and a PID: snapctl attach PLAN PID (got %q)", args)}
		}
		return usageError{errors.New("run needs a PLAN and a BINARY: snapctl run PLAN BINARY [ARGS...]")}
	}
	switch o.KeepSnapshots {
	case "", "all", "changed":
	default:
		return usageError{fmt.Errorf("--keep-snapshots %q: want all or changed", o.KeepSnapshots)}
	}
	if err := o.check(); err != nil {
		return err
	}
	o.Plan, o.Binary, o.Args = args[0], args[1], args[2:]
	return nil
}

// check checks the flags shared by run and attach.
func (o *runOptions) check() error {
	traits, ok := driver.BackendTraits(o.Backend)
	if !ok {
		return usageError{fmt.Errorf("--backend %q: want %s", o.Backend, orList(driver.BackendNames()))}
	}
	if o.Sites {
		// --sites is a backend's per-site recording on request: it
		// implies the backend that has it.
		sites := driver.BackendWith(func(t backend.Traits) bool { return t.SitesOption })
		if o.Backend != "" && !traits.SitesOption {
			return usageError{fmt.Errorf("--sites is the %s backend's per-site recording: %s records sites already; drop --sites or use --backend %s", sites, o.Backend, sites)}
		}
		if o.Backend == "" {
			o.Backend = sites
		}
	}
	if o.Timeout < 0 {
		return usageError{fmt.Errorf("--timeout %v: must not be negative", o.Timeout)}
	}
	return nil
}

func runRun(cmd *cobra.Command, o *runOptions) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	dopts := driver.Options{
		PlanPath: o.Plan,
		Binary:   o.Binary,
		OutDir:   o.Out,
		Force:    o.Force,
		Trace:    o.Trace,
		Tools:    driver.Tools{Valgrind: o.Valgrind, GDB: o.GDB, Heaptrack: o.Heaptrack},
		Streams:  driver.Streams{Stdout: stdout, Stderr: stderr, Warn: snapshots.PrintableWriter(stderr)},
		Timeouts: driver.Timeouts{Timeout: o.Timeout},
	}
	if len(o.Args) > 0 {
		dopts.Args = o.Args
	}
	dopts.KeepSnapshots = o.KeepSnapshots
	dopts.Backend, dopts.Sites, dopts.AttachPID, dopts.Guard = o.Backend, o.Sites, o.Pid, o.Guard
	if o.Format != "text" {
		// stdout carries run.json or report.md alone.
		dopts.Stdout = stderr
	}
	// The status line rewrites itself with "\r", which a dumb terminal
	// cannot be trusted with.
	if !o.Quiet && term.IsTerminal(stderr) && !term.Dumb() {
		dopts.Status = stderr
	}
	kill, stop := secondSignal(cmd.Context())
	defer stop()
	dopts.Kill = kill
	res, err := driver.Run(cmd.Context(), dopts)
	if res == nil {
		return err
	}
	if perr := printReport(stdout, o.Format, res); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return &runError{dir: res.Dir, err: err}
	}
	return nil
}

// printReport prints the run in the chosen format.
func printReport(w io.Writer, format string, res *driver.Result) error {
	color := colorFor(w)
	switch format {
	case "json":
		// Copied, not read whole: run.json grows with the stops.
		return copyFile(w, filepath.Join(res.Dir, "run.json"))
	case "markdown":
		return copyFile(w, filepath.Join(res.Dir, "report.md"))
	}
	// One screen for one leak: the three largest diffs per breakpoint.
	return driver.WriteText(w, res, snapshots.RenderOptions{Color: color, MaxSites: 10, MaxFrames: res.MaxFrames(), MaxDiffs: 3})
}

// copyFile writes the file at path to w.
func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// runError is a run that wrote its run directory but did not succeed; the
// message says where the (partial) report is.
type runError struct {
	dir string
	err error
}

func (e *runError) Error() string { return fmt.Sprintf("%v (run directory: %s)", e.err, e.dir) }
func (e *runError) Unwrap() error { return e.err }

// secondSignal returns a channel closed when SIGINT, SIGTERM or SIGHUP
// arrives after ctx was cancelled (main cancels it on the first one): the
// user wants everything ended at once.
//
// The signals are watched from the start, not from ctx's cancellation on:
// a second Ctrl-C pressed while main is still cancelling would otherwise
// arrive before anyone listens for it and be lost. Every signal from then on
// reaches both main and this channel, so the first one seen here is the one
// that cancels ctx, unless ctx was already cancelled when watching began.
func secondSignal(ctx context.Context) (<-chan struct{}, func()) {
	kill := make(chan struct{})
	done := make(chan struct{})
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	seen := 0
	if ctx.Err() != nil {
		seen = 1 // the first signal came before sig was registered
	}
	go func() {
		defer signal.Stop(sig)
		for {
			select {
			case <-sig:
				if seen++; seen >= 2 {
					close(kill)
					return
				}
			case <-done:
				return
			}
		}
	}()
	return kill, func() { close(done) }
}
