package snapshots

import (
	"sort"
	"strconv"
	"strings"
)

// StopPoint is one stop of a run as report.html draws it: where it was and
// the heap's totals there.
type StopPoint struct {
	Seq        int
	Breakpoint string
	Hit        int
	Phase      string // "hit", or "return" after finish
	Time       string // as run.json writes it
	Thread     string // "1 (Thread 4242)"

	HeapBytes      int64
	HeapExtraBytes int64
	StacksBytes    int64
	// Memory is what the native backend read at the stop; nil under
	// massif.
	Memory *MemoryPoint
}

// MemoryPoint is the native backend's figures at one stop: resident memory,
// and glibc's heap in use and held free when the allocator could be read.
type MemoryPoint struct {
	RSSBytes       int64
	HeapInUseBytes *int64
	HeapFreeBytes  *int64
	// Arenas and TrimReleasedBytes are glibc's number of arenas and what
	// malloc_trim(0) released at the stop, when measured.
	Arenas            *int
	TrimReleasedBytes *int64
}

// Growth is how the heap of one breakpoint's series changed between its
// first and its last snapshot, as a call tree for a flame graph.
type Growth struct {
	Breakpoint     string
	FromSeq, ToSeq int
	Root           *FlameNode
}

// FlameNode is one box of a growth flame graph: a frame, or a run of
// library frames folded into one box, and the change of the allocations
// made under it. Children are its callees, the largest change first; the
// root stands for the whole heap.
type FlameNode struct {
	// Name is the box's label: the function without return type,
	// parameters and template arguments; for folded library frames the
	// outermost of them and how many more there are.
	Name string
	// Frames are the frames the box stands for, outermost first, in full.
	Frames []Frame
	// Library is set when the box folds library frames.
	Library bool
	// Grown and Shrunk sum the positive and the negative changes of the
	// allocations under the box (Shrunk as a positive number): the box's
	// width is their sum, its net change their difference.
	Grown, Shrunk int64
	Children      []*FlameNode
	index         map[string]*FlameNode // children by flameBox.key
}

// Net is the box's net change.
func (n *FlameNode) Net() int64 { return n.Grown - n.Shrunk }

// GrowthFlame turns a tree of signed deltas (DiffTree of a series' first
// and last snapshot) into a flame graph: each allocation stack read from
// the outermost caller inwards, every run of consecutive library frames
// (opts' library patterns) folded into one box, and stacks that fold alike
// merged. Below-threshold buckets become "(below threshold)" boxes.
func GrowthFlame(delta *Node, opts Options) *FlameNode {
	root := &FlameNode{Name: "all"}
	if delta == nil {
		return root
	}
	lib := newLibrary(&opts)
	var path []*Node
	var walk func(n *Node)
	walk = func(n *Node) {
		self := n.Bytes
		for _, c := range n.Children {
			if c != nil {
				self -= c.Bytes
			}
		}
		if n != delta {
			path = append(path, n)
		}
		if self != 0 {
			root.add(foldStack(path, lib), self)
		}
		for _, c := range n.Children {
			if c != nil {
				walk(c)
			}
		}
		if n != delta {
			path = path[:len(path)-1]
		}
	}
	walk(delta)
	root.sort()
	return root
}

// flameBox is one box of a folded stack before it is merged into the tree.
type flameBox struct {
	frames  []Frame
	library bool
	below   bool
}

// foldStack reads a tree path (allocator side first) from the outermost
// caller inwards and folds runs of library frames.
func foldStack(path []*Node, lib *library) []flameBox {
	var out []flameBox
	for i := len(path) - 1; i >= 0; i-- {
		n := path[i]
		if n.Below {
			out = append(out, flameBox{below: true})
			continue
		}
		f := n.Frame
		f.Addr = ""
		isLib := lib.is(f)
		if isLib && len(out) > 0 && out[len(out)-1].library {
			last := &out[len(out)-1]
			last.frames = append(last.frames, f)
			continue
		}
		out = append(out, flameBox{frames: []Frame{f}, library: isLib})
	}
	return out
}

// key identifies a box among its siblings.
func (b flameBox) key() string {
	if b.below {
		return "\x00below"
	}
	var sb strings.Builder
	if b.library {
		sb.WriteString("\x00lib")
	}
	for _, f := range b.frames {
		sb.WriteString(FrameString(f))
		sb.WriteByte('\x00')
	}
	return sb.String()
}

func (b flameBox) name() string {
	switch {
	case b.below:
		return "(below threshold)"
	case len(b.frames) == 1:
		return briefName(b.frames[0].Function)
	}
	return briefName(b.frames[0].Function) + " +" + strconv.Itoa(len(b.frames)-1) + " library"
}

// add adds a change of bytes along stack, outermost box first.
func (n *FlameNode) add(stack []flameBox, bytes int64) {
	n.count(bytes)
	cur := n
	for _, b := range stack {
		k := b.key()
		next := cur.index[k]
		if next == nil {
			next = &FlameNode{Name: b.name(), Frames: b.frames, Library: b.library}
			if cur.index == nil {
				cur.index = make(map[string]*FlameNode)
			}
			cur.index[k] = next
			cur.Children = append(cur.Children, next)
		}
		next.count(bytes)
		cur = next
	}
}

func (n *FlameNode) count(bytes int64) {
	if bytes > 0 {
		n.Grown += bytes
	} else {
		n.Shrunk -= bytes
	}
}

func (n *FlameNode) sort() {
	sort.SliceStable(n.Children, func(i, j int) bool {
		a, b := n.Children[i], n.Children[j]
		if wa, wb := a.Grown+a.Shrunk, b.Grown+b.Shrunk; wa != wb {
			return wa > wb
		}
		return a.Name < b.Name
	})
	n.index = nil
	for _, c := range n.Children {
		c.sort()
	}
}

// GrowthFlameTrees is GrowthFlame(DiffTree(a, b), opts) for snapshots read
// with ReadHeapTree (a or b may be nil), made without the tree of deltas:
// the two trees are merged one level at a time as the flame graph is
// walked, so the memory it needs beyond a and b is one level per depth.
func GrowthFlameTrees(a, b *HeapTree, opts Options) *FlameNode {
	root := &FlameNode{Name: "all"}
	g := &growthWalk{a: a, b: b, lib: newLibrary(&opts), root: root}
	var top growthGroup
	if a != nil && len(a.nodes) > 0 {
		top.as = []int32{0}
		top.bytes -= a.nodes[0].bytes
	}
	if b != nil && len(b.nodes) > 0 {
		top.bs = []int32{0}
		top.bytes += b.nodes[0].bytes
	}
	if top.as == nil && top.bs == nil {
		return root
	}
	g.walk(&top, true)
	root.sort()
	return root
}

// growthWalk is GrowthFlameTrees' state: path holds the merged lines from
// the root's child down, as GrowthFlame's path holds delta nodes.
type growthWalk struct {
	a, b *HeapTree
	lib  *library
	root *FlameNode
	path []*Node
}

// growthGroup is the lines of a and b that DiffTree merges into one delta
// node: the same frame (without address) under the same merged parent.
type growthGroup struct {
	as, bs []int32
	bytes  int64 // the merged delta
	frame  Frame // without address
	below  bool
}

func (g *growthWalk) walk(n *growthGroup, isRoot bool) {
	kids := g.merge(n)
	self := n.bytes
	for _, c := range kids {
		self -= c.bytes
	}
	if !isRoot {
		g.path = append(g.path, &Node{Frame: n.frame, Below: n.below})
	}
	if self != 0 {
		g.root.add(foldStack(g.path, g.lib), self)
	}
	for _, c := range kids {
		g.walk(c, false)
	}
	if !isRoot {
		g.path = g.path[:len(g.path)-1]
	}
}

// merge groups the children of n's lines as mergeDelta does, in the order
// DiffTree gives its children.
func (g *growthWalk) merge(n *growthGroup) []*growthGroup {
	groups := make(map[treeKey]*growthGroup)
	var order []*growthGroup
	add := func(t *HeapTree, c int32, after bool) {
		k := treeKey{below: t.nodes[c].frame == belowFrame}
		if !k.below {
			k.frame = t.frameOf(c)
			k.frame.Addr = ""
		}
		p := groups[k]
		if p == nil {
			p = &growthGroup{frame: k.frame, below: k.below}
			groups[k] = p
			order = append(order, p)
		}
		if after {
			p.bs = append(p.bs, c)
			p.bytes += t.nodes[c].bytes
		} else {
			p.as = append(p.as, c)
			p.bytes -= t.nodes[c].bytes
		}
	}
	for _, i := range n.as {
		g.a.children(i, func(c int32) { add(g.a, c, false) })
	}
	for _, i := range n.bs {
		g.b.children(i, func(c int32) { add(g.b, c, true) })
	}
	sort.SliceStable(order, func(i, j int) bool {
		ci, cj := order[i], order[j]
		return deltaFirst(ci.bytes, cj.bytes, ci.below, cj.below, ci.frame, cj.frame)
	})
	return order
}
