// Package sites keeps a run's per-site heap snapshots (xtmemory files, one
// per stop) and reads them into between-hits and within-call diffs,
// suspects and the report sections that show them, for any backend that
// writes such a snapshot at a stop (Stage, Read) or holds its tree in
// memory (ReadCut).
package sites

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Options are what a backend tells of its snapshots beyond the plan's.
type Options struct {
	// AllocFns are the allocation wrappers whose frames the snapshots
	// keep (massif's --alloc-fn), which the analysis passes through.
	AllocFns []string
	// Qualify, when set, names a frame of the snapshots: each distinct
	// frame of a run is given to it once (snapshots.FrameTable.Qualify).
	Qualify func(snapshots.Frame) string
	// Program is the program's path, whose frames are never library
	// code (a stripped binary's unnamed frames included).
	Program string
}

// Sites keeps the snapshot of each stop in the run directory and reads
// it into the analysis.
type Sites struct {
	cfg     backend.Config
	qualify func(snapshots.Frame) string
	an      *analysis
	// last are the last snapshots read of each breakpoint's hit and
	// return phases (see phaseIndex), by breakpoint.
	last map[string]*[2]lastSnapshot
	// frames numbers the frames of every snapshot of the run (frameTable).
	frames *snapshots.FrameTable
}

// New returns the snapshots of a run: cfg's plan gives the report's
// options and the breakpoints' keep_snapshots, cfg.Diffs receives the
// diffs.
func New(cfg backend.Config, o Options) *Sites {
	return &Sites{cfg: cfg, qualify: o.Qualify, an: newAnalysis(cfg.Plan, o.AllocFns, programPaths(o.Program), cfg.Diffs),
		last: make(map[string]*[2]lastSnapshot)}
}

// programPaths is the program's path as given and with its symbolic links
// resolved: snapshots name it either way.
func programPaths(p string) []string {
	if p == "" {
		return nil
	}
	out := []string{p}
	if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
		out = append(out, r)
	}
	return out
}

// Stage moves the snapshot file at path, written at stop in the private
// directory (in TMPDIR), into the run directory under a staging name,
// snapshots/.SEQ.ms, as soon as its stop is numbered, so that TMPDIR
// holds no more than the snapshot being written, and names the stop's
// snapshot; Read compresses it under that name later (keepSnapshot). It
// returns the staging path, the stop's Raw.
func (s *Sites) Stage(path string, stop *runjson.Stop) (string, error) {
	stop.Snapshot = SnapshotName(stop.Seq, stop.Breakpoint, stop.Hit, stop.Phase)
	staged := filepath.Join(s.cfg.Dir, backend.SnapshotDir, fmt.Sprintf(".%04d%s", stop.Seq, stagedExt))
	if err := backend.MoveFile(path, staged); err != nil {
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

// snapshotKeptExt ends the name of a kept snapshot: massif's format,
// gzipped.
const snapshotKeptExt = ".massif.gz"

// stagedExt ends the staging name of a snapshot.
const stagedExt = ".ms"

// stopState is what Sites keeps of a stop it read, in its Own.
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

// Read reads a stop's snapshot, staged at st.Raw, and feeds the analysis: between-hits
// diffs, and around_call's within-call diff once the return's snapshot
// is read.
func (s *Sites) Read(st *backend.Stop) error {
	snap, err := s.readSnapshot(st)
	if err != nil {
		return err
	}
	s.analyse(st, snap)
	return nil
}

// ReadCut is Stage and Read for a stop whose heap per site the backend
// holds in memory (native.sites: heaptrack's replay) rather than in a
// file: tree makes the analysis's tree of it, and write writes it in
// massif's format, the file the run directory keeps, whose text also
// tells a tree that did not change (see readTree). Nothing is parsed back.
func (s *Sites) ReadCut(st *backend.Stop, tree func(*snapshots.FrameTable) (*snapshots.HeapTree, error), write func(io.Writer) error) error {
	snap, err := s.readCut(st, tree, write)
	if err != nil {
		return err
	}
	s.analyse(st, snap)
	return nil
}

// analyse feeds the analysis with a stop's snapshot, nil when it was not
// parsed (the same tree as its breakpoint's last).
func (s *Sites) analyse(st *backend.Stop, snap *snapshots.HeapTree) {
	t := own(st)
	stop := st.Stop
	if st.HitOf == nil && snap == nil {
		// The same tree as the previous hit's: not parsed again.
		s.an.addSameHit(stop.Breakpoint, stop.Seq, stop.Hit, t.same)
		return
	}
	if st.HitOf == nil {
		s.an.addHit(stop.Breakpoint, stop.Seq, stop.Hit, snap, t.same)
		if st.Breakpoint.AroundCall {
			t.snap = snap
		}
		return
	}
	if hit := own(st.HitOf); hit.snap != nil && !sameCall(st) {
		s.an.addReturn(stop.Breakpoint, st.HitOf.Stop.Seq, hit.snap, stop.Seq, snap)
		hit.snap = nil
	}
}

// readSnapshot keeps a stop's snapshot in the run directory, parsing it on
// the way unless its tree is known (see readTree), and fills the stop's
// totals. The snapshot is nil when it was not parsed.
func (s *Sites) readSnapshot(st *backend.Stop) (*snapshots.HeapTree, error) {
	stop := st.Stop
	path := backend.UnlistedPath(s.cfg.Dir, stop.Snapshot)
	f, err := openFile(st.Raw, os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
	}
	defer f.Close()
	parse, keep, err := s.readTree(st, f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
	}
	var snap *snapshots.HeapTree
	switch {
	case parse:
		if snap, err = s.parseSnapshot(st, f, path, keep); err != nil {
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
		s.sameTotals(st)
	}
	s.remember(st, keep)
	return snap, nil
}

// readCut is readSnapshot for ReadCut: the file is written, compressed,
// from the tree, only when it is kept, and the tree is made without
// reading it.
func (s *Sites) readCut(st *backend.Stop, tree func(*snapshots.FrameTable) (*snapshots.HeapTree, error), write func(io.Writer) error) (*snapshots.HeapTree, error) {
	stop := st.Stop
	stop.Snapshot = SnapshotName(stop.Seq, stop.Breakpoint, stop.Hit, stop.Phase)
	buf := getGzipBuffer()
	defer putGzipBuffer(buf)
	buf.Reset()
	zw := getGzipWriter()
	defer putGzipWriter(zw)
	zw.Reset(buf)
	sum := newTreeHash()
	// Under keep_snapshots: all every file is kept: one pass writes it
	// and sums it.
	all := st.Breakpoint.KeepSnapshots != plan.KeepChanged
	var err error
	if all {
		err = write(io.MultiWriter(sum, zw))
	} else {
		err = write(sum)
	}
	if err != nil {
		return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
	}
	parse, keep := s.decide(st, sum.sum())
	if keep {
		if !all {
			err = write(zw)
		}
		if err == nil {
			err = zw.Close()
		}
		if err == nil {
			err = writeKept(backend.UnlistedPath(s.cfg.Dir, stop.Snapshot), buf.Bytes())
		}
		if err != nil {
			return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
		}
	}
	var snap *snapshots.HeapTree
	if parse {
		if snap, err = tree(s.frameTable()); err != nil {
			return nil, fmt.Errorf("reading snapshot: %w", err)
		}
		stop.HeapBytes, stop.HeapExtraBytes, stop.StacksBytes = snap.HeapBytes, snap.HeapExtraBytes, snap.StacksBytes
	} else {
		s.sameTotals(st)
	}
	s.remember(st, keep)
	return snap, nil
}

// sameTotals gives a stop whose snapshot was not parsed, its tree the
// same as its breakpoint's last in its phase (or, for a return, as its
// hit's), the totals of that one.
func (s *Sites) sameTotals(st *backend.Stop) {
	stop := st.Stop
	from := s.lastOf(stop)
	if stop.Phase == runjson.PhaseReturn {
		h := st.HitOf.Stop
		from = lastSnapshot{heap: h.HeapBytes, extra: h.HeapExtraBytes, stacks: h.StacksBytes}
	}
	stop.HeapBytes, stop.HeapExtraBytes, stop.StacksBytes = from.heap, from.extra, from.stacks
}

// lastOf returns the last snapshot read of stop's breakpoint and phase.
func (s *Sites) lastOf(stop *runjson.Stop) lastSnapshot {
	return s.lastRef(stop)[phaseIndex(stop.Phase)]
}

func (s *Sites) lastRef(stop *runjson.Stop) *[2]lastSnapshot {
	l := s.last[stop.Breakpoint]
	if l == nil {
		l = new([2]lastSnapshot)
		s.last[stop.Breakpoint] = l
	}
	return l
}

// frameTable returns the run's frame table, which every snapshot is read
// into: each distinct frame is parsed, and named by the qualify hook,
// once per run.
func (s *Sites) frameTable() *snapshots.FrameTable {
	if s.frames == nil {
		s.frames = snapshots.NewFrameTable()
		if s.qualify != nil {
			s.frames.Qualify = s.qualify
		}
	}
	return s.frames
}
