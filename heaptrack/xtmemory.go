package heaptrack

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/snapctl/snapctl/snapshots"
)

// WriteXtmemory writes a cut's snapshot in the format of valgrind's
// `monitor xtmemory` file, which snapctl keeps per stop and every reader
// takes (snapshots.ReadHeap, ReadHeapTree): a curB tree of live bytes
// and a curBk tree of live blocks with the same frames, siblings largest
// first in each (a site of 0-byte blocks has a line of 0 bytes). cmd is
// the profiled command line, for the file's cmd: line.
func WriteXtmemory(w io.Writer, s *snapshots.Snapshot, cmd string) error {
	return NewCut(s, cmd).Write(w)
}

// A Cut is a cut's snapshot as the native backend hands it on: written as
// the file the run directory keeps (Write, WriteXtmemory), and made into
// the analysis's tree without that file (HeapTree). Each frame's line
// text is made once for all of them.
type Cut struct {
	s     *snapshots.Snapshot
	cmd   string
	texts map[*snapshots.Node]string
}

// NewCut returns the cut of snapshot s of the command line cmd.
func NewCut(s *snapshots.Snapshot, cmd string) *Cut {
	return &Cut{s: s, cmd: cmd, texts: make(map[*snapshots.Node]string)}
}

// Write writes the cut as WriteXtmemory does.
func (c *Cut) Write(w io.Writer) error {
	s := c.s
	if s.Tree == nil {
		return fmt.Errorf("snapshot %d has no tree", s.Index)
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "desc: heaptrack\ncmd: %s\ntime_unit: ms\n", c.cmd)
	for i, ev := range []struct {
		root   string
		figure func(*snapshots.Node) int64
	}{
		{curBRoot, nodeBytes},
		{"curBk : currently allocated Blocks", func(n *snapshots.Node) int64 { return n.Blocks }},
	} {
		fmt.Fprintf(bw, "#-----------\nsnapshot=%d\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n",
			i, s.Time, ev.figure(s.Tree))
		walkTree(s.Tree, 0, ev.root, ev.figure, c.texts, func(depth int, n *snapshots.Node, kids int, text string) {
			for range depth {
				bw.WriteByte(' ')
			}
			bw.WriteByte('n')
			bw.WriteString(strconv.Itoa(kids))
			bw.WriteString(": ")
			bw.WriteString(strconv.FormatInt(ev.figure(n), 10))
			bw.WriteByte(' ')
			bw.WriteString(text)
			bw.WriteByte('\n')
		})
	}
	return bw.Flush()
}

// curBRoot is the root line's text of the tree of live bytes.
const curBRoot = "curB : currently allocated Bytes"

func nodeBytes(n *snapshots.Node) int64 { return n.Bytes }

// HeapTree makes the cut into the tree snapshots.ReadHeapTree reads from
// the file Write writes of it (the same lines, in the same order, with
// the same frame texts and block counts), without the file, its frames
// numbered in frames.
func (c *Cut) HeapTree(frames *snapshots.FrameTable) (*snapshots.HeapTree, error) {
	s := c.s
	if s.Tree == nil {
		return nil, fmt.Errorf("snapshot %d has no tree", s.Index)
	}
	return snapshots.BuildHeapTree(frames, s.Tree.Bytes, 0, 0, true, func(line func(int, int64, int64, string)) {
		walkTree(s.Tree, 0, curBRoot, nodeBytes, c.texts, func(depth int, n *snapshots.Node, _ int, text string) {
			line(depth, n.Bytes, n.Blocks, text)
		})
	}), nil
}

// walkTree gives visit n's line and those of its subtree, depth first as
// a massif file lists them: each line with its depth, its number of
// children shown and its text; only the children with live bytes or
// blocks, largest figure first.
func walkTree(n *snapshots.Node, depth int, text string, figure func(*snapshots.Node) int64, texts map[*snapshots.Node]string, visit func(depth int, n *snapshots.Node, kids int, text string)) {
	kids := make([]*snapshots.Node, 0, len(n.Children))
	for _, c := range n.Children {
		// A site of 0-byte blocks (malloc(0), which glibc still gives a
		// chunk) has a line of 0 bytes: both trees have the same lines,
		// which a reader matches line by line.
		if c.Bytes != 0 || c.Blocks != 0 {
			kids = append(kids, c)
		}
	}
	sort.SliceStable(kids, func(i, j int) bool { return figure(kids[i]) > figure(kids[j]) })
	visit(depth, n, len(kids), text)
	for _, c := range kids {
		t, ok := texts[c]
		if !ok {
			t = snapshots.FrameString(c.Frame)
			if f := c.Frame; f.File == "" && f.Object != "" && snapshots.ModuleOffset(f) {
				// The module stays in the file, which the reports
				// leave out.
				t = snapshots.Printable(f.Function + " (in " + f.Object + ")")
			}
			if c.Frame.Addr != "" {
				t = c.Frame.Addr + ": " + t
			}
			texts[c] = t
		}
		walkTree(c, depth+1, t, figure, texts, visit)
	}
}
