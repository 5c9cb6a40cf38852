package snapshots

import (
	"fmt"
	"io"
)

// An xtmemory file is what valgrind's `monitor xtmemory FILE.ms` writes
// under massif run with --xtree-memory=allocs (or full): one massif-format
// snapshot per event, each a heap_tree=detailed tree whose root line names
// the event instead of the allocation functions:
//
//	n3: 96 curB : currently allocated Bytes
//	 n1: 96 0x109160: wrap (t.c:3)
//	...
//	n3: 2 curBk : currently allocated Blocks
//	 n1: 2 0x109160: wrap (t.c:3)
//
// curB is the tree a detailed snapshot gives, without the threshold
// bucket; curBk has the same frames with live block counts instead of
// bytes, its siblings ordered by their own counts. With --xtree-memory=full
// totB, totBk, totFdB and totFdBk follow. Every event's mem_heap_B is its
// root's figure; mem_heap_extra_B and mem_stacks_B are always 0, and time=
// is in milliseconds.

// The xtmemory events ReadHeap merges.
const (
	eventBytes  = "curB"
	eventBlocks = "curBk"
)

// ReadHeap reads the heap snapshot of one stop from r, one snapshot at a
// time: from an xtmemory file, the curB tree with the live block counts of
// the curBk tree merged into its nodes (Snapshot.Blocks set); from any other
// massif file (a `monitor detailed_snapshot` file), its first detailed
// snapshot. Errors are *FormatError with the line, or read errors.
func ReadHeap(r io.Reader, name string) (*Snapshot, error) {
	rd := NewReader(r, name, ReadOptions{})
	var heap *Snapshot
	for {
		s, err := rd.Next()
		if err == io.EOF {
			if heap != nil {
				return heap, nil
			}
			return nil, &FormatError{File: name, Line: rd.line + 1, Msg: "expected a detailed snapshot, got end of file"}
		}
		if err != nil {
			return nil, err
		}
		switch {
		case heap == nil && s.Event == eventBytes:
			heap = s
		case heap == nil && s.Event == "" && s.Kind != TreeEmpty:
			return s, nil
		case heap != nil && s.Event == eventBlocks:
			if err := mergeBlocks(heap, s, name); err != nil {
				return nil, err
			}
			return heap, nil
		}
	}
}

// mergeBlocks sets the Blocks of every node of bytes.Tree from the node
// with the same frame (address included) at the same place in blocks.Tree,
// and marks bytes as having block counts. A frame of blocks that bytes does
// not have is an error at blocks' snapshot line.
func mergeBlocks(bytes, blocks *Snapshot, name string) error {
	if bytes.Tree == nil || blocks.Tree == nil {
		return nil
	}
	if err := mergeNode(bytes.Tree, blocks.Tree); err != nil {
		return &FormatError{File: name, Line: blocks.Line, Msg: fmt.Sprintf("%s tree does not match the %s tree: %v", eventBlocks, eventBytes, err)}
	}
	bytes.Blocks = true
	return nil
}

// nodeKey identifies a child among its siblings.
type nodeKey struct {
	frame Frame
	below bool
}

func mergeNode(a, b *Node) error {
	a.Blocks = b.Bytes
	if len(b.Children) == 0 {
		return nil
	}
	find := func(k nodeKey) *Node {
		for _, c := range a.Children {
			if c != nil && c.Frame == k.frame && c.Below == k.below {
				return c
			}
		}
		return nil
	}
	if len(a.Children) > 16 {
		byKey := make(map[nodeKey]*Node, len(a.Children))
		for _, c := range a.Children {
			if c != nil {
				byKey[nodeKey{c.Frame, c.Below}] = c
			}
		}
		find = func(k nodeKey) *Node { return byKey[k] }
	}
	for _, bc := range b.Children {
		if bc == nil {
			continue
		}
		ac := find(nodeKey{bc.Frame, bc.Below})
		if ac == nil {
			if bc.Bytes == 0 {
				continue
			}
			return fmt.Errorf("%s under %s", FrameString(bc.Frame), FrameString(a.Frame))
		}
		if err := mergeNode(ac, bc); err != nil {
			return err
		}
	}
	return nil
}
