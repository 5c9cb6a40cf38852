package driver

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// treeSum identifies a snapshot file's allocation trees: a hash of the file
// without its time= lines (see treeHash). Summing a file costs a few per
// cent of parsing it, and spares the parse of a snapshot that did not
// change.
type treeSum [sha256.Size]byte

// lastSnapshot is the last snapshot read of a breakpoint in one phase.
type lastSnapshot struct {
	// seq is the stop whose file holds the tree: that snapshot's own, or
	// under keep_snapshots: changed the last one kept.
	seq  int
	tree treeSum
	// The totals, for a stop whose snapshot is not parsed again.
	heap, extra, stacks int64
}

// readTree sums the tree of the stop's snapshot file, read from f, into
// t.tree, and decides from it what reading the snapshot takes: parse
// reports whether it must be parsed, keep whether its file is kept (see
// readSnapshot). A hit whose tree equals the previous hit's of the same
// breakpoint is not parsed (the series counts it with AddSame), nor under
// keep_snapshots: changed a return whose tree equals its own hit's (see
// sameCall); but an around_call hit is, since its return is diffed
// against it. Under keep_snapshots: changed, a file whose tree equals the
// last one of its breakpoint and phase is not kept.
func (s *session) readTree(t *taken, f io.Reader) (parse, keep bool, err error) {
	sum := newTreeHash()
	if _, err := io.Copy(sum, f); err != nil {
		return false, false, err
	}
	t.tree = sum.sum()
	last := t.bp.last[phaseIndex(t.stop.Phase)]
	same := last.seq != 0 && last.tree == t.tree
	switch t.stop.Phase {
	case phaseHit:
		parse = !same || t.bp.bp.AroundCall
	default:
		parse = !sameCall(t)
	}
	keep = !same || t.bp.bp.KeepSnapshots != breakpoints.KeepChanged
	return parse, keep, nil
}

// parseSnapshot reads the stop's snapshot file f (at t.raw) and, with
// keep, compresses it into path (its unlisted name, see unlistedPath) in
// the same pass (keepSnapshot); without, removes it.
func (s *session) parseSnapshot(t *taken, f *os.File, path string, keep bool) (*snapshots.HeapTree, error) {
	var snap *snapshots.HeapTree
	var readErr error
	read := func(r io.Reader) error {
		snap, readErr = snapshots.ReadHeapTree(r, filepath.Join(s.dir, t.stop.Snapshot), s.frameTable())
		return readErr
	}
	var err error
	if keep {
		err = keepSnapshot(f, t.raw, path, read)
	} else if err = read(f); err == nil {
		err = os.Remove(t.raw)
	}
	switch {
	case readErr != nil:
		return nil, fmt.Errorf("reading snapshot: %w", readErr)
	case err != nil:
		return nil, fmt.Errorf("keeping snapshot %s: %w", t.stop.Snapshot, err)
	}
	return snap, nil
}

// openFile opens path as os.OpenFile does, without the runtime's poller:
// os.OpenFile puts a regular file in non-blocking mode, offers it to
// epoll, which refuses it, and puts it back in blocking mode on Close,
// four system calls for nothing, and a stop opens its snapshot file.
func openFile(path string, flag int) (*os.File, error) {
	for {
		fd, err := syscall.Open(path, flag|syscall.O_CLOEXEC, 0)
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
// between two snapshots of the same heap in one run.
type treeHash struct {
	h       hash.Hash
	partial []byte // the start of a line the next Write ends
}

func newTreeHash() *treeHash { return &treeHash{h: sha256.New()} }

func (t *treeHash) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			t.partial = append(t.partial, p...)
			break
		}
		line := p[:i+1]
		if len(t.partial) > 0 {
			line = append(t.partial, line...)
			t.partial = t.partial[:0]
		}
		if !bytes.HasPrefix(line, []byte("time=")) {
			t.h.Write(line)
		}
		p = p[i+1:]
	}
	return n, nil
}

func (t *treeHash) sum() treeSum {
	if !bytes.HasPrefix(t.partial, []byte("time=")) {
		t.h.Write(t.partial)
	}
	var sum treeSum
	t.h.Sum(sum[:0])
	return sum
}

// remember records the stop just read as the last of its breakpoint and
// phase, or, under keep_snapshots: changed when its file was not kept,
// names the stop whose file holds the same tree (run.json "snapshot": ""
// and "same_as_seq"). Its totals stay in the stop.
func (s *session) remember(t *taken, kept bool) {
	last := &t.bp.last[phaseIndex(t.stop.Phase)]
	if !kept {
		t.same = true
		t.stop.Snapshot, t.stop.SameAsSeq = "", last.seq
		t.bp.sum.Unchanged++
		return
	}
	s.unlisted = append(s.unlisted, t.stop.Snapshot)
	*last = lastSnapshot{seq: t.stop.Seq, tree: t.tree,
		heap: t.stop.HeapBytes, extra: t.stop.HeapExtraBytes, stacks: t.stop.StacksBytes}
}

// phaseIndex indexes bpState.last: 0 for the hit phase, 1 for the return.
func phaseIndex(phase string) int {
	if phase == phaseReturn {
		return 1
	}
	return 0
}

// sameCall reports whether the return-phase stop t is known to have the
// same tree as its hit under keep_snapshots: changed, so that their
// within-call diff is empty and not kept (run.json keeps every diff of
// the default keep_snapshots: all, empty ones too).
func sameCall(t *taken) bool {
	return t.bp.bp.KeepSnapshots == breakpoints.KeepChanged && t.hitOf != nil && t.tree == t.hitOf.tree
}
