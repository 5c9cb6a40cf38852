package sites

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// treeSum identifies a snapshot file's allocation trees: a hash of the file
// without its time= lines (see treeHash). Summing a file costs a few per
// cent of parsing it, and spares the parse of a snapshot that did not
// change.
type treeSum [16]byte

// lastSnapshot is the last snapshot read of a breakpoint in one phase.
type lastSnapshot struct {
	// seq is the stop whose file holds the tree: that snapshot's own, or
	// under keep_snapshots: changed the last one kept.
	seq  int
	tree treeSum
	// The totals, for a stop whose snapshot is not parsed again.
	heap, extra, stacks int64
}

// readTree sums the tree of the stop's snapshot file, read from f, and
// decides from it what reading the snapshot takes (see decide).
func (s *Sites) readTree(st *backend.Stop, f io.Reader) (parse, keep bool, err error) {
	sum := newTreeHash()
	if _, err := io.Copy(sum, f); err != nil {
		return false, false, err
	}
	parse, keep = s.decide(st, sum.sum())
	return parse, keep, nil
}

// decide keeps tree, the sum of the stop's snapshot, in its state and
// decides from it what reading the snapshot takes: parse reports whether
// it must be parsed, keep whether its file is kept (see readSnapshot). A
// hit whose tree equals the previous hit's of the same breakpoint is not
// parsed (the series counts it with AddSame), nor under keep_snapshots:
// changed a return whose tree equals its own hit's (see sameCall); but an
// around_call hit is, since its return is diffed against it. Under
// keep_snapshots: changed, a file whose tree equals the last one of its
// breakpoint and phase is not kept.
func (s *Sites) decide(st *backend.Stop, tree treeSum) (parse, keep bool) {
	t := own(st)
	t.tree = tree
	last := s.lastOf(st.Stop)
	same := last.seq != 0 && last.tree == t.tree
	switch st.Stop.Phase {
	case runjson.PhaseHit:
		parse = !same || st.Breakpoint.AroundCall
	default:
		parse = !sameCall(st)
	}
	keep = !same || st.Breakpoint.KeepSnapshots != plan.KeepChanged
	return parse, keep
}

// parseSnapshot reads the stop's snapshot file f (at t.raw) and, with
// keep, compresses it into path (its unlisted name, see unlistedPath) in
// the same pass (keepSnapshot); without, removes it.
func (s *Sites) parseSnapshot(st *backend.Stop, f *os.File, path string, keep bool) (*snapshots.HeapTree, error) {
	var snap *snapshots.HeapTree
	var readErr error
	read := func(r io.Reader) error {
		snap, readErr = snapshots.ReadHeapTree(r, filepath.Join(s.cfg.Dir, st.Stop.Snapshot), s.frameTable())
		return readErr
	}
	var err error
	if keep {
		err = keepSnapshot(f, st.Raw, path, read)
	} else if err = read(f); err == nil {
		err = os.Remove(st.Raw)
	}
	switch {
	case readErr != nil:
		return nil, fmt.Errorf("reading snapshot: %w", readErr)
	case err != nil:
		return nil, fmt.Errorf("keeping snapshot %s: %w", st.Stop.Snapshot, err)
	}
	return snap, nil
}

// openFile opens path as os.OpenFile does, without the runtime's poller:
// os.OpenFile puts a regular file in non-blocking mode, offers it to
// epoll, which refuses it, and puts it back in blocking mode on Close,
// four system calls for nothing, and a stop opens its snapshot file. A
// file it creates has os.Create's permissions.
func openFile(path string, flag int) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, 0o666)
		switch {
		case err == nil:
			return os.NewFile(uintptr(fd), path), nil
		case err != syscall.EINTR:
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

// treeHash hashes a massif file as it is written to it, but for its time=
// lines (an xtmemory file has one per event), the only lines that differ
// between two snapshots of the same heap in one run. It is two seeded
// maphashes, 128 bits: the sum only tells apart the snapshots of one run,
// which no adversary picks, and it costs a fraction of SHA-256, which
// made a tenth of snapctl's own CPU per stop on big heaps.
type treeHash struct {
	h [2]maphash.Hash
	// midLine is set when the last byte written did not end a line.
	midLine bool
	// inTime is set while the rest of a time= line is being dropped.
	inTime bool
	// partial is the start of a line, shorter than "time=" and a prefix
	// of it, held back until the next Write tells.
	partial []byte
}

// treeSeeds seed every treeHash of a process, so that two sums of a run
// compare.
var treeSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

var timePrefix = []byte("time=")

func newTreeHash() *treeHash {
	t := &treeHash{}
	t.h[0].SetSeed(treeSeeds[0])
	t.h[1].SetSeed(treeSeeds[1])
	return t
}

func (t *treeHash) add(p []byte) {
	t.h[0].Write(p)
	t.h[1].Write(p)
}

// Write hashes p, dropping every line that starts with "time=". p may
// start and end anywhere in a line.
func (t *treeHash) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		switch {
		case t.inTime:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				return n, nil
			}
			t.inTime, p = false, p[i+1:]
		case !t.midLine:
			// A line starts at p, after what partial held back.
			k := min(len(timePrefix)-len(t.partial), len(p))
			head := append(t.partial, p[:k]...)
			switch {
			case bytes.Equal(head, timePrefix):
				t.partial, t.inTime, p = head[:0], true, p[k:]
			case bytes.HasPrefix(timePrefix, head):
				// All of p, and still maybe time=.
				t.partial = head
				return n, nil
			default:
				t.add(t.partial)
				t.partial, t.midLine = head[:0], true
			}
		default:
			// p continues a line that is not a time= line.
			if i := bytes.Index(p, []byte("\ntime=")); i >= 0 {
				t.add(p[:i+1])
				p, t.midLine = p[i+1:], false
				continue
			}
			i := bytes.LastIndexByte(p, '\n')
			if i < 0 {
				t.add(p)
				return n, nil
			}
			t.add(p[:i+1])
			// The last line of p may yet be a time= line.
			p, t.midLine = p[i+1:], false
		}
	}
	return n, nil
}

func (t *treeHash) sum() treeSum {
	t.add(t.partial) // a last line too short to be time=
	var sum treeSum
	binary.LittleEndian.PutUint64(sum[:8], t.h[0].Sum64())
	binary.LittleEndian.PutUint64(sum[8:], t.h[1].Sum64())
	return sum
}

// remember records the stop just read as the last of its breakpoint and
// phase, or, under keep_snapshots: changed when its file was not kept,
// names the stop whose file holds the same tree (run.json "snapshot": ""
// and "same_as_seq", which the run counts as unchanged). Its totals stay
// in the stop.
func (s *Sites) remember(st *backend.Stop, kept bool) {
	t, stop := own(st), st.Stop
	last := &s.lastRef(stop)[phaseIndex(stop.Phase)]
	if !kept {
		t.same = true
		stop.Snapshot, stop.SameAsSeq = "", last.seq
		return
	}
	*last = lastSnapshot{seq: stop.Seq, tree: t.tree,
		heap: stop.HeapBytes, extra: stop.HeapExtraBytes, stacks: stop.StacksBytes}
}

// phaseIndex indexes Sites.last: 0 for the hit phase, 1 for the return.
func phaseIndex(phase string) int {
	if phase == runjson.PhaseReturn {
		return 1
	}
	return 0
}

// sameCall reports whether the return-phase stop t is known to have the
// same tree as its hit under keep_snapshots: changed, so that their
// within-call diff is empty and not kept (run.json keeps every diff of
// the default keep_snapshots: all, empty ones too).
func sameCall(st *backend.Stop) bool {
	return st.Breakpoint.KeepSnapshots == plan.KeepChanged && st.HitOf != nil && own(st).tree == own(st.HitOf).tree
}
