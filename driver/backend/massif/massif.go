// Package massif measures a run's heap with valgrind's massif, which gdb
// reaches through vgdb: a snapshot of the heap per allocation call site at
// each stop, read into between-hits and within-call diffs and suspects.
package massif

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Name is the plan's and run.json's "backend".
const Name = "massif"

// Backend takes a snapshot at each stop (heapsnap.go): the heap per
// allocation call site, with its live blocks unless bytesOnly (the plan's
// valgrind.blocks: false).
type Backend struct {
	cfg       backend.Config
	bytesOnly bool
	an        *analysis
	// last are the last snapshots read of each breakpoint's hit and
	// return phases (see phaseIndex), by breakpoint.
	last map[string]*[2]lastSnapshot
	// inline qualifies the bare names valgrind gives inlined C++ frames;
	// read once (inlined).
	inline     *inlineNames
	inlineOnce sync.Once
	// frames numbers the frames of every snapshot of the run (frameTable).
	frames *snapshots.FrameTable
}

// New returns the massif backend of a run.
func New(cfg backend.Config) backend.Backend {
	return &Backend{cfg: cfg, bytesOnly: !cfg.Plan.Valgrind.Blocks, an: newAnalysis(cfg.Plan, cfg.Diffs),
		last: make(map[string]*[2]lastSnapshot)}
}

func (*Backend) Name() string { return Name }
func (*Backend) Tool() string { return "valgrind" }

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

// Stage moves the snapshot massif wrote in the private directory (in
// TMPDIR) into the run directory under a staging name,
// snapshots/.SEQ.ms, as soon as its stop is numbered, so that TMPDIR
// holds no more than the snapshot being written; Read compresses it
// under the stop's name later (keepSnapshot). It returns the staging
// path.
func (b *Backend) Stage(m backend.Measurement, stop *runjson.Stop) (string, error) {
	stop.Snapshot = SnapshotName(stop.Seq, stop.Breakpoint, stop.Hit, stop.Phase)
	staged := filepath.Join(b.cfg.Dir, backend.SnapshotDir, fmt.Sprintf(".%04d%s", stop.Seq, snapshotExt))
	if err := backend.MoveFile(m.Path, staged); err != nil {
		return "", fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
	}
	return staged, nil
}

// SnapshotName is the file name of a stop's snapshot inside snapshots/:
// sequence, breakpoint and hit, plus "-return" for the return phase.
// Kept snapshots are gzipped (keepSnapshot): snapctl's commands read them
// as they are; `gunzip -k` gives ms_print its plain file.
func SnapshotName(seq int, bp string, hit int, phase string) string {
	name := fmt.Sprintf("%04d-%s-%d", seq, bp, hit)
	if phase == runjson.PhaseReturn {
		name += "-return"
	}
	return filepath.Join(backend.SnapshotDir, name+snapshotKeptExt)
}

// snapshotKeptExt ends the name of a kept snapshot.
const snapshotKeptExt = ".massif.gz"

// stopState is what massif keeps of a stop it read.
type stopState struct {
	// tree and same serve keep_snapshots: changed (see keep.go).
	tree treeSum
	same bool
	// snap is a hit's snapshot, until its return is read.
	snap *snapshots.HeapTree
}

func own(st *backend.Stop) *stopState {
	if o, ok := st.Own.(*stopState); ok {
		return o
	}
	o := &stopState{}
	st.Own = o
	return o
}

// Read reads a stop's snapshot and feeds the analysis: between-hits
// diffs, and around_call's within-call diff once the return's snapshot
// is read.
func (b *Backend) Read(st *backend.Stop) error {
	snap, err := b.readSnapshot(st)
	if err != nil {
		return err
	}
	t := own(st)
	stop := st.Stop
	if st.HitOf == nil && snap == nil {
		// The same tree as the previous hit's: not parsed again.
		b.an.addSameHit(stop.Breakpoint, stop.Seq, stop.Hit, t.same)
		return nil
	}
	if st.HitOf == nil {
		b.an.addHit(stop.Breakpoint, stop.Seq, stop.Hit, snap, t.same)
		if st.Breakpoint.AroundCall {
			t.snap = snap
		}
		return nil
	}
	if hit := own(st.HitOf); hit.snap != nil && !sameCall(st) {
		b.an.addReturn(stop.Breakpoint, st.HitOf.Stop.Seq, hit.snap, stop.Seq, snap)
		hit.snap = nil
	}
	return nil
}

// readSnapshot keeps a stop's snapshot in the run directory, parsing it on
// the way unless its tree is known (see readTree), and fills the stop's
// totals. The snapshot is nil when it was not parsed.
func (b *Backend) readSnapshot(st *backend.Stop) (*snapshots.HeapTree, error) {
	stop := st.Stop
	path := backend.UnlistedPath(b.cfg.Dir, stop.Snapshot)
	f, err := openFile(st.Raw, os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
	}
	defer f.Close()
	parse, keep, err := b.readTree(st, f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
	}
	var snap *snapshots.HeapTree
	switch {
	case parse:
		if snap, err = b.parseSnapshot(st, f, path, keep); err != nil {
			return nil, err
		}
		stop.HeapBytes, stop.HeapExtraBytes, stop.StacksBytes = snap.HeapBytes, snap.HeapExtraBytes, snap.StacksBytes
	default:
		if keep {
			err = keepSnapshot(f, st.Raw, path, func(io.Reader) error { return nil })
		} else {
			err = os.Remove(st.Raw)
		}
		if err != nil {
			return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
		}
		// The same tree: the same totals.
		from := b.lastOf(stop)
		if stop.Phase == runjson.PhaseReturn {
			h := st.HitOf.Stop
			from = lastSnapshot{heap: h.HeapBytes, extra: h.HeapExtraBytes, stacks: h.StacksBytes}
		}
		stop.HeapBytes, stop.HeapExtraBytes, stop.StacksBytes = from.heap, from.extra, from.stacks
	}
	b.remember(st, keep)
	return snap, nil
}

// lastOf returns the last snapshot read of stop's breakpoint and phase.
func (b *Backend) lastOf(stop *runjson.Stop) lastSnapshot {
	return b.lastRef(stop)[phaseIndex(stop.Phase)]
}

func (b *Backend) lastRef(stop *runjson.Stop) *[2]lastSnapshot {
	l := b.last[stop.Breakpoint]
	if l == nil {
		l = new([2]lastSnapshot)
		b.last[stop.Breakpoint] = l
	}
	return l
}
