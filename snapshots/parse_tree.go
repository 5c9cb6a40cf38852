package snapshots

import (
	"bytes"
	"hash/maphash"
	"io"
	"strconv"
	"strings"
)

// treeBuilder allocates the nodes of trees in slabs: a detailed snapshot of
// a big program has hundreds of thousands of lines, and one allocation per
// node would dominate the parse. The slabs start small and double up to
// their cap, because the driver parses one small snapshot per stop, often
// thousands of times, and should not pay for slabs it never fills.
type treeBuilder struct {
	nodes    []Node
	kids     []*Node
	nodeSlab int // size of the next nodes slab
	kidsSlab int // size of the next kids slab
	stack    []openNode
}

// openNode is a node whose announced children are still being read.
type openNode struct {
	n    *Node // nil when a treeVisitor gets the lines instead
	want int   // children announced by nK
	have int   // children read so far
	line int   // where nK was read, for messages
}

func (b *treeBuilder) node() *Node {
	if len(b.nodes) == 0 {
		b.nodeSlab = nextSlab(b.nodeSlab, 32, 1024)
		b.nodes = make([]Node, b.nodeSlab)
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
		b.kidsSlab = nextSlab(b.kidsSlab, 128, 4096)
		b.kids = make([]*Node, b.kidsSlab)
	}
	c := b.kids[:0:k]
	b.kids = b.kids[k:]
	return c
}

// nextSlab doubles a slab size from first up to max.
func nextSlab(cur, first, max int) int {
	if cur == 0 {
		return first
	}
	return min(2*cur, max)
}

// treeLine is one checked line of an allocation tree, as a treeVisitor
// sees it. Text is only valid during the call.
type treeLine struct {
	depth  int
	last   bool // the last of its parent's announced children
	kids   int  // the K of nK
	bytes  int64
	text   []byte // the frame text; the root's description at depth 0
	below  bool   // a below-threshold bucket; text is then not a frame
	places int
}

// treeVisitor receives a detailed snapshot's tree line by line instead of
// as a Tree, so that a renderer can stream a file without building nodes.
// The Reader checks the lines exactly as when it builds trees.
type treeVisitor interface {
	beginTree(s *Snapshot) // totals and Event are set; lines follow
	line(l *treeLine)
	endTree()
}

// readTree reads the lines of one allocation tree into s.Tree (or hands them
// to r.visitor): the root at depth 0 and, depth first, as many children
// under every node as its nK announces, each one space deeper than its
// parent.
func (r *Reader) readTree(s *Snapshot) error {
	b := &r.tree
	// Every tree starts on fresh slabs: a slab shared by two snapshots
	// would keep the older one alive through the newer, and with it every
	// snapshot before it, defeating the streaming Reader.
	b.nodes, b.kids = nil, nil
	defer clear(b.stack[:cap(b.stack)])
	line, err := r.readLine()
	if err != nil {
		return r.expected("n", line, err)
	}
	l := treeLine{last: true}
	if err := r.parseTreeLine(line, &l); err != nil {
		return err
	}
	if len(l.text) > 0 && l.text[0] != '(' {
		// xtmemory: "curB : currently allocated Bytes".
		if i := bytes.Index(l.text, []byte(" : ")); i > 0 {
			s.Event = string(l.text[:i])
		}
	}
	var root *Node
	if r.visitor != nil {
		r.visitor.beginTree(s)
		r.visitor.line(&l)
	} else {
		root = b.node()
		root.Bytes = l.bytes
		root.Frame = r.intern(l.text, false)
		if l.kids > 0 {
			root.Children = b.children(l.kids)
		}
	}
	b.stack = b.stack[:0]
	if l.kids > 0 {
		b.stack = append(b.stack, openNode{root, l.kids, 0, r.line})
	}
	for len(b.stack) > 0 {
		top := &b.stack[len(b.stack)-1]
		if top.have == top.want {
			b.stack = b.stack[:len(b.stack)-1]
			continue
		}
		line, err := r.readLine()
		if err == io.EOF || (err == nil && !isTreeLine(line)) {
			return r.errorf(r.line+boolInt(err == io.EOF), "expected %d more children of the n%d node at line %d, got %s",
				top.want-top.have, top.want, top.line, describeLine(line, err))
		}
		if err != nil {
			return err
		}
		l = treeLine{depth: len(b.stack)}
		if err := r.parseTreeLine(line, &l); err != nil {
			return err
		}
		top.have++
		l.last = top.have == top.want
		var n *Node
		if r.visitor != nil {
			r.visitor.line(&l)
		} else {
			n = b.node()
			n.Bytes = l.bytes
			if l.below {
				n.Below, n.Places = true, l.places
			} else {
				n.Frame = r.intern(l.text, true)
			}
			if l.kids > 0 {
				n.Children = b.children(l.kids)
			}
			top.n.Children = append(top.n.Children, n)
		}
		if l.kids > 0 {
			b.stack = append(b.stack, openNode{n, l.kids, 0, r.line})
		}
	}
	if r.visitor != nil {
		r.visitor.endTree()
	}
	s.Tree = root
	return nil
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

// parseTreeLine parses "<depth spaces>nK: BYTES TEXT" into l, whose depth
// is set to the depth the line must have.
func (r *Reader) parseTreeLine(line []byte, l *treeLine) error {
	depth := l.depth
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	if i != depth {
		return r.errorf(r.line, "expected a tree line indented by %d, got %s", depth, quoteLine(line))
	}
	if i >= len(line) || line[i] != 'n' {
		return r.errorf(r.line, `expected "n" and a child count, got %s`, quoteLine(line))
	}
	i++
	j := i
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	k, ok := parseInt(line[i:j])
	if !ok || k > 1<<30 || j+1 >= len(line) || line[j] != ':' || line[j+1] != ' ' {
		return r.errorf(r.line, `expected "nK: " with a child count K, got %s`, quoteLine(line))
	}
	i = j + 2
	j = i
	for j < len(line) && line[j] >= '0' && line[j] <= '9' {
		j++
	}
	n, ok := parseInt(line[i:j])
	if !ok || j >= len(line) || line[j] != ' ' {
		return r.errorf(r.line, "expected a byte count and a space after %q, got %s", line[:i], quoteLine(line))
	}
	if n > MaxBytes {
		return r.errorf(r.line, "byte count %d is more than any 64-bit address space holds (%d bytes)", n, int64(MaxBytes))
	}
	l.kids, l.bytes, l.text = int(k), n, line[j+1:]
	if depth == 0 {
		// The root: "(heap allocation functions) malloc/new/new[], --alloc-fns, etc.",
		// its --pages-as-heap form, or an xtmemory event "curB : currently allocated Bytes".
		return nil
	}
	if places, ok := belowPlaces(l.text); ok {
		if k != 0 {
			return r.errorf(r.line, "expected n0 for a below-threshold line, got n%d", k)
		}
		l.below, l.places = true, places
	}
	return nil
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
func (r *Reader) intern(text []byte, parse bool) Frame {
	if len(text) == 0 {
		return Frame{}
	}
	e := r.frames.lookup(text)
	if e.text == "" {
		e.text = string(text)
		if parse {
			e.frame = ParseFrame(e.text)
		} else {
			e.frame = Frame{Function: e.text}
		}
	}
	return e.frame
}

// internedFrame is a frame text and what it parsed to.
type internedFrame struct {
	text  string
	frame Frame
}

// frameTable interns frame texts: an open-addressing hash table keyed by
// the bytes of the text, so that a lookup costs one hash and, almost always,
// one comparison, and never allocates. Frame texts repeat on nearly every
// line of a big tree and there are only a few thousand distinct ones.
type frameTable struct {
	seed    maphash.Seed
	entries []internedFrame // len is a power of two; text "" marks a free slot
	used    int
}

// lookup returns the entry for a non-empty text; a new entry has an empty
// text, which the caller fills in through the returned pointer.
func (t *frameTable) lookup(text []byte) *internedFrame {
	if t.entries == nil {
		t.seed = maphash.MakeSeed()
		t.entries = make([]internedFrame, 64)
	}
	mask := uint64(len(t.entries) - 1)
	for i := maphash.Bytes(t.seed, text) & mask; ; i = (i + 1) & mask {
		e := &t.entries[i]
		if e.text == "" {
			if 2*(t.used+1) > len(t.entries) {
				t.grow()
				return t.lookup(text)
			}
			t.used++
			return e
		}
		if e.text == string(text) {
			return e
		}
	}
}

func (t *frameTable) grow() {
	old := t.entries
	t.entries = make([]internedFrame, 2*len(old))
	mask := uint64(len(t.entries) - 1)
	for _, e := range old {
		if e.text == "" {
			continue
		}
		i := maphash.String(t.seed, e.text) & mask
		for t.entries[i].text != "" {
			i = (i + 1) & mask
		}
		t.entries[i] = e
	}
}

// splitOffset splits a module and an offset, "/usr/bin/redis-server+0x5a1b2",
// as FrameString prints a Frame's Object and Offset. An object without
// one is returned whole.
func splitOffset(obj string) (string, uint64) {
	i := strings.LastIndex(obj, "+0x")
	if i <= 0 || i+3 == len(obj) || len(obj)-i-3 > 16 || strings.Trim(obj[i+3:], "0123456789abcdef") != "" {
		return obj, 0
	}
	off, err := strconv.ParseUint(obj[i+3:], 16, 64)
	if err != nil || off == 0 {
		return obj, 0
	}
	return obj[:i], off
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
		if i := strings.Index(text, ": "); i > 0 {
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
		f.Object, f.Offset = splitOffset(f.Object)
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
	digits := inner[colon+1:]
	line, ok := parseInt([]byte(digits))
	if !ok || line > 1<<31 || (digits[0] == '0' && len(digits) > 1) {
		// Not a line number massif would print; keep the text whole so
		// that it prints back exactly as read.
		return f
	}
	f.Function, f.File, f.Line = fn, inner[:colon], int(line)
	return f
}
