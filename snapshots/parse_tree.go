package snapshots

import (
	"bytes"
	"io"
)

// treeBuilder allocates the nodes of trees in slabs: a detailed snapshot of
// a big program has hundreds of thousands of lines, and one allocation per
// node would dominate the parse.
type treeBuilder struct {
	nodes []Node
	kids  []*Node
	stack []openNode
}

// openNode is a node whose announced children are still being read.
type openNode struct {
	n    *Node
	want int // children announced by nK
	line int // where nK was read, for messages
}

func (b *treeBuilder) node() *Node {
	if len(b.nodes) == 0 {
		b.nodes = make([]Node, 1024)
	}
	n := &b.nodes[0]
	b.nodes = b.nodes[1:]
	return n
}

// children returns an empty slice with room for k children. The room is
// capped so that a garbage count cannot make the parser allocate gigabytes;
// append grows it if the count was true.
func (b *treeBuilder) children(k int) []*Node {
	if k > 64 {
		return make([]*Node, 0, min(k, 4096))
	}
	if len(b.kids) < k {
		b.kids = make([]*Node, 4096)
	}
	c := b.kids[:0:k]
	b.kids = b.kids[k:]
	return c
}

// readTree reads the lines of one allocation tree: the root at depth 0 and,
// depth first, as many children under every node as its nK announces, each
// one space deeper than its parent.
func (r *Reader) readTree() (*Node, error) {
	b := &r.tree
	line, err := r.readLine()
	if err != nil {
		return nil, r.expected("n", line, err)
	}
	root, k, err := r.treeLine(line, 0)
	if err != nil {
		return nil, err
	}
	b.stack = b.stack[:0]
	if k > 0 {
		root.Children = b.children(k)
		b.stack = append(b.stack, openNode{root, k, r.line})
	}
	for len(b.stack) > 0 {
		top := &b.stack[len(b.stack)-1]
		if len(top.n.Children) == top.want {
			b.stack = b.stack[:len(b.stack)-1]
			continue
		}
		depth := len(b.stack)
		line, err := r.readLine()
		if err == io.EOF || (err == nil && !isTreeLine(line)) {
			return nil, r.errorf(r.line+boolInt(err == io.EOF), "expected %d more children of the n%d node at line %d, got %s",
				top.want-len(top.n.Children), top.want, top.line, describeLine(line, err))
		}
		if err != nil {
			return nil, err
		}
		n, k, err := r.treeLine(line, depth)
		if err != nil {
			return nil, err
		}
		top.n.Children = append(top.n.Children, n)
		if k > 0 {
			n.Children = b.children(k)
			b.stack = append(b.stack, openNode{n, k, r.line})
		}
	}
	return root, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func describeLine(line []byte, err error) string {
	if err == io.EOF {
		return "end of file"
	}
	return quoteLine(line)
}

// treeLine parses "<depth spaces>nK: BYTES TEXT" and returns the node and K.
func (r *Reader) treeLine(line []byte, depth int) (*Node, int, error) {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i != depth {
		return nil, 0, r.errorf(r.line, "expected a tree line indented by %d, got %s", depth, quoteLine(line))
	}
	if i >= len(line) || line[i] != 'n' {
		return nil, 0, r.errorf(r.line, `expected "n" and a child count, got %s`, quoteLine(line))
	}
	i++
	j := i
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	k, ok := parseInt(line[i:j])
	if !ok || k > 1<<30 || j+1 >= len(line) || line[j] != ':' || line[j+1] != ' ' {
		return nil, 0, r.errorf(r.line, `expected "nK: " with a child count K, got %s`, quoteLine(line))
	}
	i = j + 2
	j = i
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	bytesN, ok := parseInt(line[i:j])
	if !ok || j >= len(line) || line[j] != ' ' {
		return nil, 0, r.errorf(r.line, "expected a byte count and a space after %q, got %s", line[:i], quoteLine(line))
	}
	text := line[j+1:]
	n := r.tree.node()
	n.Bytes = bytesN
	if depth == 0 {
		// The root: "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.",
		// its --pages-as-heap form, or an xtmemory event "curB : currently allocated Bytes".
		n.Frame = r.intern(text, false)
		return n, int(k), nil
	}
	if places, ok := belowPlaces(text); ok {
		if k != 0 {
			return nil, 0, r.errorf(r.line, "expected n0 for a below-threshold line, got n%d", k)
		}
		n.Below = true
		n.Places = places
		return n, 0, nil
	}
	n.Frame = r.intern(text, true)
	return n, int(k), nil
}

// belowPlaces recognises the below-threshold bucket in its forms
//
//	in 1 place, below massif's threshold (1.00%)
//	in 3 places, all below massif's threshold (1.00%)
//	in 2 places, all below massif's threshold (20)      (heaptrack)
//
// and returns the number of places.
func belowPlaces(text []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(text, []byte("in "))
	if !ok {
		return 0, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	k, ok := parseInt(rest[:i])
	if !ok || k > 1<<30 || !bytes.HasPrefix(rest[i:], []byte(" place")) || !bytes.Contains(rest[i:], []byte("below")) {
		return 0, false
	}
	return int(k), true
}

// intern returns the Frame for a frame text, parsing each distinct text once.
// The map lookup with string(text) does not allocate.
func (r *Reader) intern(text []byte, parse bool) Frame {
	if f, ok := r.frames[string(text)]; ok {
		return f
	}
	s := string(text)
	var f Frame
	if parse {
		f = ParseFrame(s)
	} else {
		f = Frame{Function: s}
	}
	r.frames[s] = f
	return f
}

// ParseFrame parses the text massif prints for a stack frame:
//
//	0x1091E0: make_payload (leak.c:12)
//	0x4C2DB8F: std::vector<int, std::allocator<int> >::push_back(int const&) (stl_vector.h:1198)
//	0x48F1D4A: ??? (in /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30)
//	0x0: ??? (in ???)
//	???
//
// The function name runs up to the last " (", so C++ names with spaces,
// commas, parentheses and templates stay whole. A text whose last
// parenthesis is neither "in OBJECT" nor "file:line" is all function name.
func ParseFrame(text string) Frame {
	var f Frame
	if len(text) > 2 && text[0] == '0' && text[1] == 'x' {
		if i := indexString(text, ": "); i > 0 {
			f.Addr = text[:i]
			text = text[i+2:]
		}
	}
	f.Function = text
	if len(text) == 0 || text[len(text)-1] != ')' {
		return f
	}
	open := -1
	for i := len(text) - 2; i > 0; i-- {
		if text[i] == '(' && text[i-1] == ' ' {
			open = i
			break
		}
	}
	if open < 0 {
		return f
	}
	inner := text[open+1 : len(text)-1]
	fn := text[:open-1]
	if len(inner) > 3 && inner[:3] == "in " {
		f.Function, f.Object = fn, inner[3:]
		return f
	}
	colon := -1
	for i := len(inner) - 1; i >= 0; i-- {
		if inner[i] == ':' {
			colon = i
			break
		}
	}
	if colon <= 0 {
		return f
	}
	line, ok := parseInt([]byte(inner[colon+1:]))
	if !ok || line > 1<<31 {
		return f
	}
	f.Function, f.File, f.Line = fn, inner[:colon], int(line)
	return f
}
