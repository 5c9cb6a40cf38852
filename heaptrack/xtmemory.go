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
// first in each. cmd is the profiled command line, for the file's cmd:
// line.
func WriteXtmemory(w io.Writer, s *snapshots.Snapshot, cmd string) error {
	if s.Tree == nil {
		return fmt.Errorf("snapshot %d has no tree", s.Index)
	}
	bw := bufio.NewWriter(w)
	texts := make(map[*snapshots.Node]string) // each frame's line text, made once for both trees
	fmt.Fprintf(bw, "desc: heaptrack\ncmd: %s\ntime_unit: ms\n", cmd)
	for i, ev := range []struct {
		root   string
		figure func(*snapshots.Node) int64
	}{
		{"curB : currently allocated Bytes", func(n *snapshots.Node) int64 { return n.Bytes }},
		{"curBk : currently allocated Blocks", func(n *snapshots.Node) int64 { return n.Blocks }},
	} {
		fmt.Fprintf(bw, "#-----------\nsnapshot=%d\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n",
			i, s.Time, ev.figure(s.Tree))
		writeNode(bw, s.Tree, 0, ev.root, ev.figure, texts)
	}
	return bw.Flush()
}

// writeNode writes one tree line and its subtree, children in order of
// their figure.
func writeNode(w *bufio.Writer, n *snapshots.Node, depth int, text string, figure func(*snapshots.Node) int64, texts map[*snapshots.Node]string) {
	kids := make([]*snapshots.Node, 0, len(n.Children))
	for _, c := range n.Children {
		if figure(c) != 0 {
			kids = append(kids, c)
		}
	}
	sort.SliceStable(kids, func(i, j int) bool { return figure(kids[i]) > figure(kids[j]) })
	for range depth {
		w.WriteByte(' ')
	}
	w.WriteByte('n')
	w.WriteString(strconv.Itoa(len(kids)))
	w.WriteString(": ")
	w.WriteString(strconv.FormatInt(figure(n), 10))
	w.WriteByte(' ')
	w.WriteString(text)
	w.WriteByte('\n')
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
		writeNode(w, c, depth+1, t, figure, texts)
	}
}
