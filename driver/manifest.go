package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
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
	// Backend is how memory was measured: "massif" or "native".
	Backend string `json:"backend"`
	// Native holds the native backend's settings, nil with massif.
	Native *NativeSettings `json:"native,omitempty"`
	// Valgrind is valgrind's command line, for reproducing the run by hand.
	Valgrind []string `json:"valgrind"`
	// GdbAgent says whether gdb's agent took the stops of the breakpoints
	// without commands or around_call (see the README); false when gdb has
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
}

// NativeSettings is run.json's "native".
type NativeSettings struct {
	// TrimProbe says that every stop called malloc_trim(0), which changes
	// the program's state.
	TrimProbe bool `json:"trim_probe"`
	// AttachedPid is the process snapctl attach attached to, 0 when gdb
	// started the program; Detached says that gdb detached from it at
	// the end and left it running.
	AttachedPid int  `json:"attached_pid,omitempty"`
	Detached    bool `json:"detached,omitempty"`
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
	Memory         *Memory `json:"memory,omitempty"`
	HeapExtraBytes int64   `json:"heap_extra_bytes,omitempty"`
	StacksBytes    int64   `json:"stacks_bytes,omitempty"`

	// Commands are the breakpoint's gdb commands and what they printed.
	Commands []CommandOutput `json:"commands,omitempty"`

	// OtherThreadsRan is set on a return-phase stop: whether any thread
	// other than the stopped one ran while finish resumed the target
	// (valgrind does not honour scheduler-locking: docs/design.md, fact 1).
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
	// EventTcacheNotSubtracted: the native backend cannot read glibc's
	// per-thread caches, whose freed chunks then count as in use.
	EventTcacheNotSubtracted EventKind = "tcache-not-subtracted"
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

// snapshotName is the file name of a stop's snapshot inside snapshots/:
// sequence, breakpoint and hit, plus "-return" for the return phase.
// Kept snapshots are gzipped (keepSnapshot): snapctl's commands read them
// as they are; `gunzip -k` gives ms_print its plain file.
func snapshotName(seq int, bp string, hit int, phase string) string {
	name := fmt.Sprintf("%04d-%s-%d", seq, bp, hit)
	if phase == phaseReturn {
		name += "-return"
	}
	return filepath.Join(snapshotDir, name+snapshotKeptExt)
}

// snapshotKeptExt ends the name of a kept snapshot.
const snapshotKeptExt = ".massif.gz"

const (
	phaseHit    = "hit"
	phaseReturn = "return"
)

// manifestSpools are the spools run.json's lists are streamed from; nil
// for an empty list.
type manifestSpools struct {
	stops, events, diffs *spool
}

// close closes the views of the spools (spool.view).
func (sp manifestSpools) close() {
	sp.stops.closeView()
	sp.events.closeView()
	sp.diffs.closeView()
}

// writeManifest writes run.json atomically, with the stops, events and
// diffs streamed from their spools in between m's other fields. The bytes
// are those json.MarshalIndent would give for the whole manifest, without
// ever holding every stop.
func writeManifest(dir string, m *Manifest, sp manifestSpools) error {
	mm := *m
	mm.Stops, mm.Events, mm.Diffs = []Stop{}, []Event{}, []*snapshots.Diff{}
	if mm.Suspects == nil {
		mm.Suspects = []snapshots.Suspect{}
	}
	if mm.Stacks == nil {
		mm.Stacks = [][]snapshots.Frame{}
	}
	data, err := json.MarshalIndent(&mm, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding run.json: %w", err)
	}
	// The empty lists are the only top-level lines of this form: nested
	// keys are indented further and strings hold no raw newline.
	return writeFileAtomicFunc(filepath.Join(dir, manifestFile), func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		rest := data
		for _, part := range []struct {
			key string
			sp  *spool
		}{{"stops", sp.stops}, {"events", sp.events}, {"diffs", sp.diffs}} {
			mark := []byte("\n  \"" + part.key + "\": [")
			i := bytes.Index(rest, append(mark, ']'))
			if i < 0 {
				return fmt.Errorf("encoding run.json: no %q list", part.key)
			}
			bw.Write(rest[:i+len(mark)])
			rest = rest[i+len(mark):]
			if err := streamList(bw, part.sp); err != nil {
				return fmt.Errorf("writing run.json %s: %w", part.key, err)
			}
		}
		bw.Write(rest)
		bw.WriteByte('\n')
		return bw.Flush()
	})
}

// streamList writes a spool's records as the elements of a top-level list
// of run.json, indented as json.MarshalIndent indents them.
func streamList(w *bufio.Writer, sp *spool) error {
	var buf bytes.Buffer
	first := true
	err := sp.each(func(line []byte) error {
		buf.Reset()
		if err := json.Indent(&buf, line, "    ", "  "); err != nil {
			return err
		}
		if first {
			w.WriteString("\n    ")
			first = false
		} else {
			w.WriteString(",\n    ")
		}
		_, err := w.Write(buf.Bytes())
		return err
	})
	if err != nil {
		return err
	}
	if !first {
		w.WriteString("\n  ")
	}
	return nil
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
