// Package massif measures a run's heap with valgrind's massif, which gdb
// reaches through vgdb: a snapshot of the heap per allocation call site at
// each stop, read into between-hits and within-call diffs and suspects.
package massif

import (
	"sync"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Name is the plan's and run.json's "backend".
const Name = "massif"

// Backend takes a snapshot at each stop (heapsnap.go): the heap per
// allocation call site, with its live blocks unless bytesOnly (the plan's
// valgrind.blocks: false), which package sites keeps and reads.
type Backend struct {
	cfg       backend.Config
	bytesOnly bool
	// sites keeps the snapshots and reads them into the analysis.
	sites *sites.Sites
	// inline qualifies the bare names valgrind gives inlined C++ frames;
	// read once (inlined).
	inline     *inlineNames
	inlineOnce sync.Once
}

// New returns the massif backend of a run.
func New(cfg backend.Config) backend.Backend {
	b := &Backend{cfg: cfg, bytesOnly: !cfg.Plan.Valgrind.Blocks}
	// The xtmemory snapshots keep the frames of the wrappers massif's
	// --alloc-fn names.
	b.sites = sites.New(cfg, sites.Options{AllocFns: cfg.Plan.Valgrind.AllocFns, Qualify: b.qualify, Program: cfg.Binary})
	return b
}

func (*Backend) Name() string { return Name }
func (*Backend) Tool() string { return "valgrind" }

// Traits: valgrind starts the program, with its allocator preloaded, and
// every stop has its call sites.
var Traits = backend.Traits{Sites: true, Preloads: true, Unit: "snapshot"}

func (*Backend) Traits() backend.Traits { return Traits }

func (b *Backend) Command(path string) string { return b.monitor() + " " + path }
func (*Backend) Ext() string                  { return snapshotExt }
func (*Backend) Failure(out string) string    { return snapshotFailure(out) }

// monitor is the snapshot's monitor command, before its file.
func (b *Backend) monitor() string {
	if b.bytesOnly {
		return bytesMonitor
	}
	return snapshotMonitor
}

func (b *Backend) AgentMeasure() string {
	return AgentMeasure(b.monitor())
}

// AgentMeasure is the measurement that agent.py's Agent takes with the
// snapshot command monitor.
func AgentMeasure(monitor string) string {
	return backend.PyDict("kind", Name, "monitor", monitor, "ext", snapshotExt, "report", xtreeReport)
}

// DefaultAgentMeasure is the measurement of a plan with valgrind's
// defaults.
func DefaultAgentMeasure() string { return AgentMeasure(snapshotMonitor) }

// Stage moves the snapshot massif wrote in the private directory into
// the run directory (sites.Sites.Stage) and returns the staging path.
func (b *Backend) Stage(m backend.Measurement, stop *runjson.Stop) (string, error) {
	return b.sites.Stage(m.Path, stop)
}

// Read reads a stop's snapshot and feeds the analysis (sites.Sites.Read).
func (b *Backend) Read(st *backend.Stop) error { return b.sites.Read(st) }

// Findings ends the analysis: no snapshot can be read after it.
func (b *Backend) Findings(title string) *backend.Findings { return b.sites.Findings(title) }

// Gate applies the plan's report.fail_on limits to the suspects.
func (b *Backend) Gate(limits plan.FailOn, f *backend.Findings) error {
	return b.sites.Gate(limits, f)
}

// Growth is the flame graph of what grew between two kept snapshots of a
// breakpoint.
func (b *Backend) Growth(first, last string) *snapshots.FlameNode {
	return b.sites.Growth(first, last)
}
