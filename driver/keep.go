package driver

import (
	"bytes"
	"crypto/sha256"
	"os"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// treeSum identifies a snapshot file's allocation trees: a hash of the file
// without its time= lines, the only lines that differ between two
// snapshots of the same heap in one run.
type treeSum [sha256.Size]byte

// keptSnapshot is the last kept snapshot of a breakpoint in one phase.
type keptSnapshot struct {
	seq  int
	tree treeSum
}

// parseSnapshot reads a kept snapshot file. Under keep_snapshots: changed
// it also sums the file's tree into t.tree.
func (s *session) parseSnapshot(t *taken, path string) (*snapshots.Snapshot, error) {
	if t.bp.bp.KeepSnapshots != breakpoints.KeepChanged {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return snapshots.ReadHeap(f, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t.tree = sumTree(data)
	return snapshots.ReadHeap(bytes.NewReader(data), path)
}

// sumTree hashes a massif file but for its time= lines (an xtmemory file
// has one per event).
func sumTree(data []byte) treeSum {
	h := sha256.New()
	rest := data
	for {
		i := bytes.Index(rest, []byte("\ntime="))
		if i < 0 {
			break
		}
		h.Write(rest[:i+1])
		rest = rest[i+1:]
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[j+1:]
		} else {
			rest = nil
		}
	}
	h.Write(rest)
	var sum treeSum
	h.Sum(sum[:0])
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
