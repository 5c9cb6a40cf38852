package heaptrack

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/snapshots"
)

// The interpreted stream, as heaptrack_interpret 1.4 writes it (numbers
// in hex): `s LEN TEXT` interns a string (numbered from 1: module paths,
// function and file names); `i IP MODULE [FUNC [FILE LINE [FUNC FILE
// LINE]...]]` symbolizes an instruction pointer (numbered from 1), its
// frames innermost first (an inlined function, then the functions it is
// inlined into); `t IP PARENT` adds a stack (numbered from 1) whose
// innermost frame is IP, called from stack PARENT (0: none); `a SIZE
// STACK` numbers (from 0) a requested size allocated from a stack; `+ A`
// and `- A` allocate and free one block of allocation A. Frees of blocks
// the library never saw allocated are dropped by the interpreter. Other
// lines (v, X, I, c, R, A, #) are passed through or carry nothing a
// snapshot needs.

// cutPrefix starts the marker line a cut adds to the interpreter's input,
// which passes it through unchanged: "# snapctl-cut N".
const cutPrefix = "# snapctl-cut "

// RootName is the root line of a snapshot's tree, as massif names it.
const RootName = "(heap allocation functions) malloc/new/new[], --alloc-fns, etc."

// massifAllocFns are the allocation functions valgrind replaces whose
// stacks would otherwise differ: heaptrack's library sees malloc, called
// by libstdc++'s operator new, so a stack of `new` starts with operator
// new, while valgrind replaces operator new itself and its stacks start
// at the caller. Those leading frames are dropped. malloc, calloc and the
// other C functions are not here: heaptrack's stacks already start at
// their callers, and a frame inlined at that address that happens to be
// named calloc (ld.so's rtld-malloc.h) is kept, as massif keeps it.
var massifAllocFns = map[string]bool{
	"operator new(unsigned long)":                                            true,
	"operator new[](unsigned long)":                                          true,
	"operator new(unsigned long, std::nothrow_t const&)":                     true,
	"operator new[](unsigned long, std::nothrow_t const&)":                   true,
	"operator new(unsigned long, std::align_val_t)":                          true,
	"operator new[](unsigned long, std::align_val_t)":                        true,
	"operator new(unsigned long, std::align_val_t, std::nothrow_t const&)":   true,
	"operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)": true,
}

type frameRef struct {
	fn, file uint32 // string numbers, 0 when unknown
	line     int32
}

type ipInfo struct {
	addr   uint64
	module uint32
	frames []frameRef
}

type stack struct{ ip, parent uint32 }

type allocation struct {
	size  int64
	stack uint32
	live  int64 // blocks allocated and not freed
}

// Replayer replays an interpreted stream into live blocks per allocation
// (requested size and stack). Its memory grows with the distinct stacks,
// instruction pointers and (size, stack) pairs, not with the number of
// events.
type Replayer struct {
	strs   []string // [0] is ""
	ips    []ipInfo // [0] unused
	stacks []stack  // [0] unused
	allocs []allocation
	// LiveBytes and LiveBlocks are the totals so far.
	LiveBytes, LiveBlocks int64
	// Events counts the + and - lines replayed.
	Events int64
	line   int
	// frameCache holds the frames of each instruction pointer once a
	// cut has needed them (ipFrames).
	frameCache [][]snapshots.Frame
	// byStack and liveBuf are live's, kept from one cut to the next.
	byStack map[uint32]int
	liveBuf []liveStack
	// Mods, when set, names the frames the interpreter could not (by
	// module and offset, or from a module it did not know) and tells
	// heaptrack's own allocations from the program's.
	Mods *Modules
}

// NewReplayer returns a Replayer at the start of a stream.
func NewReplayer() *Replayer {
	return &Replayer{strs: []string{""}, ips: []ipInfo{{}}, stacks: []stack{{}}}
}

// StreamError is a line of the interpreted stream that could not be read.
type StreamError struct {
	Line int
	Text string
	Msg  string
}

func (e *StreamError) Error() string {
	return fmt.Sprintf("heaptrack stream line %d: %s: %q", e.Line, e.Msg, e.Text)
}

// Line replays one line (without its newline). It returns the number of
// a cut marker line and true.
func (r *Replayer) Line(l []byte) (cut int, isCut bool, err error) {
	r.line++
	if len(l) < 2 {
		return 0, false, nil
	}
	bad := func(msg string) error {
		t := l
		if len(t) > 120 {
			t = t[:120]
		}
		return &StreamError{Line: r.line, Text: string(t), Msg: msg}
	}
	rest := l[2:]
	switch l[0] {
	case '+', '-':
		a, ok := hex(rest)
		if !ok || a >= uint64(len(r.allocs)) {
			return 0, false, bad("unknown allocation")
		}
		al := &r.allocs[a]
		r.Events++
		if l[0] == '+' {
			al.live++
			r.LiveBlocks++
			r.LiveBytes += al.size
		} else {
			al.live--
			r.LiveBlocks--
			r.LiveBytes -= al.size
		}
	case 'a':
		n, ok := hexFields(rest, 2)
		if !ok || n[1] >= uint64(len(r.stacks)) {
			return 0, false, bad("bad allocation")
		}
		r.allocs = append(r.allocs, allocation{size: int64(n[0]), stack: uint32(n[1])})
	case 't':
		n, ok := hexFields(rest, 2)
		if !ok || n[0] >= uint64(len(r.ips)) || n[1] >= uint64(len(r.stacks)) {
			return 0, false, bad("bad stack")
		}
		r.stacks = append(r.stacks, stack{ip: uint32(n[0]), parent: uint32(n[1])})
	case 'i':
		n, ok := hexFields(rest, -1)
		if !ok || len(n) < 2 || len(n) > 3 && (len(n)-2)%3 != 0 {
			return 0, false, bad("bad instruction pointer")
		}
		ip := ipInfo{addr: n[0], module: uint32(n[1])}
		if len(n) == 3 {
			ip.frames = []frameRef{{fn: uint32(n[2])}}
		}
		for i := 2; len(n) > 3 && i+3 <= len(n); i += 3 {
			ip.frames = append(ip.frames, frameRef{fn: uint32(n[i]), file: uint32(n[i+1]), line: int32(n[i+2])})
		}
		for _, f := range ip.frames {
			if f.fn >= uint32(len(r.strs)) || f.file >= uint32(len(r.strs)) {
				return 0, false, bad("unknown string")
			}
		}
		r.ips = append(r.ips, ip)
	case 's':
		sz, text, ok := bytes.Cut(rest, []byte{' '})
		n, ok2 := hex(sz)
		if !ok || !ok2 || n != uint64(len(text)) {
			return 0, false, bad("bad string")
		}
		r.strs = append(r.strs, string(text))
	case '#':
		if bytes.HasPrefix(l, []byte(cutPrefix)) {
			k, err := strconv.Atoi(string(l[len(cutPrefix):]))
			if err != nil {
				return 0, false, bad("bad cut")
			}
			return k, true, nil
		}
	}
	return 0, false, nil
}

// hex parses a lowercase hex number.
func hex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

// hexFields parses want space-separated hex numbers (any number, at
// least one, when want < 0).
func hexFields(b []byte, want int) ([]uint64, bool) {
	var out []uint64
	for len(b) > 0 {
		f, rest, _ := bytes.Cut(b, []byte{' '})
		n, ok := hex(f)
		if !ok {
			return nil, false
		}
		out = append(out, n)
		b = rest
	}
	return out, len(out) > 0 && (want < 0 || len(out) == want)
}

// Snapshot returns the live heap as a massif-style detailed snapshot
// numbered index: the root holds every live byte and block, its children
// the allocation call sites (the innermost frame that is not an
// allocation function), their children the callers, down to the stack's
// outermost frame. A frame is keyed, as a massif tree line is, by its
// address and what it names; inlined frames share their address. Bytes
// are the sizes requested, as massif counts them.
func (r *Replayer) Snapshot(index int) *snapshots.Snapshot {
	return r.tree(index, r.live())
}

// liveStack is what one stack holds live at a cut.
type liveStack struct {
	stack         uint32
	bytes, blocks int64
}

// live returns the live bytes and blocks of each stack that holds some:
// the heap at this point of the stream, a few words a stack, which tree
// makes into a snapshot later, as long as the Replayer's tables (stacks,
// instruction pointers, strings, allocations' sizes and stacks) only grow.
// A cut the stop loop has not asked for yet is held this way: a tree of
// nodes with their frames, held for each stop the loop is behind, was
// snapctl's memory growing with that backlog (docs/facts.md, fact 130).
func (r *Replayer) live() []liveStack {
	if r.byStack == nil {
		r.byStack = make(map[uint32]int)
	}
	clear(r.byStack)
	out := r.liveBuf[:0]
	for _, a := range r.allocs {
		if a.live == 0 {
			continue
		}
		i, ok := r.byStack[a.stack]
		if !ok {
			i = len(out)
			r.byStack[a.stack] = i
			out = append(out, liveStack{stack: a.stack})
		}
		out[i].bytes += a.size * a.live
		out[i].blocks += a.live
	}
	r.liveBuf = out
	// A copy of its own, no larger than it needs.
	return append([]liveStack(nil), out...)
}

// tree makes the snapshot numbered index of the live stacks of a cut
// (live), as Snapshot describes it.
func (r *Replayer) tree(index int, live []liveStack) *snapshots.Snapshot {
	// A node's children are found by their frame's place in the stream
	// (instruction pointer and inlined frame): the interpreter numbers
	// each address once, so equal places are equal frames.
	type child struct {
		parent *snapshots.Node
		at     frameAt
	}
	root := &snapshots.Node{Frame: snapshots.Frame{Function: RootName}}
	kids := map[child]*snapshots.Node{}
	var at []frameAt
	for _, l := range live {
		at = r.frames(l.stack, at[:0])
		if len(at) > 0 && r.Mods != nil && r.Mods.heaptrackOwn(r.strs[r.ips[at[0].ip].module]) {
			// Allocated by a library loaded for heaptrack alone.
			continue
		}
		n := root
		n.Bytes += l.bytes
		n.Blocks += l.blocks
		for _, f := range at {
			c := kids[child{n, f}]
			if c == nil {
				c = &snapshots.Node{Frame: r.ipFrames(f.ip)[f.k]}
				kids[child{n, f}] = c
				n.Children = append(n.Children, c)
			}
			c.Bytes += l.bytes
			c.Blocks += l.blocks
			n = c
		}
	}
	sortTree(root)
	return &snapshots.Snapshot{Index: index, HeapBytes: root.Bytes, Kind: snapshots.TreeDetailed, Tree: root, Blocks: true}
}

// frameAt is one frame of an instruction pointer: ip's k-th, innermost
// first.
type frameAt struct {
	ip uint32
	k  int32
}

// ipFrames returns the frames of instruction pointer i, innermost first,
// made once and kept: a cut rebuilds its tree from them.
func (r *Replayer) ipFrames(i uint32) []snapshots.Frame {
	for len(r.frameCache) <= int(i) {
		r.frameCache = append(r.frameCache, nil)
	}
	if fs := r.frameCache[i]; fs != nil {
		return fs
	}
	ip := &r.ips[i]
	addr := "0x" + strconv.FormatUint(ip.addr, 16)
	if len(ip.frames) == 0 {
		f := snapshots.Frame{Addr: addr, Function: "???", Object: r.strs[ip.module]}
		if r.Mods != nil {
			if n, ok := r.Mods.name(r.strs[ip.module], ip.addr); ok {
				f = snapshots.Frame{Addr: addr, Function: n.function, Object: n.object}
				switch {
				case n.file != "":
					f.File, f.Line, f.Object = n.file, n.line, ""
				case !snapshots.ModuleOffset(f):
					f.Offset = n.offset
				}
			}
		}
		r.frameCache[i] = []snapshots.Frame{f}
		return r.frameCache[i]
	}
	fs := make([]snapshots.Frame, 0, len(ip.frames))
	// A frame without a line keeps its offset in the module, so that two
	// calls in one function stay two sites (docs/facts.md, fact 98).
	var off uint64
	if r.Mods != nil {
		off, _ = r.Mods.offset(r.strs[ip.module], ip.addr)
	}
	for _, fr := range ip.frames {
		f := snapshots.Frame{Addr: addr, Function: publicName(r.strs[fr.fn]), Line: int(fr.line)}
		if fr.file != 0 {
			f.File = filepath.Base(r.strs[fr.file])
		} else {
			f.Object, f.Offset = r.strs[ip.module], off
		}
		if f.Function == "" {
			f.Function = "???"
		}
		fs = append(fs, f)
	}
	r.frameCache[i] = fs
	return fs
}

// publicName is the name glibc's debug information gives one of its
// functions, as the program calls it: __GI___strdup is strdup (massif
// names the symbol the program called, heaptrack the function's own
// name). Only glibc's internal aliases of public functions are renamed.
func publicName(fn string) string {
	n, ok := strings.CutPrefix(fn, "__GI_")
	if !ok {
		return fn
	}
	if p, ok := strings.CutPrefix(n, "__"); ok && glibcPublic[p] {
		return p
	}
	return n
}

// glibcPublic are public glibc functions that allocate for their caller
// and whose code glibc names with two leading underscores.
var glibcPublic = map[string]bool{
	"strdup": true, "strndup": true, "wcsdup": true, "asprintf": true, "vasprintf": true,
	"getline": true, "getdelim": true, "open_memstream": true, "realpath": true,
}

// frames appends the frames of stack s, innermost first, without the
// operator new it starts with.
func (r *Replayer) frames(s uint32, out []frameAt) []frameAt {
	site := false
	for ; s != 0; s = r.stacks[s].parent {
		ip := r.stacks[s].ip
		for k, f := range r.ipFrames(ip) {
			if !site && massifAllocFns[f.Function] {
				continue
			}
			site = true
			out = append(out, frameAt{ip, int32(k)})
		}
	}
	return out
}

// sortTree orders every node's children as massif does: largest first,
// then by frame for a stable order.
func sortTree(n *snapshots.Node) {
	if len(n.Children) > 1 {
		// The frames' texts are made once, not at each comparison.
		type keyed struct {
			n   *snapshots.Node
			key string
		}
		ks := make([]keyed, len(n.Children))
		for i, c := range n.Children {
			ks[i] = keyed{c, snapshots.FrameString(c.Frame) + c.Frame.Addr}
		}
		sort.Slice(ks, func(i, j int) bool {
			a, b := ks[i], ks[j]
			if a.n.Bytes != b.n.Bytes {
				return a.n.Bytes > b.n.Bytes
			}
			return a.key < b.key
		})
		for i, k := range ks {
			n.Children[i] = k.n
		}
	}
	for _, c := range n.Children {
		sortTree(c)
	}
}
