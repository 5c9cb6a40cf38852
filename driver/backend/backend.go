// Package backend is the seam between a snapctl run and the way it
// measures memory: what a backend supplies, and the little of the run it
// is given.
//
// The run (package driver) numbers the stops, counts hits and snapshots,
// applies max_hits and end_run_after and writes run.json, once for every
// backend. A backend says what gdb's command measures at a stop and reads
// what it wrote (Measurer), makes its analysis of the stops, fed in stop
// order, and applies the plan's fail_on to it (Analysis), and renders its
// report sections (Reporter). Each backend is a package of its own under
// driver/backend: massif (valgrind's heap profiler, reached through vgdb),
// memcheck (valgrind's memcheck: massif's sites, and which blocks are lost
// and what holds the rest) and native (gdb alone: the kernel's and glibc's
// figures). None imports another; package sites, under driver/backend
// too, is the per-site snapshots and analysis a backend may use, and
// package valgrind the start of a program under one of valgrind's tools.
package backend

import (
	"io"

	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Backend is all a backend supplies to a run.
type Backend interface {
	// Name is the plan's and run.json's "backend".
	Name() string
	// Tool names the program that takes the measurements, for messages:
	// "valgrind", "gdb".
	Tool() string
	// Traits are what the backend can do, which the run and the commands
	// ask of it instead of its name.
	Traits() Traits
	Measurer
	Analysis
	Reporter
}

// Traits are what a backend can do: the run and snapctl's commands ask
// these, never a backend's name (docs/design.md, "Backends").
type Traits struct {
	// GDBStarts says that gdb starts the program (or attaches to it):
	// the early gdb then takes the target's environment. Otherwise a
	// tool of the backend's starts it and gdb connects to that tool.
	GDBStarts bool
	// Attaches says the backend can attach to a running process
	// (snapctl attach).
	Attaches bool
	// Sites says that every stop records the heap per allocation call
	// site, whatever the plan says (the native backend's are the plan's
	// native.sites).
	Sites bool
	// SitesOption says that the backend records the heap per allocation
	// call site when asked to: the plan's native.sites and --sites turn
	// it on, and imply the first backend of the list that has it.
	SitesOption bool
	// Preloads says that the backend's tool preloads a library into the
	// program to see its allocations: a static program measures nothing.
	Preloads bool
	// Lost says that the backend tells lost blocks from reachable ones,
	// so that the plan's fail_on.lost_per_hit applies.
	Lost bool
	// Unit is what the status line calls one measurement.
	Unit string
}

// Config is what a backend knows of its run, from the start.
type Config struct {
	Plan   *plan.Plan
	Binary string // the program, absolute
	Dir    string // the run directory, absolute
	// AttachPID is the process snapctl attach attaches to, 0 when gdb
	// starts the program.
	AttachPID int
	// Diffs spools a diff for run.json's "diffs".
	Diffs func(v any)
	// Event records a run.json event; Warn receives warnings.
	Event func(runjson.Event)
	Warn  io.Writer
}

// Measurement is what a stop's measurement wrote: a file at Path, or, when
// gdb's agent passes it on, the data itself.
type Measurement struct {
	Path string
	Data []byte
}

// Stop is a stop as its backend sees it: numbered, its measurement kept
// (Measurer.Stage), waiting to be read (Measurer.Read) once the target runs
// again.
type Stop struct {
	Stop       *runjson.Stop
	Breakpoint *plan.Breakpoint
	// HitOf is the hit of a return-phase stop.
	HitOf *Stop
	// Raw is where Stage left the measurement, "" when it left no file
	// (it read it at once, or, as native.sites, keeps what Read takes).
	Raw string
	// Own is the backend's own state of the stop, such as what its
	// return-phase stop compares with.
	Own any
}

// Measurer is what a backend measures while the target is stopped.
type Measurer interface {
	// Command is the gdb console command that takes a stop's
	// measurement into path, a file whose name ends in Ext.
	Command(path string) string
	Ext() string
	// Failure returns what the command's output says went wrong, ""
	// when it succeeded.
	Failure(out string) string
	// AgentMeasure is the measurement as agent.py's Agent takes it, a
	// Python dict literal.
	AgentMeasure() string
	// Stage takes the measurement m, made at stop (numbered, with its
	// time), while the target is stopped, and returns where it left it
	// for Read, "" when it read it at once.
	Stage(m Measurement, stop *runjson.Stop) (raw string, err error)
	// Read reads a kept stop's measurement into the stop and feeds the
	// analysis; stops come in stop order.
	Read(st *Stop) error
}

// Settings has backend b write its own settings into run.json m as the
// run starts (the native backend's "native"), when it has any.
func Settings(b Backend, m *runjson.Manifest) {
	if s, ok := b.(interface{ Settings(*runjson.Manifest) }); ok {
		s.Settings(m)
	}
}

// A SelfMeasurer can take a stop's measurement itself, without gdb:
// MeasureStopped returns it, taken now from the stopped target (every
// thread stopped), as Stage reads it (Measurement.Data), or nil when gdb's
// command (Command) must take it.
type SelfMeasurer interface {
	MeasureStopped() []byte
}

// StagesStopped reports whether m stages a stop's measurement from the
// target itself, which must then still be stopped: the run resumes it
// only after Stage (the native backend's native.sites cuts heaptrack's
// stream there). Others stage a file, and the run may resume the target
// in the same exchange with gdb that measured it.
func StagesStopped(m Measurer) bool {
	s, ok := m.(interface{ StagesStopped() bool })
	return ok && s.StagesStopped()
}

// Findings are what an analysis found, for run.json and the reports.
type Findings struct {
	// Report is the analysis as the renderers take it.
	Report *snapshots.Report
	// Suspects and Stacks are run.json's "suspects" and "stacks",
	// Verdicts its "verdicts".
	Suspects []snapshots.Suspect
	Stacks   [][]snapshots.Frame
	Verdicts []runjson.Verdict
	// Modules are run.json's "modules": those that name frames by offset.
	Modules []runjson.Module
	// Phases are run.json's "phases".
	Phases []runjson.Phase
	// Problems are what the analysis could not do, kept as events.
	Problems []string
	// Allocator names the program's allocator, for run.json's
	// native.allocator; "" when the backend does not say.
	Allocator string
	// MeasuredItself counts the stops the backend measured without gdb
	// (SelfMeasurer), for run.json's native.stops_measured_by_snapctl.
	MeasuredItself int
}

// Analysis turns the stops a backend read into findings.
type Analysis interface {
	// Findings ends the analysis: no stop can be read after it. title
	// names the run.
	Findings(title string) *Findings
	// Gate applies the plan's report.fail_on limits to the findings: a
	// *LeakError when one is over.
	Gate(limits plan.FailOn, f *Findings) error
}

// Reporter renders a backend's report sections of a run.
type Reporter interface {
	// Text is the terminal report.
	Text(w io.Writer, o *Outcome, opts snapshots.RenderOptions) error
	// Markdown is report.md.
	Markdown(w io.Writer, o *Outcome) error
	// HTML fills report.html's options: its facts, and, for a run that
	// measured something, its notes and whether it draws sites.
	HTML(opts *snapshots.HTMLOptions, o *Outcome)
	// Growth is the flame graph of what grew between two kept
	// measurement files of a breakpoint, nil when there is none.
	Growth(first, last string) *snapshots.FlameNode
}
