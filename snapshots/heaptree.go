package snapshots

import (
	"fmt"
	"io"
)

// FrameTable numbers the frames of a run's snapshots: each distinct frame
// text is parsed and stored once for the whole run, and a HeapTree refers
// to its frames by number. A snapshot of 10,000 call sites 20 frames deep
// has 200,000 tree lines but a few thousand distinct frames, the same at
// every stop.
type FrameTable struct {
	texts  map[string]int32 // frame text -> its number
	byNode map[Frame]int32
	frames []Frame
	lines  int // of the last tree built, to size the next
	// Qualify, when set, gives the function name a frame is reported
	// under (the driver qualifies the bare names of inlined C++
	// functions). It is called once per distinct frame, as it is added.
	Qualify func(Frame) string
}

// NewFrameTable returns an empty table.
func NewFrameTable() *FrameTable { return &FrameTable{} }

// Frame returns the frame numbered id.
func (t *FrameTable) Frame(id int32) Frame { return t.frames[id] }

// text returns the number of a frame text, parsing it when it is new.
func (t *FrameTable) text(text []byte) int32 {
	if id, ok := t.texts[string(text)]; ok {
		return id
	}
	if t.texts == nil {
		t.texts = make(map[string]int32)
	}
	s := string(text)
	id := t.add(ParseFrame(s))
	t.texts[s] = id
	return id
}

// frame returns the number of a frame, adding it when it is new; it is
// how a tree built of Nodes is made into a HeapTree.
func (t *FrameTable) frame(f Frame) int32 {
	if id, ok := t.byNode[f]; ok {
		return id
	}
	if t.byNode == nil {
		t.byNode = make(map[Frame]int32)
	}
	id := t.add(f)
	t.byNode[f] = id
	return id
}

func (t *FrameTable) add(f Frame) int32 {
	if t.Qualify != nil {
		f.Function = t.Qualify(f)
	}
	t.frames = append(t.frames, f)
	return int32(len(t.frames) - 1)
}

// HeapTree is one stop's heap snapshot kept compact: its totals and its
// allocation tree as one slice of lines in file order, each naming its
// frame by number in a FrameTable. It holds what diffs, series and growth
// graphs need, in about a sixth of the memory of a tree of Nodes, and is
// read without building one (ReadHeapTree).
type HeapTree struct {
	HeapBytes      int64 // mem_heap_B
	HeapExtraBytes int64 // mem_heap_extra_B
	StacksBytes    int64 // mem_stacks_B
	// Blocks is set when the lines carry live block counts (an xtmemory
	// file's curBk tree merged into its curB tree).
	Blocks bool
	Frames *FrameTable
	root   Frame // the root line's text, as Node.Frame has it
	// index is the snapshot=N it was read from, for messages.
	index int
	nodes []heapNode // depth first; nodes[0] is the root
}

// heapNode is one tree line of a HeapTree.
type heapNode struct {
	bytes, blocks int64
	end           int32 // the index just past the line's subtree
	frame         int32 // in HeapTree.Frames; belowFrame for a bucket
}

// belowFrame marks a below-threshold bucket, which has no frame.
const belowFrame = -1

// children calls fn with the index of every child of line i, in order.
func (t *HeapTree) children(i int32, fn func(c int32)) {
	for c := i + 1; c < t.nodes[i].end; c = t.nodes[c].end {
		fn(c)
	}
}

// frameOf returns line i's frame; the zero Frame for a bucket.
func (t *HeapTree) frameOf(i int32) Frame {
	switch f := t.nodes[i].frame; {
	case i == 0:
		return t.root
	case f == belowFrame:
		return Frame{}
	default:
		return t.Frames.frames[f]
	}
}

// HeapTreeOf makes the tree of a detailed snapshot into a HeapTree whose
// frames are numbered in frames (a new table when nil). A snapshot without
// a tree is an error.
func HeapTreeOf(s *Snapshot, frames *FrameTable) (*HeapTree, error) {
	if err := checkTree(s); err != nil {
		return nil, err
	}
	if frames == nil {
		frames = NewFrameTable()
	}
	t := &HeapTree{HeapBytes: s.HeapBytes, HeapExtraBytes: s.HeapExtraBytes, StacksBytes: s.StacksBytes,
		Blocks: s.Blocks, Frames: frames, root: s.Tree.Frame, index: s.Index}
	var add func(n *Node)
	add = func(n *Node) {
		i := len(t.nodes)
		f := int32(belowFrame)
		if !n.Below && i > 0 {
			f = frames.frame(n.Frame)
		}
		t.nodes = append(t.nodes, heapNode{bytes: n.Bytes, blocks: n.Blocks, frame: f})
		for _, c := range n.Children {
			if c != nil {
				add(c)
			}
		}
		t.nodes[i].end = int32(len(t.nodes))
	}
	add(s.Tree)
	return t, nil
}

// BuildHeapTree makes a HeapTree of lines that walk gives one by one,
// depth first in the order of a massif file's lines, without the file: a
// backend that holds a stop's heap in memory (heaptrack's replay under
// native.sites) passes it this way instead of writing a file to read
// back. A line names its frame by the text a file's line would have (the
// root's is the tree's description), so that frames are numbered in
// frames as ReadHeapTree numbers them, and trees built here compare with
// trees read from files of the same run. blocks says that the lines carry
// live block counts.
func BuildHeapTree(frames *FrameTable, heap, extra, stacks int64, blocks bool, walk func(line func(depth int, bytes, blocks int64, text string))) *HeapTree {
	b := &heapTreeBuilder{frames: frames, mode: modeBuild}
	b.tree = &HeapTree{HeapBytes: heap, HeapExtraBytes: extra, StacksBytes: stacks, Blocks: blocks, Frames: frames}
	if n := frames.lines; n > 0 {
		b.tree.nodes = make([]heapNode, 0, n+n/32+16)
	}
	var text []byte
	walk(func(depth int, bytes, blocks int64, s string) {
		text = append(text[:0], s...)
		l := treeLine{depth: depth, bytes: bytes, text: text}
		if depth > 0 {
			l.places, l.below = belowPlaces(text)
		}
		b.line(&l)
		b.tree.nodes[len(b.tree.nodes)-1].blocks = blocks
	})
	b.endTree()
	return b.tree
}

// ReadHeapTree reads the heap snapshot of one stop from r as ReadHeap
// does, streaming, straight into a HeapTree whose frames are numbered in
// frames: no tree of Nodes is built. From an xtmemory file it takes the
// curB tree with the live block counts of the curBk tree; from any other
// massif file its first detailed snapshot.
func ReadHeapTree(r io.Reader, name string, frames *FrameTable) (*HeapTree, error) {
	rd := NewReader(r, name, ReadOptions{})
	b := &heapTreeBuilder{frames: frames}
	rd.visitor = b
	for {
		b.mode = modeSkip // a snapshot without a tree calls no beginTree
		s, err := rd.Next()
		if err == io.EOF {
			if b.heap != nil {
				return b.heap, nil
			}
			return nil, &FormatError{File: name, Line: rd.line + 1, Msg: "expected a detailed snapshot, got end of file"}
		}
		if err != nil {
			return nil, err
		}
		switch b.mode {
		case modeBuild:
			b.heap = b.tree
			if s.Event != eventBytes {
				return b.heap, nil
			}
		case modeMerge:
			if b.mergeErr != nil {
				return nil, &FormatError{File: name, Line: s.Line, Msg: fmt.Sprintf("%s tree does not match the %s tree: %v", eventBlocks, eventBytes, b.mergeErr)}
			}
			b.heap.Blocks = true
			return b.heap, nil
		}
	}
}

// heapTreeBuilder is the treeVisitor that builds HeapTrees as the Reader
// checks the lines. Reading a stop's snapshot (ReadHeapTree), it builds
// the first curB tree (or a detailed_snapshot file's tree) and merges the
// curBk tree that follows into it line by line, never building that one.
type heapTreeBuilder struct {
	frames *FrameTable
	tree   *HeapTree // the tree being built, or the last one built
	open   []int32   // the lines whose subtree is still being read
	// first makes the builder build every tree (ReadFirstTree reads one).
	first bool
	mode  int
	// heap is the curB tree once read; merge holds, by depth, the line of
	// heap that the curBk line being read at that depth matches.
	heap     *HeapTree
	merge    []mergeLevel
	mergeErr error
}

// The builder's modes, per tree read.
const (
	modeSkip  = iota // a tree ReadHeapTree does not want
	modeBuild        // build it into tree
	modeMerge        // merge its counts into heap's blocks
)

// mergeLevel is a line of heap matched by a curBk line; line is -1 when
// the curBk line matched none, and its subtree is skipped. byFrame indexes
// the line's children by frame once it has many.
type mergeLevel struct {
	line    int32
	byFrame map[int32]int32
	counted bool
}

func (b *heapTreeBuilder) beginTree(s *Snapshot) {
	switch {
	case b.first || (b.heap == nil && (s.Event == eventBytes || s.Event == "")):
		b.mode = modeBuild
	case b.heap != nil && s.Event == eventBlocks:
		b.mode = modeMerge
		b.merge = b.merge[:0]
		return
	default:
		b.mode = modeSkip
		return
	}
	b.tree = &HeapTree{HeapBytes: s.HeapBytes, HeapExtraBytes: s.HeapExtraBytes, StacksBytes: s.StacksBytes,
		Frames: b.frames, index: s.Index}
	// A run's snapshots are about the same size: start at the last one's,
	// so that append seldom copies.
	if n := b.frames.lines; n > 0 {
		b.tree.nodes = make([]heapNode, 0, n+n/32+16)
	}
	b.open = b.open[:0]
}

func (b *heapTreeBuilder) line(l *treeLine) {
	switch b.mode {
	case modeSkip:
		return
	case modeMerge:
		b.mergeLine(l)
		return
	}
	t := b.tree
	b.close(l.depth)
	n := heapNode{bytes: l.bytes, frame: b.frameOf(l)}
	if l.depth == 0 && len(l.text) > 0 {
		t.root = Frame{Function: string(l.text)}
	}
	t.nodes = append(t.nodes, n)
	b.open = append(b.open, int32(len(t.nodes)-1))
}

// frameOf returns the frame number of a line below the root.
func (b *heapTreeBuilder) frameOf(l *treeLine) int32 {
	switch {
	case l.depth == 0 || l.below:
		return belowFrame
	case len(l.text) == 0:
		return b.frames.frame(Frame{})
	}
	return b.frames.text(l.text)
}

// close ends the subtrees of the open lines at depth and below it.
func (b *heapTreeBuilder) close(depth int) {
	for len(b.open) > depth {
		i := b.open[len(b.open)-1]
		b.tree.nodes[i].end = int32(len(b.tree.nodes))
		b.open = b.open[:len(b.open)-1]
	}
}

func (b *heapTreeBuilder) endTree() {
	if b.mode != modeBuild {
		return
	}
	b.close(0)
	n := b.tree.nodes
	b.frames.lines = len(n)
	if cap(n) > len(n)+len(n)/8 {
		// A series keeps the tree until the next stop: give back the
		// slack.
		b.tree.nodes = append([]heapNode(nil), n...)
	}
}

// mergeLine sets the blocks of heap's line matching the curBk line l: the
// line with the same frame (address included) under the line its parent
// matched, as mergeNode does for trees of Nodes, whose errors it gives.
func (b *heapTreeBuilder) mergeLine(l *treeLine) {
	b.merge = b.merge[:l.depth]
	if b.mergeErr != nil {
		return
	}
	h := b.heap
	if l.depth == 0 {
		h.nodes[0].blocks = l.bytes
		b.merge = append(b.merge, mergeLevel{line: 0})
		return
	}
	parent := &b.merge[l.depth-1]
	if parent.line < 0 {
		b.merge = append(b.merge, mergeLevel{line: -1})
		return
	}
	f := b.frameOf(l)
	c := b.find(parent, f)
	switch {
	case c >= 0:
		h.nodes[c].blocks = l.bytes
	case l.bytes != 0:
		lf := Frame{}
		if f != belowFrame {
			lf = b.frames.frames[f]
		}
		b.mergeErr = fmt.Errorf("%s under %s", FrameString(lf), FrameString(h.frameOf(parent.line)))
	}
	b.merge = append(b.merge, mergeLevel{line: c})
}

// find returns the child of the matched line with frame f, or -1: the
// first such child, or among more than 16 children the last, as mergeNode
// finds it.
func (b *heapTreeBuilder) find(m *mergeLevel, f int32) int32 {
	h := b.heap
	if !m.counted {
		m.counted = true
		if h.kids(m.line) > 16 {
			m.byFrame = make(map[int32]int32)
			h.children(m.line, func(c int32) { m.byFrame[h.nodes[c].frame] = c })
		}
	}
	if m.byFrame != nil {
		if c, ok := m.byFrame[f]; ok {
			return c
		}
		return -1
	}
	for c := m.line + 1; c < h.nodes[m.line].end; c = h.nodes[c].end {
		if h.nodes[c].frame == f {
			return c
		}
	}
	return -1
}

// kids counts the children of line i.
func (t *HeapTree) kids(i int32) int {
	n := 0
	t.children(i, func(int32) { n++ })
	return n
}

// ReadFirstTree reads the tree of the first snapshot in r, streaming, as a
// HeapTree whose frames are numbered in frames; a first snapshot without
// a tree is an error. Of an xtmemory file it is the curB tree, without
// block counts.
func ReadFirstTree(r io.Reader, name string, frames *FrameTable) (*HeapTree, error) {
	rd := NewReader(r, name, ReadOptions{})
	b := &heapTreeBuilder{frames: frames, first: true}
	rd.visitor = b
	s, err := rd.Next()
	if err != nil {
		return nil, err
	}
	if b.tree == nil {
		return nil, &SnapshotError{Index: s.Index, Err: ErrNoTree}
	}
	return b.tree, nil
}
