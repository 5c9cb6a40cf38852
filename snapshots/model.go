package snapshots

// File is one massif output file: the header and every snapshot in it, in
// file order. Files written by `monitor detailed_snapshot` hold a single
// snapshot numbered 0; a normal massif run holds many, some of them detailed
// and at most one the peak; an xtmemory file holds one per event.
type File struct {
	Name      string // where it was read from, for messages
	Desc      string // the desc: line (valgrind options)
	Cmd       string // the cmd: line (the profiled command)
	TimeUnit  string // i, ms or B
	Snapshots []*Snapshot
}

// TreeKind says what a snapshot holds besides its totals.
type TreeKind int

const (
	TreeEmpty    TreeKind = iota // totals only
	TreeDetailed                 // a detailed allocation tree
	TreePeak                     // a detailed tree taken at the peak
)

func (k TreeKind) String() string {
	switch k {
	case TreeDetailed:
		return "detailed"
	case TreePeak:
		return "peak"
	}
	return "empty"
}

// Snapshot is one `snapshot=N` section.
type Snapshot struct {
	Index          int   // N of snapshot=N
	Line           int   // line of snapshot=N in the file, for messages
	Time           int64 // in the file's TimeUnit
	HeapBytes      int64 // mem_heap_B: bytes requested by the program
	HeapExtraBytes int64 // mem_heap_extra_B: allocator overhead and padding
	StacksBytes    int64 // mem_stacks_B
	Kind           TreeKind
	// TimeText is the time= value as written when it is not an integer
	// (heaptrack's exporter writes seconds: "0.001"); Time is then truncated.
	TimeText string
	// Event is the xtmemory event a snapshot of an xtmemory file shows
	// ("curB", "curBk", "totB", "totBk", "totFdB", "totFdBk"); empty for
	// massif's own snapshots.
	Event string
	// Tree is the allocation tree of a detailed or peak snapshot, nil for an
	// empty one. The root is the "(heap allocation functions) ..." line; its
	// children are the allocation call sites, their children the callers.
	Tree *Node
	// Blocks is set when the tree's nodes carry live block counts
	// (Node.Blocks): a snapshot read with ReadHeap from an xtmemory file,
	// whose curBk tree was merged into its curB tree.
	Blocks bool
}

// Node is one line of a massif allocation tree (`nK: BYTES FRAME`). Bytes is
// signed so that a diff of two trees is itself a tree of deltas.
type Node struct {
	Bytes int64
	// Blocks is the number of live blocks when the snapshot has them
	// (Snapshot.Blocks), else 0.
	Blocks   int64
	Frame    Frame
	Children []*Node
	// Below is set for the "in K places, below massif's threshold" bucket;
	// Places is K. Such a node has no frame.
	Below  bool
	Places int
}

// Frame is the code location a tree line names. Function is "???" when
// massif could not name it. File and Line are set for `fn (file:line)`,
// Object for `fn (in /lib/x.so)`. Addr is kept for display only: inlined
// frames repeat an address, so frames are never keyed by it.
//
// Offset is the return address's offset in Object, for a named frame
// without line information that heaptrack recorded (`fn (in
// /usr/bin/redis-server+0x5a1b2)`): without it every call a function makes
// would be one line, and two allocations of one function one site
// (docs/facts.md, fact 98). Unlike Addr it is the same in every run of the
// same file, so frames are keyed by it.
type Frame struct {
	Addr     string `json:"-"`                // "0x1091E0", empty when the line had none
	Function string `json:"function"`         // "make_payload", "Scheduler::submit(int)", "???"
	File     string `json:"file,omitempty"`   // "leak.c", as massif printed it
	Line     int    `json:"line,omitempty"`   // 0 when unknown
	Object   string `json:"object,omitempty"` // "/lib/x86_64-linux-gnu/libc.so.6", or "???"
	Offset   uint64 `json:"offset,omitempty"` // in Object, when the frame has a function and no line
}
