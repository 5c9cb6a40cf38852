// Package native measures a run's memory with gdb alone: at each stop,
// resident memory from /proc and glibc's allocator figures, read into
// memory diffs and per-breakpoint verdicts; with native.sites, also the
// heap per call site, recorded by heaptrack.
package native

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Name is the plan's and run.json's "backend".
const Name = "native"

// Backend reads, at each stop, what the kernel and glibc's allocator say
// (agent.py's native_memory): resident memory from /proc/PID/status, and
// glibc's mallinfo2() figures, called while the program has one thread
// and read from its arenas in memory while it has more. No valgrind.
// With native.sites, heaptrack records every allocation's stack too, and
// each stop also gets a per-site snapshot, analysed as massif's are
// (sites.go, package sites).
type Backend struct {
	cfg backend.Config
	// trim calls malloc_trim(0) at each stop (native.trim_probe).
	trim bool
	an   *nativeAnalysis
	// noAllocator is gdb's word for why the allocator cannot be read (a
	// static binary, a libc that is not glibc), once said.
	noAllocator string
	// noTcache is set once an event said the tcaches were not read.
	noTcache bool
	// launch is the run's launcher, which holds heaptrack's recording
	// under native.sites (sitesOn); perSite keeps and analyses its
	// snapshots, as massif's are.
	launch  *Launch
	perSite *sites.Sites
	sitesOn bool
	// phases adds up what around_call's calls left, per breakpoint.
	phases *phases
}

// New returns the native backend of a run.
func New(cfg backend.Config) backend.Backend {
	return &Backend{cfg: cfg, trim: cfg.Plan.Native.TrimProbe, an: newNativeAnalysis(cfg.Plan, cfg.Diffs),
		perSite: sites.New(cfg, sites.Options{AllocFns: cfg.Plan.Valgrind.AllocFns, Program: cfg.Binary}), sitesOn: cfg.Plan.Native.Sites, phases: newPhases(cfg.Plan)}
}

func (*Backend) Name() string { return Name }
func (*Backend) Tool() string { return "gdb" }

// Command is the measurement of a stop over MI (a breakpoint with
// commands or around_call), with every thread stopped (see
// measure_native).
func (b *Backend) Command(path string) string {
	trim := "False"
	if b.trim {
		trim = "True"
	}
	return "python measure_native(" + gdb.PyString(path) + ", " + trim + ")"
}

func (*Backend) Ext() string { return ".json" }

// Failure is always "": measure_native's errors reach snapctl as gdb's
// ^error.
func (*Backend) Failure(string) string { return "" }

func (b *Backend) AgentMeasure() string {
	// With sites, gdb's agent cuts heaptrack's stream at every measured
	// stop, every thread stopped (agent.py, SiteCutter).
	return backend.PyDict("kind", Name, "ext", b.Ext(), "trim", b.trim, "sites", b.cfg.Plan.Native.Sites)
}

// Stage reads the measurement into the stop; its file, if any, goes.
func (b *Backend) Stage(ms backend.Measurement, stop *runjson.Stop) (string, error) {
	data := ms.Data
	if data == nil {
		var err error
		data, err = os.ReadFile(ms.Path)
		os.Remove(ms.Path)
		if err != nil {
			return "", fmt.Errorf("reading the measurement at stop %d: %w", stop.Seq, err)
		}
	}
	// The agent's record holds the memory figures and, with sites, its
	// cut of heaptrack's stream.
	var rec struct {
		runjson.Memory
		siteCut
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return "", fmt.Errorf("reading the measurement at stop %d: %w", stop.Seq, err)
	}
	m := rec.Memory
	if m.AllocatorError != "" && b.noAllocator == "" {
		b.noAllocator = m.AllocatorError
		why := m.AllocatorError
		if !strings.Contains(why, "glibc") {
			why += ": a static binary, or a C library that is not glibc"
		}
		b.cfg.Event(runjson.Event{Kind: runjson.EventNoAllocatorState, Message: fmt.Sprintf(
			"glibc's allocator cannot be read (%s); only resident memory is recorded", why)})
		fmt.Fprintf(b.cfg.Warn, "warning: glibc's allocator cannot be read in this program (%s): only resident memory is recorded\n", m.AllocatorError)
	}
	if m.BusyError != "" {
		b.cfg.Event(runjson.Event{Kind: runjson.EventAllocatorBusy, Message: fmt.Sprintf(
			"breakpoint %q hit %d: %s; this stop records resident memory only", stop.Breakpoint, stop.Hit, m.BusyError)})
	}
	if m.CallError != "" {
		b.cfg.Event(runjson.Event{Kind: runjson.EventAllocatorCallFailed, Message: fmt.Sprintf(
			"breakpoint %q hit %d: %s; this stop records resident memory only", stop.Breakpoint, stop.Hit, m.CallError)})
	}
	if m.TcacheError != "" && !b.noTcache {
		b.noTcache = true
		b.cfg.Event(runjson.Event{Kind: runjson.EventTcacheNotSubtracted, Message: m.TcacheError + "; the freed chunks they hold count as in-use heap"})
	}
	m.AllocatorError, m.CallError, m.BusyError, m.TcacheError = "", "", "", ""
	stop.Memory = &m
	if m.HeapInUseBytes != nil {
		stop.HeapBytes = *m.HeapInUseBytes
	}
	if !b.sitesOn || b.launch == nil || b.launch.sites == nil {
		return "", nil
	}
	return b.stageSites(stop, rec.siteCut)
}

// StagesStopped: with sites, Stage may have to let a thread out of
// heaptrack's lock before the stop's cut, which the target must not run
// past meanwhile.
func (b *Backend) StagesStopped() bool { return b.sitesOn }

// stageSites takes the cut of heaptrack's stream that gdb's agent made at
// the stop; the stop's per-site snapshot is made from it in Read, once
// the target runs again. A cut that fails is an event: the stop keeps
// its native figures, and the run goes on.
func (b *Backend) stageSites(stop *runjson.Stop, cut siteCut) (string, error) {
	l := b.launch
	ctx, cancel := context.WithTimeout(context.Background(), l.env.Times.Stop)
	defer cancel()
	if err := l.sites.mark(ctx, l.gdb, l.pid, stop.Seq, cut); err != nil {
		b.sitesFailed(stop, err)
		return "", nil
	}
	return l.sites.cutPath(stop.Seq), nil
}

// sitesFailed records that a stop has no per-site snapshot.
func (b *Backend) sitesFailed(stop *runjson.Stop, err error) {
	b.cfg.Event(runjson.Event{Kind: runjson.EventSitesFailed, Message: fmt.Sprintf(
		"breakpoint %q hit %d: the per-site snapshot could not be taken (%v); this stop records the native figures only", stop.Breakpoint, stop.Hit, err)})
}

// Read makes the stop's memory diffs: between this hit and the
// breakpoint's previous one, and within an around_call's call.
func (b *Backend) Read(st *backend.Stop) error {
	b.an.add(st)
	b.phases.add(st)
	// A stop whose stream was cut has the path its snapshot goes to.
	if !b.sitesOn || st.Raw == "" {
		return nil
	}
	l := b.launch
	ctx, cancel := context.WithTimeout(context.Background(), l.env.Times.Stop)
	defer cancel()
	path, err := l.sites.take(ctx, st.Stop.Seq)
	if err == nil {
		st.Raw, err = b.perSite.Stage(path, st.Stop)
	}
	if err != nil {
		st.Raw = ""
		b.sitesFailed(st.Stop, err)
		return nil
	}
	// The stop's heap figure stays glibc's in-use heap, which the
	// verdicts read, not the bytes requested that the snapshot counts.
	heap := st.Stop.HeapBytes
	err = b.perSite.Read(st)
	st.Stop.HeapBytes, st.Stop.HeapExtraBytes, st.Stop.StacksBytes = heap, 0, 0
	return err
}

// Findings ends the analysis: a verdict for every breakpoint with at
// least two hit-phase stops, and with native.sites the sites' suspects
// and diffs.
func (b *Backend) Findings(title string) *backend.Findings {
	var order []string
	for _, bp := range b.cfg.Plan.Breakpoints {
		order = append(order, bp.Name)
	}
	verdicts := b.an.verdicts(b.trim)
	if !b.sitesOn {
		return &backend.Findings{
			Report:   emptyReport(title, order),
			Suspects: []snapshots.Suspect{},
			Stacks:   [][]snapshots.Frame{},
			Verdicts: verdicts,
			Phases:   b.phases.list(),
		}
	}
	for i := range verdicts {
		verdicts[i].Sentence = strings.Replace(verdicts[i].Sentence, rerunMassif, sitesBelow, 1)
	}
	f := b.perSite.Findings(title)
	f.Verdicts = verdicts
	f.Phases = b.phases.list()
	if b.launch != nil && b.launch.sites != nil {
		for _, m := range b.launch.sites.rec.Modules().Named() {
			f.Modules = append(f.Modules, runjson.Module{Path: m[0], BuildID: m[1]})
		}
	}
	return f
}

// Gate applies report.fail_on to in-use heap growth: growth_per_hit and
// total_growth limit each breakpoint's.
// With sites, the limits apply to each site, as under massif.
func (b *Backend) Gate(limits plan.FailOn, f *backend.Findings) error {
	if b.sitesOn {
		return b.perSite.Gate(limits, f)
	}
	return nativeGate(limits, f.Verdicts)
}

// Growth is the flame graph of what grew between two kept per-site
// snapshots; nil without sites, which keeps no measurement files.
func (b *Backend) Growth(first, last string) *snapshots.FlameNode {
	return b.perSite.Growth(first, last)
}
