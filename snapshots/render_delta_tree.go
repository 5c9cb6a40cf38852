package snapshots

import (
	"fmt"
	"io"
	"strings"
)

// TreeOptions tune RenderDeltaTree.
type TreeOptions struct {
	Color bool
	// MaxDepth limits the depth printed below the root; 0 prints all.
	MaxDepth int
	// Library and NoDefaultLibrary say which frames are library code, as
	// in Options; runs of library frames with a single child fold into
	// one line.
	Library          []string
	NoDefaultLibrary bool
}

// RenderDeltaTree writes a tree of signed deltas (from DiffTree) for a
// terminal: one line per tree line whose bytes changed, its change first,
// children in order of their change, drawn with box characters. A run of
// library frames that each have one child folds into one "via N library
// frames" line, the way the site tables fold them.
func RenderDeltaTree(w io.Writer, tree *Node, opts TreeOptions) error {
	t := newTextWriter(w, opts.Color)
	if tree == nil {
		t.printf("no allocation tree\n")
		return t.done()
	}
	lib := newLibrary(&Options{Library: opts.Library, NoDefaultLibrary: opts.NoDefaultLibrary})
	width := deltaWidth(tree, 0)
	t.printf("%s  %s\n", t.delta(alignRight(FormatDelta(tree.Bytes), width), tree.Bytes), shortFrame(tree.Frame))
	t.deltaChildren(tree, "", 1, width, lib, opts)
	return t.done()
}

// deltaWidth is the widest change printed in a tree.
func deltaWidth(n *Node, w int) int {
	w = max(w, len([]rune(FormatDelta(n.Bytes))))
	for _, c := range n.Children {
		if c.Bytes != 0 {
			w = deltaWidth(c, w)
		}
	}
	return w
}

func (t *textWriter) deltaChildren(n *Node, prefix string, depth, width int, lib *library, opts TreeOptions) {
	var shown []*Node
	for _, c := range n.Children {
		if c.Bytes != 0 {
			shown = append(shown, c)
		}
	}
	for i, c := range shown {
		branch, next := "├─ ", "│  "
		if i == len(shown)-1 {
			branch, next = "└─ ", "   "
		}
		label, end := t.deltaLabel(c, lib)
		t.printf("%s  %s%s\n", t.delta(alignRight(FormatDelta(c.Bytes), width), c.Bytes), prefix+branch, label)
		if opts.MaxDepth > 0 && depth >= opts.MaxDepth {
			if hasChangedChild(end) {
				t.printf("%s  %s%s\n", strings.Repeat(" ", width), prefix+next, t.style("…", ansiDim))
			}
			continue
		}
		t.deltaChildren(end, prefix+next, depth+1, width, lib, opts)
	}
}

// deltaLabel names a tree line; a run of library frames with one child
// each and the same change is folded, and the last node of the run is
// returned so that its children come next.
func (t *textWriter) deltaLabel(n *Node, lib *library) (string, *Node) {
	if n.Below {
		return t.style(fmt.Sprintf("(below massif's threshold, %s)", countOf(n.Places, "place", "places")), ansiDim), n
	}
	if !lib.is(n.Frame) {
		return shortFrame(n.Frame), n
	}
	first, end, count := n, n, 1
	for len(end.Children) == 1 && !end.Children[0].Below && end.Children[0].Bytes == n.Bytes && lib.is(end.Children[0].Frame) {
		end = end.Children[0]
		count++
	}
	if count == 1 {
		return t.style(shortFrame(n.Frame), ansiDim), n
	}
	return t.style(fmt.Sprintf("via %d library frames: %s … %s", count, briefName(first.Frame.Function), briefName(end.Frame.Function)), ansiDim), end
}

func hasChangedChild(n *Node) bool {
	for _, c := range n.Children {
		if c.Bytes != 0 {
			return true
		}
	}
	return false
}
