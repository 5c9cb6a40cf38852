// Package driver runs one snapctl run from its checks to its run
// directory: the backend's target under gdb, the stop loop, the teardown
// of every child and run.json with its reports.
package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/console"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/preflight"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Options configure one session. cmd/snapctl fills them from its flags.
type Options struct {
	PlanPath string   // plan.yaml
	Binary   string   // the program to profile
	Args     []string // the program's arguments; nil keeps the plan's target.args
	OutDir   string   // run directory; "" for DefaultRunDir
	Force    bool     // write into an existing, non-empty OutDir
	Trace    bool     // keep the MI transcript as gdb-mi.log
	// KeepSnapshots, when set ("all" or "changed"), overrides the plan's
	// keep_snapshots for every breakpoint.
	KeepSnapshots string
	Tools
	Streams
	Timeouts

	// Kill, when closed, ends every child at once with SIGKILL: snapctl
	// closes it on a second Ctrl-C, when the user will not wait for the
	// orderly teardown. The run directory is still written.
	Kill <-chan struct{}

	// Env is added to the environment of every process the session
	// starts: gdb (and the vgdb it runs), valgrind and the target, before
	// the plan's target.env. Tests mark their processes with it.
	Env []string

	Measure
	Attach

	// NoAgent drives every stop over MI, as when gdb has no Python,
	// instead of letting gdb's agent take the plain ones (see agent.go).
	NoAgent bool
}

// Measure overrides how the plan measures.
type Measure struct {
	// Backend, when set (one of BackendNames), overrides the plan's
	// backend.
	Backend string
	// Sites turns on the native backend's per-site recording (the
	// plan's native.sites), --sites.
	Sites bool
}

// Attach is what snapctl attach sets.
type Attach struct {
	// AttachPID, when set, attaches gdb to that running process instead
	// of starting Binary (native backend only). The process goes on
	// running when the run ends.
	AttachPID int
	// Guard has gdbserver trace the process attached to, so that it
	// survives gdb being killed (--guard).
	Guard bool
}

// Tools are the executables a run uses; "" looks each up on PATH.
type Tools struct {
	Valgrind string // valgrind executable
	GDB      string // gdb executable
	// Heaptrack is the directory of heaptrack's libraries and
	// interpreter (native.sites); "" looks where distributions put them.
	Heaptrack string
}

// Streams are where a run writes.
type Streams struct {
	// Stdout and Stderr receive the target's output (nil discards it).
	Stdout, Stderr io.Writer
	// Status receives the one-line progress display, rewritten with \r;
	// nil for none. The caller decides whether it is a terminal. With a
	// status line, Stdout and Stderr that are terminals get the target's
	// output through a pseudo-terminal (see driver/console).
	Status io.Writer
	// Warn receives warnings such as a binary without debug info; nil
	// discards them.
	Warn io.Writer
}

// Timeouts bound a run and its parts.
type Timeouts struct {
	// Timeout ends the run (--timeout); 0 for none.
	Timeout time.Duration
	// ReadyTimeout bounds valgrind's start until its gdbserver is ready
	// (default 60s); CommandTimeout bounds every MI command (default 30s).
	ReadyTimeout, CommandTimeout time.Duration
	// Grace is how long a child is given to exit before it is signalled
	// (default 2s).
	Grace time.Duration
	// ManifestEvery is how often, at most, run.json is rewritten while
	// stops come in (default 10s), for a snapctl killed before the end.
	ManifestEvery time.Duration
}

// childEnv is the environment of the processes a session starts.
func (o *Options) childEnv() []string {
	return append(os.Environ(), o.Env...)
}

func (o *Options) defaults() {
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if o.CommandTimeout <= 0 {
		o.CommandTimeout = 30 * time.Second
	}
	if o.Grace <= 0 {
		o.Grace = 2 * time.Second
	}
	if o.ManifestEvery <= 0 {
		o.ManifestEvery = 10 * time.Second
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Warn == nil {
		o.Warn = io.Discard
	}
}

// heaptrackMissing is heaptrack.FindTools's error as the checks say a
// missing tool: what is missing and the Debian package that installs it.
func heaptrackMissing(err error) error {
	var me *heaptrack.MissingError
	if !errors.As(err, &me) {
		return err
	}
	return &preflight.MissingToolError{Tool: "heaptrack", Package: me.Package, Path: me.Path,
		Reason: "is not installed (" + me.Path + " is missing), and native.sites records with it", Err: err}
}

// Result is what a session leaves: the run directory and its manifest.
type Result struct {
	Dir string // absolute path of the run directory
	// Manifest is run.json as written, but for its stops and diffs, which
	// only run.json holds (see Manifest).
	Manifest *runjson.Manifest
	Plan     *plan.Plan
	// Report is the analysis as the renderers take it: every suspect, and
	// of the diffs only the largest heap changes of each breakpoint and
	// kind.
	Report *snapshots.Report
	// Stops and Diffs count the stops and diffs in run.json.
	Stops, Diffs int
}

// Run runs one profiling session as the plan says and writes the run
// directory. Errors found before anything started (plan, tools, binary,
// breakpoint locations, output directory) return a nil Result. Once the run
// directory exists, Run always writes run.json and returns the Result, with
// an error when the run did not complete or a gate failed: ErrInterrupted,
// ErrTimeout, *CrashError, *ToolError, *NeverHitError, *LeakError.
func Run(ctx context.Context, opts Options) (*Result, error) {
	opts.defaults()
	p, err := loadPlan(ctx, opts.PlanPath)
	if err != nil {
		return nil, err
	}
	if err := checkCwd(p.Target); err != nil {
		return nil, err
	}
	if opts.Backend != "" {
		p.Backend = opts.Backend
	}
	if opts.Sites {
		p.Native.Sites = true
	}
	i, err := newBackend(p.Backend)
	if err != nil {
		return nil, err
	}
	traits := backends[i].traits
	if p.Native.Sites && !traits.SitesOption {
		sites := BackendWith(func(t backend.Traits) bool { return t.SitesOption })
		pos := p.Native.SitesPos
		if pos.Line == 0 {
			// Sites came from the command line, not the plan.
			return nil, fmt.Errorf("--sites is the %s backend's per-site recording: %s records sites already; drop --sites or use --backend %s", sites, backends[i].name, sites)
		}
		return nil, &plan.Error{File: pos.File, Line: pos.Line, Column: pos.Column, Key: "native.sites",
			Msg: fmt.Sprintf("true needs the %s backend, and --backend %s was given, which records call sites already: drop one of them", sites, backends[i].name)}
	}
	if p.Report.FailOn.LostPerHit > 0 && !traits.Lost {
		pos := p.Report.FailOn.LostPerHitPos
		return nil, &plan.Error{File: pos.File, Line: pos.Line, Column: pos.Column, Key: "report.fail_on.lost_per_hit",
			Msg: fmt.Sprintf("needs a backend that tells lost blocks from reachable ones (%s), and the run uses %s",
				BackendWith(func(t backend.Traits) bool { return t.Lost }), backends[i].name)}
	}
	p.Backend = backends[i].name // the session's from here on
	if opts.AttachPID != 0 {
		if !traits.Attaches {
			return nil, fmt.Errorf("attaching to a process needs the %s backend", BackendWith(func(t backend.Traits) bool { return t.Attaches }))
		}
		if err := checkAttach(opts.AttachPID); err != nil {
			return nil, err
		}
		exe, err := checkAccess(opts.AttachPID)
		if err != nil {
			return nil, err
		}
		opts.Binary = exe
		if p.Native.Sites {
			if err := checkInjectable(opts.AttachPID); err != nil {
				return nil, err
			}
		}
	}
	if p.Native.Sites {
		if _, err := heaptrack.FindTools(opts.Heaptrack); err != nil {
			return nil, heaptrackMissing(err)
		}
	}
	binary, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, err
	}
	// valgrind's tools and --sites preload a library into the program: a
	// static one would measure nothing (a heap of 0 B, no call site).
	if (traits.Preloads || p.Native.Sites) && preflight.Static(binary) {
		return nil, preflight.StaticError(binary, p.Native.Sites)
	}
	if p.Native.Sites {
		if err := preflight.NewlineError(binary); err != nil {
			return nil, err
		}
	}
	// The checks take a second or more before valgrind starts: the
	// status line says so from the start.
	var status *console.Status
	if opts.Status != nil {
		status = console.NewStatus(opts.Status, time.Now(), breakpointNames(p), traits.Unit)
		status.SetPhase("checking the tools and the plan")
		defer status.Clear()
	}
	// gdb checks the breakpoint locations while the tools and the binary
	// are checked: both take about as long as gdb takes to start. The
	// tools' errors come first.
	//
	// The session's own gdb starts at once (gdb.Early), with the private
	// directory, and checks the locations and its version itself; only
	// what it cannot vouch for goes to the checking gdb. Attaching, it
	// starts on no program, and --trace records it from its start: both
	// keep the usual order.
	located := make(chan locatedResult, 1)
	var early *gdb.Early
	var priv privateDir
	gdbPath, err := preflight.FindTool("gdb", opts.GDB)
	if err == nil && opts.AttachPID == 0 && !opts.Trace {
		if early, priv = startEarlyGDB(ctx, gdbPath, binary, p, &opts); early != nil {
			// Unless the session takes them over: the checks failed.
			defer func() {
				if !priv.handed {
					early.CloseUnused()
					priv.remove()
				}
			}()
		}
	}
	validate := func() {
		located <- checkLocations(ctx, gdbPath, binary, opts.AttachPID, p, opts.childEnv(), opts.CommandTimeout)
	}
	switch {
	case err != nil:
		located <- locatedResult{err: err}
	case early != nil:
		go func() {
			if err := early.NoStart(); err != nil {
				located <- locatedResult{err: &ToolError{Tool: "gdb", Msg: "cannot start", Err: err}}
				return
			}
			if early.LocationsResolved() {
				// Every location but the pending ones, in the
				// program alone.
				located <- locatedResult{inProgram: slices.ContainsFunc(p.Breakpoints, func(bp plan.Breakpoint) bool { return !bp.Pending })}
				return
			}
			validate()
		}()
	default:
		go validate()
	}
	env, err := preflight.Check(ctx, preflight.Options{Gdb: opts.GDB, Valgrind: opts.Valgrind, Binary: opts.Binary, NoValgrind: len(backends[i].tools) == 0, GdbVersion: early.Version, Env: opts.childEnv()})
	if err != nil {
		<-located
		// A tool that failed because the user stopped snapctl is not
		// a broken tool.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("checking the tools: %w", ErrInterrupted)
		}
		return nil, err
	}
	tools := backend.Tools{"gdb": env.Gdb}
	for _, t := range backends[i].tools {
		tools[t] = env.Tool(t)
	}
	loc := <-located
	var startErr *mi.StartTimeoutError
	noStart := errors.As(loc.err, &startErr)
	if err := loc.err; err != nil && !noStart {
		if ctx.Err() != nil && !errors.Is(err, ErrInterrupted) {
			return nil, fmt.Errorf("checking breakpoint locations: %w", ErrInterrupted)
		}
		return nil, err
	}
	warnings := programWarnings(env.Warnings, loc.inProgram)
	if status != nil && len(warnings) > 0 {
		status.Clear()
	}
	for _, w := range warnings {
		fmt.Fprintf(opts.Warn, "warning: %s\n", w)
	}

	outDir := opts.OutDir
	if outDir == "" {
		outDir = DefaultRunDir(binary, time.Now())
	}
	dir, err := prepareRunDir(outDir, opts.Force)
	if err != nil {
		return nil, err
	}
	s := newSession(opts, p, tools, binary, dir)
	s.located = loc.resolved
	if early != nil {
		s.priv = priv
		priv.handed = true
	}
	if status != nil {
		s.term.status = status // the one on screen since the checks
	}
	if noStart {
		// gdb did not start on this machine: the run directory says so.
		return s.failed(loc.err)
	}
	return s.run(ctx)
}

// failed ends a run that could not start, with err: run.json and the
// reports say why.
func (s *session) failed(err error) (*Result, error) {
	res := &Result{Dir: s.out.dir, Manifest: s.m, Plan: s.plan}
	if perr := s.prepare(); perr != nil {
		err = perr
	}
	res, err = s.finish(res, err)
	s.cleanup()
	return res, err
}

// loadPlan reads the plan as plan.Load does, but gives up when ctx
// ends: a plan given as a FIFO or a pipe may never reach its end, and
// Ctrl-C must still end snapctl. The abandoned read ends with the process.
func loadPlan(ctx context.Context, path string) (*plan.Plan, error) {
	type loaded struct {
		plan *plan.Plan
		err  error
	}
	done := make(chan loaded, 1)
	go func() {
		p, err := plan.Load(path)
		done <- loaded{p, err}
	}()
	select {
	case l := <-done:
		return l.plan, l.err
	case <-ctx.Done():
		return nil, fmt.Errorf("reading the plan %s: %w", path, ErrInterrupted)
	}
}

// checkCwd checks the plan's target.cwd before anything starts: a missing
// directory would otherwise surface as valgrind failing to start.
func checkCwd(t plan.Target) error {
	if t.Cwd == "" {
		return nil
	}
	fi, err := os.Stat(t.Cwd)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return t.CwdError("directory %q does not exist", t.Cwd)
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return t.CwdError("directory %q: %v", t.Cwd, err)
	case !fi.IsDir():
		return t.CwdError("%q is not a directory", t.Cwd)
	}
	return nil
}

// session is the state of one run.
type session struct {
	opts Options
	plan *plan.Plan
	prog program
	out  runOut
	priv privateDir
	// located says that the checking gdb (not the early one) found every
	// location but the pending ones in the program alone.
	located bool
	m       *runjson.Manifest
	// backend measures the stops, analyses and reports them; launcher
	// starts the target as the backend needs.
	backend  backend.Backend
	launcher backend.Launcher
	term     terminal
	gdb      *gdb.Conn
	// end is how snapctl ends the target on its own account.
	end *ending
	// rec is the run's record of its stops and events.
	rec *recorder
	// agent reads the records of gdb's agent; nil when it does not run.
	agent *agent
	// kids are the processes the run starts; watch finds stalls that
	// nothing reports (see watch.check).
	kids  children
	watch *watch
}

// program is what the session runs: the program, its arguments (argv[0]
// the binary) and working directory, and the tools that run it.
type program struct {
	binary string
	argv   []string
	cwd    string
	tools  backend.Tools
}

// terminal is where the target's output goes: stdout and stderr (see
// targetOutput), through the console to the status line's terminal when
// there is a status line (nil otherwise).
type terminal struct {
	stdout, stderr io.Writer
	status         *console.Status
	console        *console.Console
}

// clearStatus erases the status line, if there is one, before a line of
// snapctl's own.
func (t *terminal) clearStatus() {
	if t.status != nil {
		t.status.Clear()
	}
}

// tail is what the console keeps of the target's shared terminal, nil
// when there is none.
func (t *terminal) tail() *console.Tail {
	if t.console == nil {
		return nil
	}
	return t.console.Tail()
}

// runOut is the run directory (absolute) and run.json's writing during
// the run (refreshManifest): when it was last written, with how many
// stops, and the writing under way in the background, nil when none is.
type runOut struct {
	dir     string
	at      time.Time
	stops   int
	running *refresh
}

func newSession(opts Options, p *plan.Plan, t backend.Tools, binary, dir string) *session {
	argv := append([]string{binary}, p.Target.Args...)
	if opts.Args != nil {
		argv = append([]string{binary}, opts.Args...)
	}
	s := &session{
		opts: opts, plan: p, out: runOut{dir: dir},
		prog: program{binary: binary, argv: argv, cwd: p.Target.Cwd, tools: t},
		kids: children{env: opts.childEnv(), grace: opts.Grace},
	}
	i, _ := newBackend(p.Backend) // Run checked the name and applied --backend
	s.m = &runjson.Manifest{
		Backend:   backends[i].name,
		Schema:    runjson.Schema,
		Status:    runjson.StatusFailed,
		StartedAt: time.Now().UTC(),
		Plan:      planFile,
		Target:    runjson.Target{Argv: argv, Cwd: p.Target.Cwd},
	}
	// The recorder first: it applies --keep-snapshots to the plan's
	// breakpoints, which the backend reads, and it holds the spools the
	// backend writes to.
	s.rec = newRecorder(p, s.m, opts.KeepSnapshots, dir)
	s.backend = backends[i].new(backend.Config{Plan: p, Binary: binary, Dir: dir, AttachPID: opts.AttachPID,
		Diffs: s.rec.diffs.add, Event: s.rec.event, Warn: opts.Warn})
	s.launcher = backends[i].launch(s)
	backend.Settings(s.backend, s.m)
	if opts.AttachPID != 0 {
		s.m.Target.Argv = []string{binary}
	}
	s.rec.stage = s.backend.Stage
	s.rec.read = func(t *stopRecord) error { return s.backend.Read(&t.Stop) }
	s.rec.onStop = func(st *runjson.Stop) {
		if s.term.status != nil {
			s.term.status.Update(st.Breakpoint, st.Phase, st.HeapBytes)
		}
	}
	s.rec.onEvent = func(ev runjson.Event) {
		switch ev.Kind {
		case runjson.EventStopAbandoned, runjson.EventAroundCallCutShort, runjson.EventAroundCallFailed:
			// Not prefixed "snapctl:": that line is kept for the one
			// message that says how the run ended.
			s.term.clearStatus()
			fmt.Fprintf(s.opts.Warn, "warning: %s\n", ev.Message)
		}
	}
	s.watch = &watch{launcher: s.launcher, rec: s.rec, limit: stopTimeout(p), grace: opts.Grace}
	s.end = &ending{plan: p, opts: &s.opts, pid: s.launcher.Pid, target: &s.m.Target, event: s.rec.event}
	s.rec.endRun = s.end.end
	s.watch.end = s.end
	return s
}

// run is the run from its run directory on, in the order a run has: its
// private directory and the run directory's first files; the children
// and the stop loop; the teardown; run.json and the reports, which say how
// the run ended; and last what only the run needed goes. Every step runs
// whatever the ones before it did, so that run.json always says how the
// run ended and nothing is left behind.
func (s *session) run(ctx context.Context) (*Result, error) {
	res := &Result{Dir: s.out.dir, Manifest: s.m, Plan: s.plan}
	end := outcome{err: s.prepare()}
	if end.err == nil {
		end = s.runTarget(ctx)
	}
	res, err := s.finish(res, end.err)
	if end.reap != nil {
		end.reap()
	}
	s.cleanup()
	return res, err
}

// outcome is how the run's target and children ended: what the run
// failed of (nil when it completed), and reap, which waits for a gdb
// that teardown only killed.
type outcome struct {
	err  error
	reap func()
}

// prepare makes the private directory (the one that came with the gdb
// started during the checks, when there is one) and the run directory's
// first files: the plan's copy, and a run.json that says the run did not
// complete, for a snapctl killed before it ends. The loop rewrites it as
// stops come (refreshManifest), so that it also lists them.
func (s *session) prepare() error {
	if s.priv.dir == "" {
		priv, release, err := newPrivateDir()
		if err != nil {
			return err
		}
		s.priv.dir, s.priv.release = priv, release
	}
	s.kids.mark = runMark(s.priv.dir)
	if err := os.WriteFile(filepath.Join(s.out.dir, planFile), s.plan.Source, 0o644); err != nil {
		return fmt.Errorf("copying the plan: %w", err)
	}
	s.m.Error = unfinished
	if err := writeManifest(s.out.dir, s.m, manifestSpools{}); err != nil {
		return err
	}
	s.out.at = time.Now()
	return nil
}

// runTarget starts the children and runs the stop loop until the target
// ends, ctx ends, --timeout passes or something fails; then it tears the
// children down. A second Ctrl-C (Options.Kill) kills them at once.
func (s *session) runTarget(ctx context.Context) outcome {
	runCtx, cancel := context.WithCancelCause(ctx)
	if s.opts.Timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, s.opts.Timeout, ErrTimeout)
		defer stop()
	}
	defer cancel(nil)
	stopKiller := s.kids.killOn(s.opts.Kill)
	err := s.startAndLoop(runCtx)
	reap := s.teardown(targetEnded(s.m))
	stopKiller()
	err = s.attachFate(err)
	return outcome{err: s.classify(ctx, runCtx, err), reap: reap}
}

// cleanup removes what only the run needed, once run.json and the reports
// are written: the agent's records, copied into the run directory first
// with --trace; the early gdb if the run never used it; the private
// directory; the spools the run.json lists came from.
func (s *session) cleanup() {
	if s.agent != nil {
		trace := ""
		if s.opts.Trace {
			trace = filepath.Join(s.out.dir, agentTrace)
		}
		s.agent.close(trace, s.opts.Warn)
	}
	if s.priv.early != nil {
		s.priv.early.CloseUnused()
	}
	if s.priv.dir != "" {
		os.RemoveAll(s.priv.dir)
	}
	if s.priv.release != nil {
		s.priv.release()
	}
	s.rec.closeSpools()
}

// classify turns a context ending into ErrInterrupted or ErrTimeout.
func (s *session) classify(parent, runCtx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(context.Cause(runCtx), ErrTimeout) && (errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || runCtx.Err() != nil) {
		return fmt.Errorf("run stopped after %v: %w", s.opts.Timeout, ErrTimeout)
	}
	if parent.Err() != nil {
		return fmt.Errorf("run stopped: %w", ErrInterrupted)
	}
	return err
}

// startAndLoop starts the target and gdb as the backend says, inserts the
// breakpoints and runs the stop loop until the target exits, the context
// ends or something fails.
func (s *session) startAndLoop(ctx context.Context) error {
	stdout, stderr := s.targetOutput()
	s.term.stdout, s.term.stderr = stdout, stderr
	err := s.launcher.Launch(ctx, s.launchEnv(stdout, stderr))
	if c := s.launcher.Command(); c != nil {
		s.m.Valgrind = c
	}
	var killed *backend.TargetKilledError
	if errors.As(err, &killed) {
		// A process attached to that died as snapctl set the run up
		// (a call that faulted, a signal of its own): a crash.
		return killedCrash(killed)
	}
	if err != nil {
		return err
	}
	if err := s.setup(ctx); err != nil {
		// vgdb or valgrind may die between the connection and the
		// start: say which, not only what gdb answered.
		return s.watch.explain(ctx, err)
	}
	sz, err := s.seize(ctx)
	if err != nil {
		return s.watch.explain(ctx, err)
	}
	if sz == nil {
		if err := s.launcher.Start(ctx); err != nil {
			var killed *backend.TargetKilledError
			if errors.As(err, &killed) {
				return killedCrash(killed)
			}
			return s.watch.explain(ctx, err)
		}
	}
	if s.term.status != nil {
		s.term.status.SetPhase("")
	}
	if len(s.plan.Workload) > 0 {
		start := func() {
			if err := s.end.startWorkload(s.prog.cwd, s.kids.childEnv(), &s.kids.group, stdout, stderr); err != nil {
				// The target still ends cleanly, its snapshots kept.
				s.end.err = err
				s.end.end("the workload could not start")
			}
		}
		if s.opts.AttachPID == 0 && wantsPorts(s.plan.Workload) {
			s.end.startWhenListening(start)
		} else {
			start()
		}
	}
	if sz != nil {
		err = s.seizedLoop(ctx, sz)
		s.kernelHits()
		return err
	}
	err = s.newStopLoop().loop(ctx)
	s.finalHits(ctx)
	return err
}

// unfinished is run.json's error until the run ends: what a reader of a
// snapctl killed outright finds.
const unfinished = "the run had not ended when run.json was last written: snapctl was killed, or is still running"

// breakpointNames are the plan's breakpoints' names, in plan order.
func breakpointNames(p *plan.Plan) []string {
	names := make([]string, 0, len(p.Breakpoints))
	for _, bp := range p.Breakpoints {
		names = append(names, bp.Name)
	}
	return names
}

// privateDir is the run's private directory (absolute, no spaces), with
// release, which unlocks it (lockPrivateDir), and the gdb started with it
// during Run's checks, nil when none was; handed is set once the session
// owns them.
type privateDir struct {
	dir     string
	release func()
	early   *gdb.Early
	handed  bool
}

// remove unlocks and removes the directory.
func (p *privateDir) remove() {
	p.release()
	os.RemoveAll(p.dir)
}

// startEarlyGDB starts the session's gdb on binary while Run checks the
// tools and the plan, with the environment and working directory the
// session would give it, in a private directory of its own. It returns
// nil when the private directory cannot be made: the session then makes
// its own and says why.
func startEarlyGDB(ctx context.Context, gdbPath, binary string, p *plan.Plan, opts *Options) (*gdb.Early, privateDir) {
	dir, release, err := newPrivateDir()
	if err != nil {
		return nil, privateDir{}
	}
	cfg := gdb.EarlyConfig{Path: gdbPath, Args: []string{binary}, Cwd: p.Target.Cwd, Env: append(opts.childEnv(), runMark(dir)),
		Dir: dir, Timeout: opts.CommandTimeout, Breakpoints: p.Breakpoints}
	if t, _ := BackendTraits(p.Backend); t.GDBStarts {
		// This gdb starts the target; under valgrind's tools valgrind
		// does.
		cfg.Env = append(cfg.Env, p.Target.Env...)
		cfg.Args = append(slices.Clip(unmarkProgram), binary)
		cfg.StartsProgram = true
	} else {
		// gdb connects to valgrind, which dies with snapctl: so does
		// gdb, whatever it waits for.
		cfg.DieWithParent = true
	}
	e := gdb.StartEarly(ctx, cfg)
	return e, privateDir{dir: dir, release: release, early: e}
}

// targetOutput returns the writers for the target's stdout and stderr. With
// a status line, it shows what starts (startPhase) and opens the console; if no
// pseudo-terminal can be had, the run goes on without a status line rather
// than with one that runs into the program's output. Without a status
// line, a target whose stdout and stderr are one terminal still gets a
// pseudo-terminal of its own, shared by both: valgrind's stderr would
// otherwise reach the terminal through a pipe of snapctl's, out of order
// with the program's stdout.
func (s *session) targetOutput() (stdout, stderr io.Writer) {
	shared := term.Same(s.opts.Stdout, s.opts.Stderr)
	if s.term.status == nil && !shared {
		return s.opts.Stdout, s.opts.Stderr
	}
	con, stdout, stderr, err := console.Open(s.term.status, s.opts.Stdout, s.opts.Stderr)
	if err != nil {
		if s.term.status != nil {
			s.term.status.Clear()
			s.term.status = nil
		}
		return s.opts.Stdout, s.opts.Stderr
	}
	s.term.console = con
	if s.term.status != nil {
		s.term.status.SetPhase(startPhase(s.opts.AttachPID, s.backend.Tool()))
	}
	return stdout, stderr
}

// startPhase is what the status line says while the target starts: the
// attach, or the backend's tool starting (valgrind under massif, gdb
// natively).
func startPhase(attach int, tool string) string {
	if attach != 0 {
		return fmt.Sprintf("attaching to process %d", attach)
	}
	return "starting " + tool
}
