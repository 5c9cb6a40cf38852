package driver

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// treeSum identifies a snapshot file's allocation trees: a hash of the file
// without its time= lines (see treeHash).
type treeSum [sha256.Size]byte

// keptSnapshot is the last kept snapshot of a breakpoint in one phase.
type keptSnapshot struct {
	seq  int
	tree treeSum
}

// keepSnapshot compresses the stop's snapshot into path and parses it in
// the same pass. Under keep_snapshots: changed it also sums the file's
// tree into t.tree.
func (s *session) keepSnapshot(t *taken, path string) (*snapshots.Snapshot, error) {
	var snap *snapshots.Snapshot
	var sum *treeHash
	var readErr error
	err := keepSnapshot(t.raw, path, func(r io.Reader) error {
		if t.bp.bp.KeepSnapshots == breakpoints.KeepChanged {
			sum = newTreeHash()
			r = io.TeeReader(r, sum)
		}
		snap, readErr = snapshots.ReadHeap(r, path)
		if readErr == nil && sum != nil {
			// ReadHeap stops after the last tree; the sum covers
			// the whole file.
			_, readErr = io.Copy(io.Discard, r)
		}
		return readErr
	})
	switch {
	case readErr != nil:
		return nil, fmt.Errorf("reading snapshot: %w", readErr)
	case err != nil:
		return nil, fmt.Errorf("keeping snapshot %s: %w", t.stop.Snapshot, err)
	}
	if sum != nil {
		t.tree = sum.sum()
	}
	return snap, nil
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

// dropUnchanged applies keep_snapshots: changed to a stop whose snapshot
// was just read: when its tree equals the last kept snapshot of the same
// breakpoint and phase, the file is removed and the stop names the stop
// whose file holds the same tree (run.json "snapshot": "" and
// "same_as_seq"). Its totals stay in the stop.
func (s *session) dropUnchanged(t *taken, path string) {
	if t.bp.bp.KeepSnapshots != breakpoints.KeepChanged {
		return
	}
	last := &t.bp.kept[0]
	if t.stop.Phase == phaseReturn {
		last = &t.bp.kept[1]
	}
	if last.seq == 0 || last.tree != t.tree {
		*last = keptSnapshot{seq: t.stop.Seq, tree: t.tree}
		return
	}
	if err := os.Remove(path); err != nil {
		// The file stays; the stop still names it.
		return
	}
	t.same = true
	t.stop.Snapshot, t.stop.SameAsSeq = "", last.seq
	t.bp.sum.Unchanged++
}

// sameCall reports whether the return-phase stop t is known to have the
// same tree as its hit, so that their within-call diff is empty and not
// kept.
func sameCall(t *taken) bool {
	return t.bp.bp.KeepSnapshots == breakpoints.KeepChanged && t.hitOf != nil && t.tree == t.hitOf.tree
}
