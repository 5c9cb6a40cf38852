package plan

import (
	"fmt"
	"time"
)

// Plan is a decoded, validated and defaulted plan.yaml. Every field but
// Breakpoints has a default; the defaults are documented on each field and
// applied by Parse.
type Plan struct {
	// File is the name the plan was read from (the path given to Load, or
	// the name given to Parse). Positions in errors and Pos fields use it.
	File string
	// Source is the plan's text exactly as read, so a run can keep the
	// plan it ran.
	Source []byte

	// Target describes how to start the profiled program. The command line
	// overrides it: arguments after BINARY replace Args.
	Target Target
	// Backend is how memory is measured (key "backend"): "massif"
	// (default: valgrind's massif, per allocation call site), "memcheck"
	// (valgrind's memcheck: the same sites, and whether their blocks are
	// lost or what holds them) or "native" (the program runs natively
	// under gdb; the kernel's and glibc's figures at each stop).
	Backend string
	// Native holds the native backend's options (key "native"): the
	// section of the backend of that name.
	Native Native
	// Valgrind holds the massif options (key "valgrind").
	Valgrind Valgrind
	// Gdb holds gdb settings (key "gdb").
	Gdb Gdb
	// SchedulerLocking is gdb's scheduler-locking mode while snapctl works
	// at a stop: "on" (default), "step", "off" or "replay" (key
	// "scheduler_locking"). Valgrind's gdbserver ignores it
	// (docs/facts.md, fact 1).
	SchedulerLocking string
	// StopTimeout bounds the actions at one stop (snapshot, commands,
	// finish for around_call); a stop that takes longer is abandoned
	// (key "stop_timeout", a Go duration such as "30s"; default 30s).
	StopTimeout time.Duration
	// KeepSnapshots says which snapshot files a run keeps (key
	// "keep_snapshots"): KeepAll (default) or KeepChanged. A breakpoint's
	// own keep_snapshots overrides it.
	KeepSnapshots string
	// Threads says how much thread state a stop records (key "threads"):
	// ThreadsNone (default: what the reports use), ThreadsCurrent or
	// ThreadsAll. A breakpoint's own threads overrides it.
	Threads string
	// Breakpoints are the places where snapctl stops and snapshots, in
	// plan order. Parse guarantees at least one and unique names.
	Breakpoints []Breakpoint
	// Report controls the analysis and the CI gate (key "report").
	Report Report
	// Workload is a command and its arguments (key "workload", a list;
	// no shell) that snapctl starts once the target runs with its
	// breakpoints in place. When it exits, snapctl ends the target and the
	// run; for a server, which has no end of its own.
	Workload []string
}

// Target is the "target" section: how the profiled program is started.
type Target struct {
	// Args are the program's arguments (key "args"); nil when the plan does
	// not set them. Arguments on the command line replace them.
	Args []string
	// Env holds extra environment variables as KEY=VALUE, in plan order
	// (key "env", a mapping). They are added to snapctl's own environment.
	Env []string
	// Cwd is the program's working directory (key "cwd"); empty means
	// snapctl's own. A relative path is taken relative to snapctl's working
	// directory, as on the command line.
	Cwd string
	// CwdPos is where the cwd's value is in the plan (see CwdError).
	CwdPos Pos
}

// CwdError returns a positioned plan error about target.cwd, for a
// directory that cannot be used.
func (t Target) CwdError(format string, args ...any) *Error {
	return &Error{File: t.CwdPos.File, Line: t.CwdPos.Line, Column: t.CwdPos.Column,
		Key: "target.cwd", Msg: fmt.Sprintf(format, args...)}
}

// Native is the "native" section: options of the native backend.
type Native struct {
	// TrimProbe calls malloc_trim(0) at each stop and records what
	// resident memory dropped by (key "trim_probe"; default false). It
	// changes the program's state.
	TrimProbe bool
	// Sites records every allocation and free with its stack through
	// heaptrack's preload library, for per-site diffs between stops as
	// massif gives them, next to the native figures (key "sites";
	// default false). A plan that sets it and names no backend runs the
	// native backend.
	Sites bool
	// SitesPos is where the sites value is in the plan, for a message
	// about --backend massif against it.
	SitesPos Pos
}

// Valgrind is the "valgrind" section: options for valgrind and massif.
type Valgrind struct {
	// Threshold is massif's --threshold in percent of the total heap
	// (key "threshold", 0 to 100; default 0 so that no call site hides in
	// massif's "below threshold" bucket).
	Threshold float64
	// PagesAsHeap profiles pages (mmap/brk) instead of malloc blocks
	// (key "pages_as_heap"; default false).
	PagesAsHeap bool
	// Stacks also profiles thread stacks (key "stacks"; default false).
	Stacks bool
	// Depth is massif's --depth, the number of frames kept per allocation
	// stack (key "depth", 1 to 200; 0, the default, keeps massif's own
	// default of 30).
	Depth int
	// AllocFns are the program's own allocator wrappers, passed as
	// --alloc-fn so the call site is their caller (key "alloc_fns").
	AllocFns []string
	// IgnoreFns are functions whose allocations massif ignores, passed as
	// --ignore-fn (key "ignore_fns").
	IgnoreFns []string
	// Blocks counts the live blocks per allocation stack at every stop
	// (key "blocks"; default true): the snapshot is then `monitor
	// xtmemory`, which writes a bytes tree and a blocks tree, so that
	// diffs give the change in blocks and suspects their blocks per hit
	// and bytes per block. False takes `monitor detailed_snapshot`, bytes
	// only, half of what valgrind writes per stop: for heaps with
	// thousands of call sites, where the snapshot's size sets a stop's
	// cost.
	Blocks bool
	// FairSched is valgrind's --fair-sched: "no", "yes" (default) or "try"
	// (key "fair_sched"). "yes" interleaves threads as a real machine
	// would, which matters for multithreaded leaks.
	FairSched string
	// Args are further valgrind options passed through verbatim after
	// snapctl's own (key "args"). Options snapctl owns (--tool, --vgdb*,
	// --massif-out-file, --log-*) and options the plan has a key for are
	// refused.
	Args []string
}

// Gdb is the "gdb" section.
type Gdb struct {
	// Init are gdb CLI commands run once after gdb has connected to the
	// target and before the breakpoints are inserted (key "init"), e.g.
	// "set print pretty on" or "source helpers.gdb". gdb itself always
	// starts with --nx, so no .gdbinit runs unless listed here.
	Init []string
}

// Report is the "report" section: how stops are analysed.
type Report struct {
	// GroupBy selects what a reported site is (key "group_by"): "site"
	// (default; the allocation call site, or the first frame of the user's
	// own code when LibraryFrames match), "function" (the call site's
	// function, all lines merged) or "stack" (the whole allocation stack).
	GroupBy string
	// Depth is the number of frames shown per stack in reports
	// (key "depth"; default 12; 0 shows whole stacks).
	Depth int
	// LibraryFrames are frame patterns matched against a frame's function,
	// file and object; matching frames are library code and are skipped
	// when choosing a site (key "library_frames"), e.g. "/usr/include/*" or
	// "std::*". In a frame pattern '*' matches any run of characters and
	// every other character matches itself, so "operator new[]*" and "???"
	// are literal; "fn:", "file:" and "obj:" restrict the match (see
	// snapshots.ParseFramePattern).
	LibraryFrames []string
	// Ignore are frame patterns, as in LibraryFrames: allocations with any
	// frame of their stack matching are left out of diffs, suspects and the
	// CI gate (key "ignore").
	Ignore []string
	// FailOn holds the CI gate's limits (key "fail_on").
	FailOn FailOn
}

// FailOn is the CI gate: limits whose excess makes snapctl exit non-zero.
// A zero field means no limit. Sizes are written as in "1KiB" (see ParseSize).
type FailOn struct {
	// GrowthPerHit fails the run when any suspect grows by more than this
	// many bytes per hit on average (key "growth_per_hit").
	GrowthPerHit int64
	// TotalGrowth fails the run when any suspect grows by more than this
	// many bytes over the whole run (key "total_growth").
	TotalGrowth int64
	// LostPerHit fails the run when any suspect's lost bytes (memcheck's
	// definitely and indirectly lost) grow by more than this many bytes
	// per hit (key "lost_per_hit"); only a backend that tells lost
	// blocks from reachable ones takes it. LostPerHitPos is where it is
	// in the plan, for that message.
	LostPerHit    int64
	LostPerHitPos Pos
}

// Breakpoint is one entry of "breakpoints".
//
// Hits are counted the way the stop loop sees them: hit 1 is the first stop
// after the Skip ignored ones (gdb's hit count minus Skip; hits whose
// Condition is false do not count). Every hit stops the target; a snapshot
// is taken on hits 1, 1+Every, 1+2*Every, ... up to MaxHits
// (ShouldSnapshot), and the breakpoint is deleted after the last of those
// (Done). A driver that sets an ignore count of NextIgnore after each
// snapshot stops only on the snapshot hits.
type Breakpoint struct {
	// Name identifies the breakpoint in file names, run.json and reports
	// (key "name"; [A-Za-z0-9_.-], at most 64 characters). When absent it
	// is derived from Location: "leak.c:15" becomes "leak.c-15".
	Name string
	// Location is a gdb location: a function ("handle_request",
	// "Scheduler::submit(int)"), file:line ("leak.c:15") or *address
	// (key "location"; required).
	Location string
	// Condition is a gdb expression; the breakpoint stops only when it is
	// true (key "condition").
	Condition string
	// Thread restricts the breakpoint to one gdb thread number (key
	// "thread"; 0, the default, means any thread).
	Thread int
	// Skip is gdb's ignore count: the first Skip hits do not stop (key
	// "skip"; default 0), e.g. to let a warm-up pass.
	Skip int
	// Every takes a snapshot on every Every-th hit after Skip (key "every";
	// default 1, every hit).
	Every int
	// MaxHits deletes the breakpoint after this many hits after Skip (key
	// "max_hits"; 0, the default, means no limit).
	MaxHits int
	// AroundCall also snapshots when the function containing the stop
	// returns (gdb's finish), so the call's own allocations are measured
	// (key "around_call"; default false).
	AroundCall bool
	// Commands are gdb CLI commands run at each snapshot stop; their output
	// is recorded (key "commands").
	Commands []string
	// Optional lets the breakpoint never hit without failing the run (key
	// "optional"; default false).
	Optional bool
	// EndRunAfter ends the run after this many snapshots of the
	// breakpoint (key "end_run_after"; 0, the default, never): snapctl
	// ends the target as after a workload.
	EndRunAfter int
	// Pending lets the location resolve only once a library loaded at run
	// time (dlopen) defines it (key "pending"; default false). Without
	// it, a location that neither the program nor the libraries it links
	// define is a plan error.
	Pending bool
	// KeepSnapshots is KeepAll or KeepChanged (key "keep_snapshots";
	// default the plan's). With KeepChanged a snapshot whose allocation
	// tree equals the previous kept one of the same breakpoint and phase
	// is not kept: its stop keeps the totals and names the stop whose
	// file holds the same tree.
	KeepSnapshots string
	// Threads is ThreadsNone, ThreadsCurrent or ThreadsAll (key
	// "threads"; default the plan's).
	Threads string

	// Pos is where the entry starts in the plan, for messages such as
	// `breakpoint "request" (plan.yaml:14:5) never hit`.
	Pos Pos
	// LocationPos is where the location's value is in the plan, for
	// errors about the location (see LocationError).
	LocationPos Pos
	// ConditionPos is where the condition's value is in the plan (see
	// ConditionError).
	ConditionPos Pos

	index int // position in Plan.Breakpoints, for error keys
}

// Backends are the values of the plan's "backend", the default first: the
// plan's enum of the run's list of backends (driver.BackendNames, the same
// names in the same order, which a driver test holds).
var Backends = []string{"massif", "memcheck", "native"}

// The values of keep_snapshots.
const (
	KeepAll     = "all"     // keep every snapshot file
	KeepChanged = "changed" // keep a snapshot file only when its tree changed
)

// The values of threads: how much thread state a stop records. Each
// thread gdb reads at a stop costs round trips through vgdb, so the cost of
// a stop grows with the number of threads only under ThreadsAll.
const (
	// ThreadsNone records the stopped thread's id and target id and the
	// breakpoint's frame: no backtrace, no thread details.
	ThreadsNone = "none"
	// ThreadsCurrent adds the stopped thread's backtrace and valgrind's
	// details of it (read again only when the set of threads changed).
	ThreadsCurrent = "current"
	// ThreadsAll adds every thread with its innermost frame and details.
	ThreadsAll = "all"
)

// Pos is a position in a plan file. Line and Column are 1-based; zero when
// unknown.
type Pos struct {
	File         string
	Line, Column int
}

// String formats the position as file:line:column, leaving out what is
// unknown.
func (p Pos) String() string {
	switch {
	case p.Line == 0:
		return p.File
	case p.Column == 0:
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// LocationError returns a positioned plan error about the breakpoint's
// location, for a location gdb cannot resolve:
//
//	plan.yaml:14:15: breakpoints[0].location: gdb cannot resolve "foo": Function "foo" not defined.
func (b Breakpoint) LocationError(format string, args ...any) *Error {
	return &Error{
		File:   b.LocationPos.File,
		Line:   b.LocationPos.Line,
		Column: b.LocationPos.Column,
		Key:    fmt.Sprintf("breakpoints[%d].location", b.index),
		Msg:    fmt.Sprintf(format, args...),
	}
}

// ConditionError returns a positioned plan error about the breakpoint's
// condition, for one gdb cannot parse.
func (b Breakpoint) ConditionError(format string, args ...any) *Error {
	return &Error{
		File:   b.ConditionPos.File,
		Line:   b.ConditionPos.Line,
		Column: b.ConditionPos.Column,
		Key:    fmt.Sprintf("breakpoints[%d].condition", b.index),
		Msg:    fmt.Sprintf(format, args...),
	}
}

// ShouldSnapshot reports whether hit (1-based, counted after Skip) takes a
// snapshot: hits 1, 1+Every, 1+2*Every, ...
func (b Breakpoint) ShouldSnapshot(hit int) bool {
	every := b.Every
	if every < 1 {
		every = 1
	}
	limit := b.HitLimit()
	return hit >= 1 && (hit-1)%every == 0 && (limit == 0 || hit <= limit)
}

// HitLimit is the last hit (counted after Skip) that may take a snapshot:
// MaxHits, or the hit of the EndRunAfter-th snapshot when that comes
// first; 0 for no limit. The stop paths use it where the plan says
// max_hits.
func (b Breakpoint) HitLimit() int {
	limit := b.MaxHits
	if b.EndRunAfter > 0 {
		every := max(b.Every, 1)
		if last := 1 + (b.EndRunAfter-1)*every; limit == 0 || last < limit {
			limit = last
		}
	}
	return limit
}

// Done reports whether the breakpoint is finished after hit (1-based,
// counted after Skip): no later hit up to MaxHits would take a snapshot.
// The driver deletes the breakpoint once Done is true. With Every 1 that is
// after hit MaxHits.
func (b Breakpoint) Done(hit int) bool {
	every := b.Every
	if every < 1 {
		every = 1
	}
	limit := b.HitLimit()
	if limit == 0 {
		return false
	}
	next := hit + every - (hit-1)%every // the next hit that would snapshot
	return hit >= limit || next > limit
}

// NextIgnore returns the ignore count the driver may set (MI -break-after)
// after hit (1-based, counted after Skip) so that gdb does not stop on the
// hits before the next one that takes a snapshot: Every-1 after a snapshot
// hit, fewer after a hit in between (another thread's, reported while a
// stop's actions ran). A driver that uses it must add the ignored hits to
// its own count.
func (b Breakpoint) NextIgnore(hit int) int {
	if b.Every <= 1 || hit < 1 {
		return 0
	}
	return b.Every - 1 - (hit-1)%b.Every
}
