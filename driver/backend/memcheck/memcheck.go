// Package memcheck measures a run's heap with valgrind's memcheck, which
// gdb reaches through vgdb: at each stop the heap per allocation call
// site, as massif gives it (`monitor xtmemory`, read by package sites),
// and memcheck's leak search of it (`monitor leak_check full reachable
// any`): how each site's blocks stand (definitely, indirectly, possibly
// lost, still reachable) and, for reachable blocks that grew, what holds
// them (`who_points_at`, walked back to a root). The measurement is a
// gdb command of this package's memcheck.py.
package memcheck

import (
	"context"
	_ "embed"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/driver/backend/valgrind"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Name is the plan's and run.json's "backend".
const Name = "memcheck"

// Traits: valgrind starts the program, with its allocator preloaded;
// every stop has its call sites, and tells lost blocks from reachable
// ones.
var Traits = backend.Traits{Sites: true, Preloads: true, Lost: true, Unit: "snapshot"}

// The measurement: memcheck.py's command, which writes the xtmemory file
// at its argument and the leak search next to it (leakExt).
const (
	command = "snapctl-memcheck"
	ext     = ".ms"
	leakExt = ".leak"
	// keptLeakExt ends a kept leak search's name in snapshots/.
	keptLeakExt = ".leak.json"
)

//go:embed memcheck.py
var script string

// Python is memcheck's part of gdb's Python, which gdb reads once
// connected (memcheck.py: the command that measures a stop).
var Python = []gdb.Script{{Name: "memcheck.py", Source: script}}

// Tools are the executables memcheck runs besides gdb: valgrind and vgdb.
var Tools = valgrind.Tools

// RunFiles are the files a memcheck run writes in the run directory
// besides run.json and the reports: valgrind's log, the kept snapshots
// and leak searches, and the staged ones.
var RunFiles = []string{valgrind.Log,
	filepath.Join(backend.SnapshotDir, "*.massif"), filepath.Join(backend.SnapshotDir, "*.massif.gz"), filepath.Join(backend.SnapshotDir, ".*"+ext),
	filepath.Join(backend.SnapshotDir, "*"+keptLeakExt), filepath.Join(backend.SnapshotDir, ".*"+leakExt)}

// Backend takes memcheck.py's measurement at each stop: the snapshot,
// which package sites keeps and reads, and the leak search (leak.go).
type Backend struct {
	cfg   backend.Config
	sites *sites.Sites
	leaks *leaks
}

// New returns the memcheck backend of a run.
func New(cfg backend.Config) backend.Backend {
	return &Backend{cfg: cfg, sites: sites.New(cfg, sites.Options{Program: cfg.Binary}), leaks: newLeaks()}
}

func (*Backend) Name() string               { return Name }
func (*Backend) Tool() string               { return "valgrind" }
func (*Backend) Traits() backend.Traits     { return Traits }
func (*Backend) Command(path string) string { return command + " " + path }
func (*Backend) Ext() string                { return ext }

// Failure: memcheck.py's command prints nothing when it succeeds, and
// fails with what valgrind said otherwise.
func (*Backend) Failure(out string) string { return strings.TrimSpace(out) }

// AgentMeasure is the measurement as agent.py takes a massif snapshot:
// its command and file, and a line that no output of a successful
// command holds.
func (*Backend) AgentMeasure() string {
	return backend.PyDict("kind", Name, "monitor", command, "ext", ext, "report", "xtree memory report: ")
}

// Stage moves the stop's snapshot and leak search into the run
// directory as soon as the stop is numbered.
func (b *Backend) Stage(m backend.Measurement, stop *runjson.Stop) (string, error) {
	staged := filepath.Join(b.cfg.Dir, backend.SnapshotDir, fmt.Sprintf(".%04d%s", stop.Seq, leakExt))
	if err := backend.MoveFile(m.Path+leakExt, staged); err != nil {
		return "", fmt.Errorf("keeping the leak search of stop %d: %w", stop.Seq, err)
	}
	b.leaks.stage(stop.Seq, staged)
	return b.sites.Stage(m.Path, stop)
}

// Read reads a stop's snapshot into the sites' analysis and its leak
// search into the standing of each site.
func (b *Backend) Read(st *backend.Stop) error {
	if err := b.sites.Read(st); err != nil {
		return err
	}
	return b.leaks.read(b.cfg.Dir, st)
}

// Findings are the sites' suspects, each with how its blocks stand.
func (b *Backend) Findings(title string) *backend.Findings {
	f := b.sites.Findings(title)
	b.leaks.annotate(f.Suspects)
	if f.Report != nil && len(f.Report.Suspects) > 0 {
		b.leaks.annotate(f.Report.Suspects)
	}
	return f
}

// Gate applies the plan's report.fail_on limits: the sites' growth, and
// lost_per_hit to the bytes each suspect loses per hit.
func (b *Backend) Gate(limits plan.FailOn, f *backend.Findings) error {
	err := b.sites.Gate(limits, f)
	if limits.LostPerHit <= 0 {
		return err
	}
	var over []string
	for _, s := range f.Suspects {
		if s.Memcheck != nil && s.Memcheck.LostPerHit() > limits.LostPerHit {
			over = append(over, fmt.Sprintf("%s %s lost per hit at breakpoint %q", snapshots.ShortFrame(s.Frame),
				snapshots.FormatDelta(s.Memcheck.LostPerHit()), s.Breakpoint))
		}
	}
	if over == nil {
		return err
	}
	le, ok := err.(*backend.LeakError)
	if !ok {
		le = &backend.LeakError{GrowthPerHit: limits.GrowthPerHit, TotalGrowth: limits.TotalGrowth}
	}
	le.LostPerHit = limits.LostPerHit
	le.Suspects = append(le.Suspects, over...)
	return le
}

// Growth is the flame graph of what grew between two kept snapshots.
func (b *Backend) Growth(first, last string) *snapshots.FlameNode { return b.sites.Growth(first, last) }

// NewLauncher returns the launcher of a memcheck run whose run directory
// is dir: valgrind's memcheck with its gdbserver (package valgrind).
func NewLauncher(p *plan.Plan, dir string) *valgrind.Launch {
	// The sites and the holders' chains come from the allocation stacks
	// memcheck records: as deep as massif's (its --depth, 30 by
	// default), where memcheck keeps 12 frames.
	depth := p.Valgrind.Depth
	if depth <= 0 {
		depth = 30
	}
	args := []string{"--num-callers=" + strconv.Itoa(depth)}
	return valgrind.NewLauncher(p, dir, valgrind.Options{Tool: Name, Args: args, Connected: connected})
}

// connected readies gdb for memcheck's stops: gdb reads memcheck.py,
// whose command takes the measurement. (The valgrind launcher has
// already raised the gdbserver's error limit, so memcheck's errors do
// not stop the program: fact 106.)
func connected(ctx context.Context, c *gdb.Conn, env *backend.Env) error {
	// Read as the agent is (gdb.WriteScripts): compiled once into the
	// user's cache, and Python's own words when it cannot be read, where
	// gdb's source command says nothing of a script that raises.
	read, err := gdb.WriteScripts(env.Private, Name, Python)
	if err != nil {
		return env.Run.DiskFull(fmt.Errorf("writing memcheck.py: %w", err))
	}
	r, err := c.Do(ctx, gdb.Console(gdb.PythonTry(read)))
	if err != nil {
		return &backend.ToolError{Tool: "gdb", Msg: "cannot read memcheck.py: the memcheck backend needs gdb with Python (Debian's gdb has it)", Err: err}
	}
	if why := gdb.LoadFailure(r); why != "" {
		return &backend.ToolError{Tool: "gdb", Msg: "its Python cannot load memcheck.py: " + why}
	}
	return nil
}
