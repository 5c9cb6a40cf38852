package runjson

import (
	"fmt"
	"time"

	"github.com/snapctl/snapctl/snapshots"
)

// Schema is the value of run.json's "schema" field.
//
// v2 (this one) stores each distinct stack once, in "stacks", and has
// diffs[].sites[] and suspects[] name theirs by "stack_id" instead of
// holding a "stack": a reader of v1 would find no stack, so the version
// changed.
const Schema = "snapctl.run/v2"

// Status says how a run ended (run.json "status").
type Status string

// The statuses of a run.
const (
	StatusCompleted Status = "completed"      // the target exited normally
	StatusCrashed   Status = "target-crashed" // the target died of a signal
	StatusInterrupt Status = "interrupted"    // SIGINT, SIGTERM or SIGHUP
	StatusTimeout   Status = "timeout"        // --timeout expired
	StatusFailed    Status = "failed"         // snapctl or a tool failed
)

// Manifest is run.json: what was run, every stop, and the analysis. The
// field names are those of schema snapctl.run/v2 (docs/design.md,
// "run.json, schema snapctl.run/v2"); fields are only ever added within a
// schema version.
//
// A session does not hold its stops and diffs in memory: it spools them to
// disk and streams them into run.json. In Result.Manifest, Stops and Diffs
// are therefore empty; Result.Stops and Result.Diffs count them, and a
// Manifest read back from run.json has them all.
type Manifest struct {
	Schema string `json:"schema"`
	Status Status `json:"status"`
	// Error is the one-line reason a run did not complete, if any.
	Error string `json:"error,omitempty"`
	// ExitCode is the code snapctl exits with (see ExitStatus), null while
	// the run is going or when snapctl was killed outright; ExitReason says
	// why in one word: "ok", "fail-on-exceeded", "breakpoint-never-hit",
	// "target-crashed", "timeout", "interrupted", "failed"...
	ExitCode   *int      `json:"exit_code"`
	ExitReason string    `json:"exit_reason,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	// Plan is the copy of the plan in the run directory, relative to it.
	Plan string `json:"plan"`
	// Target is the profiled program and how it ended.
	Target Target `json:"target"`
	// Backend is how memory was measured: "massif", "memcheck" or
	// "native".
	Backend string `json:"backend"`
	// Native holds the native backend's settings, nil with the others.
	Native *NativeSettings `json:"native,omitempty"`
	// Valgrind is valgrind's command line, for reproducing the run by hand.
	Valgrind []string `json:"valgrind"`
	// GdbAgent says whether gdb's agent took the stops of the breakpoints
	// without commands or around_call (docs/run.md); false when gdb has
	// no Python or no breakpoint could use it, and every stop went over MI.
	GdbAgent bool `json:"gdb_agent"`
	// Breakpoints summarises each plan breakpoint: how often it stopped.
	Breakpoints []BreakpointSummary `json:"breakpoints"`
	Stops       []Stop              `json:"stops"`
	// Events are stops that were not declared breakpoints: signals the
	// target received, unexpected stops, stops that were abandoned.
	// They are spooled like the stops (session.events) and written as
	// a list always, empty when nothing happened.
	Events []Event `json:"events"`
	// Diffs are the between-hits diffs of each breakpoint and the
	// within-call diffs of around_call breakpoints, in the order made.
	Diffs []*snapshots.Diff `json:"diffs"`
	// Suspects are the sites that grew steadily, the fastest first.
	Suspects []snapshots.Suspect `json:"suspects"`
	// Verdicts say, per breakpoint, whether memory leaked, stayed with
	// the allocator, grew outside the heap or stayed flat (native
	// backend only).
	Verdicts []Verdict `json:"verdicts,omitempty"`
	// Stacks holds every distinct stack of the diffs' sites and of the
	// suspects once; each of those names its stack by its index here
	// (stack_id) instead of repeating it. ResolveStacks puts them back.
	Stacks [][]snapshots.Frame `json:"stacks"`
	// Modules are the modules whose frames are named by module and
	// offset ("memcached+0x1a2b3": no symbols), with their build-ids, so
	// that the offsets can be symbolised later from the debug files
	// (addr2line -e FILE OFFSET).
	Modules []Module `json:"modules,omitempty"`
	// Phases say, per breakpoint with around_call (native backend), what
	// its calls left behind in the in-use heap: with several breakpoints,
	// which phase keeps the memory.
	Phases []Phase `json:"phases,omitempty"`
}

// Phase is what the calls of one around_call breakpoint left behind.
type Phase struct {
	Breakpoint string `json:"breakpoint"`
	// Calls counts the calls measured at their hit and their return.
	Calls int `json:"calls"`
	// InUseLeftByCalls is the in-use heap (with the allocator's mmapped
	// blocks) at the returns less at the hits, over all the calls.
	InUseLeftByCalls int64 `json:"heap_in_use_left_by_calls_bytes"`
}

// Module is a module of the program (the executable or a library) that
// names frames by offset.
type Module struct {
	Path    string `json:"path"`
	BuildID string `json:"build_id,omitempty"`
}

// Leak is memcheck's leak search at a stop: the bytes and blocks of each
// kind of its loss records, and the file that keeps the records with
// their allocation stacks and what holds the reachable ones that grew.
type Leak struct {
	DefinitelyLost LeakKind `json:"definitely_lost"`
	IndirectlyLost LeakKind `json:"indirectly_lost"`
	PossiblyLost   LeakKind `json:"possibly_lost"`
	StillReachable LeakKind `json:"still_reachable"`
	// Records is the file of the loss records, relative to the run
	// directory: snapshots/SEQ-BREAKPOINT-HIT.leak.json.
	Records string `json:"records"`
}

// LeakKind is the bytes and blocks of one kind of loss record.
type LeakKind struct {
	Bytes  int64 `json:"bytes"`
	Blocks int64 `json:"blocks"`
}

// NativeSettings is run.json's "native".
type NativeSettings struct {
	// TrimProbe says that every stop called malloc_trim(0), which changes
	// the program's state.
	TrimProbe bool `json:"trim_probe"`
	// Sites says that heaptrack recorded every allocation with its
	// stack (native.sites): the run has per-site snapshots, diffs and
	// suspects, as a massif run has.
	Sites bool `json:"sites,omitempty"`
	// AttachedPid is the process snapctl attach attached to, 0 when gdb
	// started the program; Detached says that gdb detached from it at
	// the end and left it running.
	AttachedPid int  `json:"attached_pid,omitempty"`
	Detached    bool `json:"detached,omitempty"`
	// Allocator names the allocator the program's malloc is ("glibc",
	// "jemalloc (libjemalloc.so.2)"...), found from the libraries mapped
	// in the process and the symbols of the program; absent in runs of
	// an earlier snapctl.
	Allocator string `json:"allocator,omitempty"`
	// StopsMeasuredBySnapctl counts the stops over MI that snapctl
	// measured itself from the stopped process, without a command to
	// gdb's agent (the same figures; docs/design.md, "A stop measured
	// without gdb"); the others were the agent's.
	StopsMeasuredBySnapctl int `json:"stops_measured_by_snapctl,omitempty"`
	// StopsBy says who took the measured stops under attach: "snapctl",
	// the process's own tracer once gdb had set the run up and left
	// (docs/design.md, "The stop taken by snapctl"), or "gdb";
	// StopsByWhy says why gdb did.
	StopsBy    string `json:"stops_by,omitempty"`
	StopsByWhy string `json:"stops_by_why,omitempty"`
}

// ResolveStacks fills the Stack of every diff site and suspect read back
// from run.json with the stack its StackID names in m.Stacks, and clears
// the StackIDs, so that a reader sees the stacks as the reports print them.
func (m *Manifest) ResolveStacks() error {
	for _, d := range m.Diffs {
		for i := range d.Sites {
			site := &d.Sites[i]
			stack, err := snapshots.ResolveStack(m.Stacks, site.StackID, site.Stack)
			if err != nil {
				return fmt.Errorf("diff %d..%d of %q: %w", d.FromSeq, d.ToSeq, d.Breakpoint, err)
			}
			site.Stack, site.StackID = stack, nil
		}
	}
	for i := range m.Suspects {
		s := &m.Suspects[i]
		stack, err := snapshots.ResolveStack(m.Stacks, s.StackID, s.Stack)
		if err != nil {
			return fmt.Errorf("suspect %s: %w", snapshots.FrameString(s.Frame), err)
		}
		s.Stack, s.StackID = stack, nil
	}
	return nil
}

// Target is run.json's "target".
type Target struct {
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd,omitempty"`
	// ExitCode is the target's exit status when it exited, else null.
	ExitCode *int `json:"exit_code"`
	// Signal is the name of the signal that killed it ("SIGSEGV"), else
	// null.
	Signal *string `json:"signal"`
	// Crash is where the target was when the fatal signal arrived, when
	// gdb saw it.
	Crash *Crash `json:"crash,omitempty"`
	// Exec is the program the target exec'd, which ended a native run.
	Exec string `json:"exec,omitempty"`
}

// Crash is where a target died.
type Crash struct {
	Signal    string  `json:"signal"`
	Thread    Thread  `json:"thread"`
	Backtrace []Frame `json:"backtrace,omitempty"`
}

// BreakpointSummary is one plan breakpoint in run.json.
type BreakpointSummary struct {
	Name     string `json:"name"`
	Location string `json:"location"`
	// Number is gdb's breakpoint number, "" when it was never inserted.
	Number string `json:"number,omitempty"`
	// Hits counts hits as the plan counts them (after skip).
	Hits int `json:"hits"`
	// Snapshots counts the stops with a snapshot (hit and return phases).
	Snapshots int  `json:"snapshots"`
	Optional  bool `json:"optional,omitempty"`
	// Unresolved says that the location never resolved: no library loaded
	// during the run defined it (a pending breakpoint).
	Unresolved bool `json:"unresolved,omitempty"`
	// KeepSnapshots is the breakpoint's keep_snapshots when not "all".
	KeepSnapshots string `json:"keep_snapshots,omitempty"`
	// Unchanged counts the snapshots taken but not kept because their tree
	// equalled the previous kept one (keep_snapshots: changed): the files
	// in snapshots/ are Snapshots - Unchanged.
	Unchanged int `json:"unchanged,omitempty"`
	// Deleted is set when max_hits was reached and the breakpoint removed.
	Deleted bool `json:"deleted,omitempty"`
	// Counted says who counted the hits: "kernel" (a uprobe; only the
	// measured hits stopped the program) or "gdb" (every hit stopped
	// it); CountedWhy says why gdb did where the kernel could have.
	Counted    string `json:"counted,omitempty"`
	CountedWhy string `json:"counted_why,omitempty"`
}

// Stop is one snapshot stop (run.json "stops").
type Stop struct {
	Seq        int    `json:"seq"`
	Breakpoint string `json:"breakpoint"`
	Hit        int    `json:"hit"`
	Phase      string `json:"phase"` // "hit" or "return"
	Time       string `json:"time"`  // RFC 3339 with milliseconds
	Thread     Thread `json:"thread"`
	Frame      Frame  `json:"frame"`
	// Backtrace is the stopped thread's stack, innermost first.
	Backtrace []Frame `json:"backtrace,omitempty"`
	// Threads is every thread of the target at this stop.
	Threads []Thread `json:"threads,omitempty"`
	// Snapshot is the massif file, relative to the run directory; "" when
	// keep_snapshots: changed dropped it because its allocation tree equals
	// the file of stop SameAsSeq.
	Snapshot  string `json:"snapshot"`
	SameAsSeq int    `json:"same_as_seq,omitempty"`

	// HeapBytes is the bytes the program holds from the allocator.
	// HeapExtraBytes (allocator overhead) and StacksBytes are only known
	// from a detailed snapshot; the xtmemory files snapctl takes do not
	// have them (massif.out in the run directory does, over time).
	HeapBytes int64 `json:"heap_bytes"`
	// Memory is what the native backend read at the stop.
	Memory *Memory `json:"memory,omitempty"`
	// Leak is what memcheck's leak search found at the stop (the
	// memcheck backend).
	Leak           *Leak `json:"leak,omitempty"`
	HeapExtraBytes int64 `json:"heap_extra_bytes,omitempty"`
	StacksBytes    int64 `json:"stacks_bytes,omitempty"`

	// Commands are the breakpoint's gdb commands and what they printed.
	Commands []CommandOutput `json:"commands,omitempty"`

	// OtherThreadsRan is set on a return-phase stop: whether any thread
	// other than the stopped one ran while finish resumed the target
	// (valgrind does not honour scheduler-locking: docs/facts.md, fact 1).
	OtherThreadsRan *bool `json:"other_threads_ran,omitempty"`
	// ThreadsChanged names those threads ("2 (Thread 4243): frame
	// changed", "3 (Thread 4244): new").
	ThreadsChanged []string `json:"threads_changed,omitempty"`
	// SchedulerLocking is the gdb mode in force while the stop's actions
	// ran, when they resumed the target.
	SchedulerLocking string `json:"scheduler_locking,omitempty"`
	// SchedulerLockReleased is set on a return-phase stop whose call did
	// not return within stop_timeout under scheduler-locking (native
	// backend): the lock was released and the call finished with every
	// thread running.
	SchedulerLockReleased bool `json:"scheduler_lock_released,omitempty"`
}

// Thread is one target thread as gdb names it.
type Thread struct {
	ID       string `json:"id"`                  // gdb's thread number, "1"
	TargetID string `json:"target_id,omitempty"` // "Thread 4242"
	State    string `json:"state,omitempty"`     // "stopped", "running"
	Details  string `json:"details,omitempty"`   // valgrind's "tid 1 VgTs_Runnable"
	Frame    *Frame `json:"frame,omitempty"`
}

// Frame is a code location as gdb reports it. File is the base name, as
// massif prints it; FullName is gdb's absolute path.
type Frame struct {
	Function string `json:"function"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	FullName string `json:"fullname,omitempty"`
	Addr     string `json:"addr,omitempty"`
	From     string `json:"from,omitempty"` // the shared object, without debug info
}

// String formats the frame as "function (file:line)".
func (f Frame) String() string {
	switch {
	case f.File != "" && f.Line > 0:
		return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
	case f.From != "":
		return fmt.Sprintf("%s (in %s)", f.Function, f.From)
	}
	return f.Function
}

// CommandOutput is one of a breakpoint's commands and what gdb printed.
type CommandOutput struct {
	Command string `json:"command"`
	Output  string `json:"output"`
	Error   string `json:"error,omitempty"`
}

// EventKind says what an event of run.json is (docs/design.md, "run.json").
type EventKind string

// The kinds of event a run records.
const (
	// EventSignal: the target received a signal.
	EventSignal EventKind = "signal"
	// EventUnexpectedStop: gdb stopped the target where no breakpoint of
	// the plan is.
	EventUnexpectedStop EventKind = "unexpected-stop"
	// EventStopAbandoned: a stop failed part way and the run went on
	// without its snapshot.
	EventStopAbandoned EventKind = "stop-abandoned"
	// EventAroundCallCutShort: the call of an around_call stop did not
	// return (the target exited, or another stop came first).
	EventAroundCallCutShort EventKind = "around-call-cut-short"
	// EventAroundCallFailed: the return of an around_call stop could not
	// be set up.
	EventAroundCallFailed EventKind = "around-call-failed"
	// EventConditionError: gdb could not evaluate a breakpoint's
	// condition at a hit.
	EventConditionError EventKind = "condition-error"
	// EventStopStalled: a stop, or gdb, vgdb or valgrind, did not move
	// within stop_timeout; the run ends.
	EventStopStalled EventKind = "stop-stalled"
	// EventAnalysisError: a snapshot could not be analysed.
	EventAnalysisError EventKind = "analysis-error"
	// EventNoAllocatorState: the native backend cannot read glibc's
	// allocator in this process and records resident memory only.
	EventNoAllocatorState EventKind = "no-allocator-state"
	// EventAllocatorCallFailed: at one native stop the call to glibc's
	// allocator did not return (a fault inside it, or a signal gdb stops
	// for); that stop records resident memory only.
	EventAllocatorCallFailed EventKind = "allocator-call-failed"
	// EventAllocatorBusy: at one native stop a thread held the lock of
	// one of glibc's arenas (it was inside the allocator, maybe in a
	// signal handler that interrupted it); that stop records resident
	// memory only.
	EventAllocatorBusy EventKind = "allocator-busy"
	// EventSchedulerLockReleased: a locked around_call blocked, and the
	// stop deadline let the other threads run.
	EventSchedulerLockReleased EventKind = "scheduler-lock-released"
	// EventRunEnded: the run ended by the workload or end_run_after, and
	// snapctl detached from the process.
	EventRunEnded EventKind = "run-ended"
	// EventTargetEnded: the run ended by the workload or end_run_after,
	// and snapctl ended the target.
	EventTargetEnded EventKind = "target-ended"
	// EventTargetExec: the native target called exec; the run ends with
	// the stops taken before it.
	EventTargetExec EventKind = "target-exec"
	// EventNothingMeasured: no breakpoint took a snapshot; the message
	// says how the target or the run ended first.
	EventNothingMeasured EventKind = "nothing-measured"
	// EventBreakpointUnresolved: a pending breakpoint's location never
	// resolved.
	EventBreakpointUnresolved EventKind = "breakpoint-unresolved"
	// EventTcacheNotSubtracted: the native backend cannot read glibc's
	// per-thread caches, whose freed chunks then count as in use.
	EventTcacheNotSubtracted EventKind = "tcache-not-subtracted"
	// EventSitesFailed: native.sites could not take a stop's per-site
	// snapshot (heaptrack's stream, or a thread held inside heaptrack);
	// the stop keeps its native figures.
	EventSitesFailed EventKind = "sites-failed"
	// EventHitsNotStopped: measured hits counted in the kernel could not
	// stop the program (their thread blocked the stop signal).
	EventHitsNotStopped EventKind = "hits-not-stopped"
)

// Event is a stop that was not a declared breakpoint's, or a problem at a
// stop that the run survived.
type Event struct {
	Time   string    `json:"time"`
	Kind   EventKind `json:"kind"`
	Signal string    `json:"signal,omitempty"`
	Reason string    `json:"reason,omitempty"` // gdb's stop reason
	Thread Thread    `json:"thread,omitempty"`
	Frame  *Frame    `json:"frame,omitempty"`
	// Backtrace for a signal, innermost first.
	Backtrace []Frame `json:"backtrace,omitempty"`
	Message   string  `json:"message,omitempty"`
}

const (
	PhaseHit    = "hit"
	PhaseReturn = "return"
)

func Stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// Memory is what the native backend reads at a stop (run.json
// stops[].memory). The allocator's figures are glibc's mallinfo2(); they
// are absent when the program's allocator cannot be read (a static
// binary, a C library that is not glibc).
type Memory struct {
	RSSBytes     int64 `json:"rss_bytes"`      // VmRSS of /proc/PID/status
	AnonRSSBytes int64 `json:"anon_rss_bytes"` // RssAnon
	// HeapInUseBytes is mallinfo2's uordblks: allocated and not freed,
	// less TcacheBytes.
	HeapInUseBytes *int64 `json:"heap_in_use_bytes,omitempty"`
	// HeapFreeBytes is fordblks: freed but held by the allocator, with
	// TcacheBytes.
	HeapFreeBytes *int64 `json:"heap_free_bytes,omitempty"`
	// TcacheBytes is the freed chunks in glibc's per-thread caches,
	// which mallinfo2 counts as in use; absent when they could not be
	// read (TcacheError), and then counted as in use.
	TcacheBytes *int64 `json:"tcache_bytes,omitempty"`
	// TcacheError says why not; not recorded (an event says it once).
	TcacheError string `json:"tcache_error,omitempty"`
	// MmapBytes is hblkhd: blocks the allocator mmapped one each.
	MmapBytes *int64 `json:"mmap_bytes,omitempty"`
	// ArenaBytes is arena: the bytes of the arenas' heaps.
	ArenaBytes *int64 `json:"arena_bytes,omitempty"`
	// Arenas is the number of arenas: glibc's narenas, found through
	// libc's symbol table (agent.py, narenas_address).
	Arenas *int `json:"arenas,omitempty"`
	// TrimReleasedBytes is how much VmRSS dropped when the stop called
	// malloc_trim(0) (native.trim_probe), after the figures above.
	TrimReleasedBytes *int64 `json:"trim_released_bytes,omitempty"`
	// AllocatorError is set by the agent and not recorded (an event says
	// it once).
	AllocatorError string `json:"allocator_error,omitempty"`
	// CallError says why this stop's call to the allocator did not
	// return; not recorded (an event says it).
	CallError string `json:"call_error,omitempty"`
	// BusyError says that a thread held an arena's lock at this stop, so
	// that the allocator was not read; not recorded (an event says it).
	BusyError string `json:"busy_error,omitempty"`
	// Mallinfo2 is what glibc's mallinfo2() returned, or would have, at
	// this stop, field for field: the tcaches' chunks count as in use
	// there (HeapInUseBytes is uordblks less TcacheBytes).
	Mallinfo2 *Mallinfo2 `json:"mallinfo2,omitempty"`
	// Jemalloc is what jemalloc's mallctl() said at this stop, where the
	// program allocates with jemalloc: HeapInUseBytes is its allocated
	// less TcacheBytes (the regions its threads' tcaches hold), and
	// HeapFreeBytes its active less that.
	Jemalloc *Jemalloc `json:"jemalloc,omitempty"`
	// HeapUnmeasured says why a stop has no allocator figures, as the
	// kind of the event that says it at that stop or once for the run:
	// allocator-busy (an arena's lock was held), allocator-call-failed
	// (the call or the reading failed at this stop), no-allocator-state
	// (the allocator cannot be read in this program). "" when the stop
	// has the figures.
	HeapUnmeasured EventKind `json:"heap_unmeasured,omitempty"`
	// HeapUnmeasuredWhy says the same in words: the failed call or arena
	// read, the lock held, the allocator that is not glibc's.
	HeapUnmeasuredWhy string `json:"heap_unmeasured_why,omitempty"`
	// SitesMissing says why a stop of a native.sites run has no per-site
	// snapshot (heaptrack's recording failed or ended); absent when it
	// has one, and in runs without sites.
	SitesMissing string `json:"sites_missing,omitempty"`
	// HeapReadSeconds is how long reading glibc's arenas took at this
	// stop, where they were read from memory (libc's symbol table).
	HeapReadSeconds float64 `json:"heap_read_seconds,omitempty"`
}

// Jemalloc is jemalloc's statistics (see jemalloc(3), MALLCTL NAMESPACE),
// as mallctl() reads them after a write to "epoch".
type Jemalloc struct {
	Allocated int64 `json:"allocated"` // stats.allocated: bytes in regions allocated, by size class, tcaches' included
	Active    int64 `json:"active"`    // stats.active: bytes of the pages those regions lie in
	Resident  int64 `json:"resident"`  // stats.resident: bytes of jemalloc's pages in memory
	Mapped    int64 `json:"mapped"`    // stats.mapped: bytes of its extents mapped
	// TcacheBytes is stats.arenas.<all>.tcache_bytes: freed regions the
	// threads' tcaches hold; absent where jemalloc has no such statistic.
	TcacheBytes *int64 `json:"tcache_bytes,omitempty"`
}

// Mallinfo2 is glibc's struct mallinfo2 (see mallinfo2(3)).
type Mallinfo2 struct {
	Arena    int64 `json:"arena"`    // bytes of the arenas' heaps (sbrk and mmapped heaps)
	Ordblks  int64 `json:"ordblks"`  // free chunks, not counting fastbins', with each arena's top chunk
	Smblks   int64 `json:"smblks"`   // free chunks in fastbins
	Hblks    int64 `json:"hblks"`    // blocks mmapped one each
	Hblkhd   int64 `json:"hblkhd"`   // their bytes
	Usmblks  int64 `json:"usmblks"`  // always 0
	Fsmblks  int64 `json:"fsmblks"`  // bytes of the fastbins' free chunks
	Uordblks int64 `json:"uordblks"` // bytes in use
	Fordblks int64 `json:"fordblks"` // bytes free
	Keepcost int64 `json:"keepcost"` // the main arena's top chunk, which the allocator can give back to the system
}

// MemoryDelta is the change between two stops (run.json
// diffs[].memory_delta, native backend).
type MemoryDelta struct {
	RSSBytes       int64  `json:"rss_bytes"`
	HeapInUseBytes *int64 `json:"heap_in_use_bytes,omitempty"`
	HeapFreeBytes  *int64 `json:"heap_free_bytes,omitempty"`
}

// MemoryDiff is a diff of the native backend: between consecutive hits of
// a breakpoint, or within an around_call's call.
type MemoryDiff struct {
	Kind        string      `json:"kind"` // "between-hits" or "within-call"
	Breakpoint  string      `json:"breakpoint"`
	FromSeq     int         `json:"from_seq"`
	ToSeq       int         `json:"to_seq"`
	MemoryDelta MemoryDelta `json:"memory_delta"`
}

// The verdicts of the native backend. A verdict is the most urgent of the
// findings that hold for a breakpoint, in this order: leak, outside-heap,
// retention, rss-growth; flat when none holds.
const (
	VerdictLeak        = "leak"
	VerdictOutsideHeap = "outside-heap"
	VerdictRetention   = "retention"
	// VerdictRSSGrowth: resident memory grew, and the allocator could not
	// be read to say why.
	VerdictRSSGrowth = "rss-growth"
	VerdictFlat      = "flat"
	// VerdictTooFewStops: fewer than minTrendStops stops, too few to tell
	// steady growth from noise.
	VerdictTooFewStops = "too-few-stops"
	// VerdictHeapUnmeasured: the allocator could not be read at enough
	// stops to judge the in-use heap (an allocator that is not glibc's,
	// failed reads): no verdict on the heap, never flat.
	VerdictHeapUnmeasured = "heap-unmeasured"
)

// Verdict is run.json's verdicts[]: what the native backend concludes of
// one breakpoint's hits.
type Verdict struct {
	Breakpoint string `json:"breakpoint"`
	Verdict    string `json:"verdict"`
	// Findings are all the findings that hold, the most urgent (Verdict)
	// first; empty when the verdict is flat or too-few-stops.
	Findings []string       `json:"findings"`
	Figures  VerdictFigures `json:"figures"`
	// Sentence says it in words, with what to do next.
	Sentence string `json:"sentence"`
}

// VerdictFigures are what the verdict is decided from. The growths are
// trends over all of the breakpoint's hit-phase stops (docs/design.md,
// "Native verdicts"): the Theil-Sen slope, in bytes per hit, times the hits
// between the first stop and the last. In-use heap counts the allocator's
// mmapped blocks too (heap_in_use_bytes + mmap_bytes).
type VerdictFigures struct {
	Stops          int    `json:"stops"`
	Hits           int    `json:"hits"` // hits between the first and the last stop
	RSSGrowth      int64  `json:"rss_growth_bytes"`
	InUseGrowth    *int64 `json:"heap_in_use_growth_bytes,omitempty"`
	FreeGrowth     *int64 `json:"heap_free_growth_bytes,omitempty"`
	InUsePerHit    *int64 `json:"heap_in_use_growth_per_hit_bytes,omitempty"`
	InUseIntervals int    `json:"heap_in_use_grew_intervals"` // intervals in which in-use grew
	// Intervals counts the intervals between consecutive stops that both
	// read the allocator.
	Intervals int `json:"intervals"`
	// The Mann-Kendall statistics (z) of the series: how consistently
	// later stops hold more than earlier ones; a finding needs at least
	// minTrendZ.
	RSSTrend   float64  `json:"rss_trend"`
	InUseTrend *float64 `json:"heap_in_use_trend,omitempty"`
	FreeTrend  *float64 `json:"heap_free_trend,omitempty"`
	// Arenas is the most arenas seen at a stop.
	Arenas *int `json:"arenas,omitempty"`
	// TrimReleased is the most that malloc_trim(0) returned at one stop,
	// and TrimReleasedTotal what it returned over all of them, with
	// native.trim_probe.
	TrimReleased      *int64 `json:"trim_released_bytes,omitempty"`
	TrimReleasedTotal *int64 `json:"trim_released_total_bytes,omitempty"`
	// TcacheBytes is what glibc's per-thread caches held at the last
	// stop that read them (out of in-use heap); absent when none did.
	TcacheBytes *int64 `json:"tcache_bytes,omitempty"`
	// RSSChange and InUseChange are resident memory's and in-use heap's
	// change from the first stop to the last (the growths above are
	// trends, not changes).
	RSSChange   int64  `json:"rss_change_bytes"`
	InUseChange *int64 `json:"heap_in_use_change_bytes,omitempty"`
	// InUsePerHitExact is the in-use heap's slope unrounded, in bytes
	// per hit: a leak of 0.47 B a hit rounds to 0 in
	// heap_in_use_growth_per_hit_bytes.
	InUsePerHitExact *float64 `json:"heap_in_use_growth_per_hit_exact_bytes,omitempty"`
	// InUseSource says where in-use heap comes from: "glibc" (mallinfo2's
	// figures, the default when absent), "jemalloc" (jemalloc's own
	// statistics: allocated less what its tcaches hold, by size class)
	// or "heaptrack" (the bytes heaptrack recorded as allocated and not
	// freed, native.sites with an allocator that is not glibc's).
	InUseSource string `json:"heap_in_use_source,omitempty"`
	// UnmeasuredStops counts the stops whose in-use heap could not be
	// read, and UnmeasuredWhy says why at the first of them; the verdict
	// rests on the others.
	UnmeasuredStops int    `json:"heap_unmeasured_stops,omitempty"`
	UnmeasuredWhy   string `json:"heap_unmeasured_why,omitempty"`
	// SitesMissingStops counts the stops of a native.sites run without a
	// per-site snapshot, and SitesMissingWhy says why at the first.
	SitesMissingStops int    `json:"sites_missing_stops,omitempty"`
	SitesMissingWhy   string `json:"sites_missing_why,omitempty"`
	// InUseFloorPerHit is the slope of the in-use heap's floor (the
	// least in-use heap of each window of stops), bytes per hit: what
	// a leak raises, whatever other threads hold in flight at a stop.
	InUseFloorPerHit *float64 `json:"heap_in_use_floor_per_hit_bytes,omitempty"`
	// FreeBytes is the free heap at the last stop that read it: what the
	// allocator holds, whether or not it grew.
	FreeBytes *int64 `json:"heap_free_last_bytes,omitempty"`
}
