// Package native measures a run's memory with gdb alone: at each stop,
// resident memory from /proc and glibc's allocator figures, read into
// memory diffs and per-breakpoint verdicts; with native.sites, also the
// heap per call site, recorded by heaptrack.
package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Name is the plan's and run.json's "backend".
const Name = "native"

// Backend reads, at each stop, what the kernel and glibc's allocator say
// (agent/measure.py's native_memory): resident memory from /proc/PID/status, and
// glibc's mallinfo2() figures, read from its arenas in memory by snapctl
// (heapread.go) with one thread or more where libc's symbol table says
// where they are, else called while the program has one thread. No
// valgrind.
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
	// heap reads glibc's arenas for the agent (heapread.go), nil before
	// the launch and after gdb's end.
	heap *heapReader
	// allocator names the program's allocator (allocatorOf), once read
	// at the first stop.
	allocator string
	// Over the run's stops: how many were measured, how many read the
	// allocator and why the first that did not failed (not a program
	// whose allocator cannot be read, which is no failure); with sites,
	// how many got a per-site snapshot, how many did not and why, how
	// many found heaptrack recording nothing yet, and the error that
	// said the recording ended.
	stops, allocRead int
	allocFailed      string
	sitesOK, sitesNo int
	sitesEmpty       int
	sitesWhy         string
	sitesEnded       error
	// phases adds up what around_call's calls left, per breakpoint.
	phases *phases
	// quick measures stops without gdb once the agent has said where
	// to read (quick.go).
	quick quick
}

// New returns the native backend of a run.
func New(cfg backend.Config) backend.Backend {
	return &Backend{cfg: cfg, trim: cfg.Plan.Native.TrimProbe, an: newNativeAnalysis(cfg.Plan, cfg.Diffs),
		perSite: sites.New(cfg, sites.Options{AllocFns: cfg.Plan.Valgrind.AllocFns, Program: cfg.Binary}), sitesOn: cfg.Plan.Native.Sites, phases: newPhases(cfg.Plan)}
}

func (*Backend) Name() string { return Name }
func (*Backend) Tool() string { return "gdb" }

// Traits: gdb starts the program, or attaches to it; call sites are the
// plan's native.sites.
var Traits = backend.Traits{GDBStarts: true, Attaches: true, SitesOption: true, Unit: "measurement"}

func (*Backend) Traits() backend.Traits { return Traits }

// Settings are run.json's "native": the plan's native options and the
// process attached to.
func (b *Backend) Settings(m *runjson.Manifest) {
	p := b.cfg.Plan
	m.Native = &runjson.NativeSettings{TrimProbe: p.Native.TrimProbe, Sites: p.Native.Sites, AttachedPid: b.cfg.AttachPID}
}

// Command is the measurement of a stop over MI (a breakpoint with
// commands or around_call), with every thread stopped (see
// measure_native).
func (b *Backend) Command(path string) string {
	trim := "False"
	if b.trim {
		trim = "True"
	}
	if b.heap != nil {
		return gdb.PythonLine("measure_native(" + gdb.PyString(path) + ", " + trim + ", " + gdb.PyString(b.heap.name()) + ")")
	}
	return gdb.PythonLine("measure_native(" + gdb.PyString(path) + ", " + trim + ")")
}

func (*Backend) Ext() string { return ".json" }

// MeasureStopped takes the stop's measurement without gdb where it can
// (quick.go): not with native.sites or native.trim_probe, whose stops
// act in gdb, nor in a program that does not allocate with glibc, nor
// before the agent has said where to read.
func (b *Backend) MeasureStopped() []byte {
	if b.sitesOn || b.trim || b.launch == nil || b.launch.Pid() == 0 || b.allocator != "" && !isGlibc(b.allocator) {
		return nil
	}
	return b.quick.measure(b.launch.Pid())
}

// Failure is always "": measure_native's errors reach snapctl as gdb's
// ^error.
func (*Backend) Failure(string) string { return "" }

func (b *Backend) AgentMeasure() string {
	// With sites, gdb's agent cuts heaptrack's stream at every measured
	// stop, every thread stopped (agent/heaptrack.py, SiteCutter).
	if b.heap != nil {
		return backend.PyDict("kind", Name, "ext", b.Ext(), "trim", b.trim, "sites", b.cfg.Plan.Native.Sites, "heap_reader", b.heap.name())
	}
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
		Reading   *quickReading `json:"reading"`
		BySnapctl bool          `json:"by_snapctl"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return "", fmt.Errorf("reading the measurement at stop %d: %w", stop.Seq, err)
	}
	if rec.BySnapctl {
		b.quick.taken++
	} else {
		b.quick.took(rec.Reading)
	}
	m := rec.Memory
	b.stops++
	if b.allocator == "" && b.launch != nil && b.launch.env != nil {
		b.allocator = allocatorOf(programLibraries(context.Background(), b.launch.attach, b.cfg.Binary, b.launch.env.Target.Cwd, b.launch.env.Target.Env), b.cfg.Binary)
		if isJemalloc(b.allocator) && !b.sitesOn {
			// Read through mallctl() (agent/jemalloc.py, jemalloc_stats); a
			// jemalloc that does not answer is said below.
			if b.trim {
				fmt.Fprintf(b.cfg.Warn, "warning: native.trim_probe is not applied: the program allocates with %s, whose heap glibc's malloc_trim(0) does not touch\n", b.allocator)
			}
		} else if !isGlibc(b.allocator) {
			if isJemalloc(b.allocator) {
				// With sites, heaptrack's figures are the in-use heap
				// whatever the allocator: said, not warned of.
				b.cfg.Event(runjson.Event{Kind: runjson.EventNoAllocatorState, Message: fmt.Sprintf(
					"the program allocates with %s: with native.sites in-use heap is what heaptrack records, the bytes requested (without --sites snapctl reads jemalloc's own statistics)", b.allocator)})
			} else {
				next := "in-use heap is unmeasured; run with --sites for the in-use heap as heaptrack records it, whatever the allocator, or with --backend massif"
				if b.sitesOn {
					next = "in-use heap is what heaptrack records"
				}
				b.cfg.Event(runjson.Event{Kind: runjson.EventNoAllocatorState, Message: fmt.Sprintf(
					"the program allocates with %s, not glibc's allocator or jemalloc, which are the ones snapctl reads: glibc's figures are not its heap; %s", b.allocator, next)})
				fmt.Fprintf(b.cfg.Warn, "warning: the program allocates with %s, which snapctl cannot read: %s\n", b.allocator, next)
			}
		}
	}
	unread := ""
	jemalloc := isJemalloc(b.allocator) && !b.sitesOn
	switch {
	case jemalloc && m.Jemalloc != nil:
	case jemalloc && m.AllocatorError != "":
		unread = m.AllocatorError
	case jemalloc && m.BusyError != "":
		unread = m.BusyError + " (allocator-busy)"
	case jemalloc && m.CallError != "":
		unread = m.CallError
		if b.allocFailed == "" {
			b.allocFailed = m.CallError
		}
	case jemalloc:
		// The agent found no mallctl: glibc's figures, if any, are not
		// the program's heap.
		unread = fmt.Sprintf("the program allocates with %s, whose mallctl() snapctl did not find", b.allocator)
		m.HeapInUseBytes, m.HeapFreeBytes, m.MmapBytes, m.ArenaBytes, m.Arenas, m.TcacheBytes, m.TrimReleasedBytes, m.Mallinfo2 = nil, nil, nil, nil, nil, nil, nil, nil
		m.TcacheError = ""
		m.AllocatorError = unread
	case b.allocator != "" && !isGlibc(b.allocator):
		// glibc's figures, read or not, are not this program's heap.
		unread = fmt.Sprintf("the program allocates with %s, which snapctl cannot read", b.allocator)
		m.HeapInUseBytes, m.HeapFreeBytes, m.MmapBytes, m.ArenaBytes, m.Arenas, m.TcacheBytes, m.TrimReleasedBytes = nil, nil, nil, nil, nil, nil, nil
		m.CallError, m.BusyError, m.TcacheError = "", "", ""
	case m.AllocatorError != "":
		unread = "glibc's allocator cannot be read: " + m.AllocatorError
	case m.BusyError != "":
		unread = "an arena's lock was held (allocator-busy)"
	case m.CallError != "":
		unread = m.CallError
		if b.allocFailed == "" {
			b.allocFailed = m.CallError
		}
	}
	if m.HeapInUseBytes == nil {
		m.HeapUnmeasuredWhy = unread
		if unread == "" {
			m.HeapUnmeasuredWhy = "the allocator was not read"
		}
		if m.HeapUnmeasured == "" || (b.allocator != "" && !isGlibc(b.allocator)) {
			m.HeapUnmeasured = unmeasuredKind(m, b.allocator)
		}
	} else {
		b.allocRead++
	}
	if m.AllocatorError != "" && b.noAllocator == "" && jemalloc {
		b.noAllocator = m.AllocatorError
		b.cfg.Event(runjson.Event{Kind: runjson.EventNoAllocatorState, Message: fmt.Sprintf(
			"the program allocates with %s and %s; in-use heap is unmeasured: run with --sites for the in-use heap as heaptrack records it, or with --backend massif", b.allocator, m.AllocatorError)})
		fmt.Fprintf(b.cfg.Warn, "warning: the program allocates with %s and %s: in-use heap is unmeasured; run with --sites, or --backend massif\n", b.allocator, m.AllocatorError)
	}
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
	if cut.Empty {
		b.sitesEmpty++
	}
	// The cut stays in heaptrack's stream, which Read takes it from
	// (siteRecording.staged): nothing is left for the run to remove.
	return "", nil
}

// sitesFailed records that a stop has no per-site snapshot.
func (b *Backend) sitesFailed(stop *runjson.Stop, err error) {
	if l := b.launch; l != nil && strings.Contains(err.Error(), fmt.Sprintf("/proc/%d/fd/", l.pid)) && strings.Contains(err.Error(), "No such file") {
		err = fmt.Errorf("the program closed heaptrack's output descriptor, as a program that closes every descriptor it inherited does, and heaptrack records no more; its own files are untouched (%w)", err)
	}
	b.sitesNo++
	if b.sitesWhy == "" {
		b.sitesWhy = err.Error()
	}
	if errors.Is(err, heaptrack.ErrEnded) && b.sitesEnded == nil {
		b.sitesEnded = err
	}
	if stop.Memory != nil {
		stop.Memory.SitesMissing = err.Error()
	}
	b.cfg.Event(runjson.Event{Kind: runjson.EventSitesFailed, Message: fmt.Sprintf(
		"breakpoint %q hit %d: the per-site snapshot could not be taken (%v); this stop records the native figures only", stop.Breakpoint, stop.Hit, err)})
}

// Read makes the stop's memory diffs: between this hit and the
// breakpoint's previous one, and within an around_call's call.
func (b *Backend) Read(st *backend.Stop) error {
	b.phases.add(st)
	l := b.launch
	if !b.sitesOn || l == nil || l.sites == nil || !l.sites.staged(st.Stop.Seq) {
		b.an.add(st, nil)
		return nil
	}
	// The target runs meanwhile: the wait for the interpreter lasts while
	// it makes progress, and ends after stop_timeout without any.
	snap, err := l.sites.take(context.Background(), st.Stop.Seq, l.env.Times.Stop)
	if err != nil {
		b.sitesFailed(st.Stop, err)
		b.an.add(st, nil)
		return nil
	}
	b.sitesOK++
	// The stop's heap figure stays glibc's in-use heap, which the
	// verdicts read, not the bytes requested that the snapshot counts;
	// under another allocator, which snapctl cannot read, it is
	// heaptrack's.
	heap := st.Stop.HeapBytes
	// The tree goes to the analysis as it is, not through a file read
	// back; the file the run directory keeps is written from it.
	cut := heaptrack.NewCut(snap, l.sites.cmd)
	err = b.perSite.ReadCut(st, cut.HeapTree, cut.Write)
	var sitesHeap *int64
	if b.allocator != "" && !isGlibc(b.allocator) {
		h := st.Stop.HeapBytes
		sitesHeap, heap = &h, h
		if st.Stop.Memory != nil {
			st.Stop.Memory.HeapUnmeasured, st.Stop.Memory.HeapUnmeasuredWhy = "", ""
		}
	}
	st.Stop.HeapBytes, st.Stop.HeapExtraBytes, st.Stop.StacksBytes = heap, 0, 0
	b.an.add(st, sitesHeap)
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
			Report:    emptyReport(title, order),
			Suspects:  []snapshots.Suspect{},
			Stacks:    [][]snapshots.Frame{},
			Verdicts:  verdicts,
			Allocator: b.allocator,
			Phases:    b.phases.list(),

			MeasuredItself: b.quick.taken,
		}
	}
	f := b.perSite.Findings(title)
	for i := range verdicts {
		verdicts[i].Sentence = strings.Replace(verdicts[i].Sentence, rerunMassif, b.sitesSaid(verdicts[i].Figures), 1)
		agreeWithSites(&verdicts[i], f.Suspects)
	}
	f.Verdicts, f.Allocator = verdicts, b.allocator
	f.MeasuredItself = b.quick.taken
	f.Phases = b.phases.list()
	if b.launch != nil && b.launch.sites != nil {
		for _, m := range b.launch.sites.rec.Modules().Named() {
			f.Modules = append(f.Modules, runjson.Module{Path: m[0], BuildID: m[1]})
		}
	}
	return f
}

// agreeWithSites makes a --sites verdict tell the story its suspects
// tell: a call site that grew steadily between hits is a leak, whatever
// the whole heap's trend showed (other threads' work in flight at the
// stops can hide a leak from it), so the verdict is leak, and says
// which site. So is one that grew in steps that kept new blocks (64 KiB
// kept every 4th request grows in a quarter of the intervals): objects
// kept, not one buffer grown (a std::vector's capacity, whose blocks stay
// one, is not).
func agreeWithSites(v *runjson.Verdict, suspects []snapshots.Suspect) {
	var steady []snapshots.Suspect
	for _, s := range suspects {
		if s.Breakpoint == v.Breakpoint && s.GrowthPerHit > 0 && (s.Pattern == snapshots.PatternSteady || keptSteps(s)) {
			steady = append(steady, s)
		}
	}
	if len(steady) == 0 || slices.Contains(v.Findings, runjson.VerdictLeak) {
		return
	}
	fastest := steady[0]
	for _, s := range steady[1:] {
		if s.GrowthPerHit > fastest.GrowthPerHit {
			fastest = s
		}
	}
	how := "steadily"
	for _, s := range steady {
		if s.Pattern != snapshots.PatternSteady {
			how = "steadily or in steps that kept new blocks"
		}
	}
	clause := fmt.Sprintf("leak at breakpoint %s: %s grew %s between hits, the fastest %s %s per hit (the suspects below)",
		v.Breakpoint, backend.Plural(len(steady), "call site"), how, snapshots.FrameString(fastest.Frame), snapshots.FormatDelta(fastest.GrowthPerHit))
	v.Findings = append([]string{runjson.VerdictLeak}, v.Findings...)
	v.Verdict = runjson.VerdictLeak
	v.Sentence = clause + "; the whole heap's figures: " + v.Sentence
}

// keptSteps says that a stepwise suspect kept new blocks in its steps: at
// least minKeptSteps of them, and as many blocks at least, none of
// them a std::vector's buffer growing.
func keptSteps(s snapshots.Suspect) bool {
	return s.Pattern == snapshots.PatternStepwise && s.GrowingIntervals >= minKeptSteps && s.TotalBlocks != nil &&
		*s.TotalBlocks >= int64(s.GrowingIntervals) && snapshots.CapacityNote(s) == ""
}

// minKeptSteps is how many steps a stepwise suspect needs to count as a
// leak: a buffer reallocated larger a few times is not one.
const minKeptSteps = 4

// sitesSaid is where a --sites leak's sentence sends the user: the
// suspects below, from the stops that have a per-site snapshot.
func (b *Backend) sitesSaid(f runjson.VerdictFigures) string {
	switch n := f.SitesMissingStops; {
	case n == 0:
		return sitesBelow
	case n >= f.Stops:
		return fmt.Sprintf("no call sites: none of its %d stops has a per-site snapshot (%s)", f.Stops, f.SitesMissingWhy)
	default:
		return fmt.Sprintf("the call sites that grew are the suspects below, from %d of its %d stops: %d have no per-site snapshot (%s)", f.Stops-n, f.Stops, n, f.SitesMissingWhy)
	}
}

// Gate applies report.fail_on to in-use heap growth: growth_per_hit and
// total_growth limit each breakpoint's.
// With sites, the limits apply to each site, as under massif.
func (b *Backend) Gate(limits plan.FailOn, f *backend.Findings) error {
	if err := b.measured(); err != nil {
		return err
	}
	if b.sitesOn {
		return b.perSite.Gate(limits, f)
	}
	return nativeGate(limits, f.Verdicts)
}

// measured fails a run whose measurement failed: the allocator's read
// at every stop (not a program whose allocator snapctl cannot read,
// which the verdicts say), or with native.sites heaptrack's recording,
// at every stop, or from some stop on (it ended), or that recorded
// nothing at any stop (its library was never loaded).
func (b *Backend) measured() error {
	if b.stops > 0 && b.allocRead == 0 && b.allocFailed != "" {
		return &backend.ToolError{Tool: "gdb", Msg: fmt.Sprintf("glibc's allocator could not be read at any of the %d stops; nothing of the heap was measured", b.stops),
			Err: errors.New(b.allocFailed)}
	}
	if !b.sitesOn || b.launch == nil || b.launch.sites == nil {
		return nil
	}
	switch {
	case b.sitesOK == 0 && b.sitesNo > 0:
		return &backend.ToolError{Tool: "heaptrack", Msg: fmt.Sprintf("the per-site recording failed at all %d stops; no call site was measured", b.sitesNo),
			Err: errors.New(b.sitesWhy)}
	case b.sitesEnded != nil:
		return &backend.ToolError{Tool: "heaptrack", Msg: fmt.Sprintf("the recording ended during the run: %d of %d stops have no per-site snapshot", b.sitesNo, b.sitesNo+b.sitesOK),
			Err: b.sitesEnded}
	case b.sitesOK > 0 && b.sitesEmpty == b.sitesOK && b.launch.attach == 0:
		// Preloaded, the library records the program's start (its
		// libstdc++'s emergency pool at least); injected into a process
		// attached to, it may have nothing to record.
		return &backend.ToolError{Tool: "heaptrack", Msg: fmt.Sprintf("heaptrack's library recorded nothing at any of the %d stops: it was not loaded in the program", b.sitesOK)}
	}
	return nil
}

// Growth is the flame graph of what grew between two kept per-site
// snapshots; nil without sites, which keeps no measurement files.
func (b *Backend) Growth(first, last string) *snapshots.FlameNode {
	return b.perSite.Growth(first, last)
}

// unmeasuredKind is the event kind that says why a stop has no allocator
// figures, where the agent's record did not name one.
func unmeasuredKind(m runjson.Memory, allocator string) runjson.EventKind {
	switch {
	case m.AllocatorError != "":
		return runjson.EventNoAllocatorState
	case isJemalloc(allocator) && m.BusyError != "":
		return runjson.EventAllocatorBusy
	case isJemalloc(allocator) && m.CallError != "":
		return runjson.EventAllocatorCallFailed
	case allocator != "" && !isGlibc(allocator):
		return runjson.EventNoAllocatorState
	case m.BusyError != "":
		return runjson.EventAllocatorBusy
	}
	return runjson.EventAllocatorCallFailed
}
