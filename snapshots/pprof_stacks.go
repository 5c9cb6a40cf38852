package snapshots

import "strconv"

// Synthetic frame names for the parts of a massif tree that have no code
// location of their own.
const (
	// BelowFrameName stands for a "in K places, below massif's threshold"
	// bucket in exported stacks.
	BelowFrameName = "(below massif's threshold)"
	// UnattributedFrameName stands for bytes a tree's root counts but none
	// of its children do (seen in heaptrack's exporter).
	UnattributedFrameName = "(unattributed)"
)

// eachSelfStack calls fn for every node of the tree under root that holds
// bytes of its own (its bytes minus its children's), with the path from the
// allocation site down to that node: stack[0] is the frame that called the
// allocator, the last element the outermost caller massif kept. That is
// pprof's leaf-first order; folded stacks print it reversed.
func eachSelfStack(root *Node, fn func(stack []*Node, self int64)) {
	if root == nil {
		return
	}
	var stack []*Node
	var walk func(n *Node)
	walk = func(n *Node) {
		self := n.Bytes
		for _, c := range n.Children {
			self -= c.Bytes
		}
		if n != root {
			stack = append(stack, n)
		}
		if self > 0 {
			fn(stack, self)
		}
		for _, c := range n.Children {
			walk(c)
		}
		if n != root {
			stack = stack[:len(stack)-1]
		}
	}
	walk(root)
}

// exportFrame is the frame an exported stack shows for n: its own frame, or
// a synthetic one for a below-threshold bucket.
func exportFrame(n *Node) Frame {
	if n.Below {
		return Frame{Function: BelowFrameName}
	}
	return n.Frame
}

// exportName is how a frame is named in exported stacks: the function, or
// for a function massif could not name, "??? (in libfoo.so)" so that
// different unknown libraries stay apart.
func exportName(f Frame) string {
	if f.Function == "???" && f.Object != "" && f.Object != "???" {
		return "??? (in " + baseName(f.Object) + ")"
	}
	return f.Function
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// fileLine is "leak.c:12", or "" when the frame has no line.
func fileLine(f Frame) string {
	if f.File == "" {
		return ""
	}
	return f.File + ":" + strconv.Itoa(f.Line)
}
