package snapshots

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// GroupBy says how allocations are gathered into the rows of a diff.
type GroupBy int

const (
	// GroupBySite gathers allocations by call site: function and file:line
	// of the first frame in the user's own code.
	GroupBySite GroupBy = iota
	// GroupByFunction gathers the sites of one function (in one file).
	GroupByFunction
	// GroupByStack keeps apart the call paths that reach a site: the site
	// and its first Options.Depth callers (all of them when Depth is 0).
	GroupByStack
)

// ParseGroupBy reads "site", "function" or "stack".
func ParseGroupBy(s string) (GroupBy, error) {
	switch s {
	case "", "site":
		return GroupBySite, nil
	case "function", "func":
		return GroupByFunction, nil
	case "stack":
		return GroupByStack, nil
	}
	return 0, fmt.Errorf("unknown grouping %q (want site, function or stack)", s)
}

func (g GroupBy) String() string {
	switch g {
	case GroupByFunction:
		return "function"
	case GroupByStack:
		return "stack"
	}
	return "site"
}

// Options control how allocation trees are cut into call sites and which
// allocations count. The zero value groups by site with the default library
// patterns and no filter.
type Options struct {
	GroupBy GroupBy
	// Depth is the number of callers that GroupByStack keeps in a key;
	// 0 keeps the whole stack.
	Depth int
	// Library adds FramePatterns for library code to DefaultLibrary;
	// NoDefaultLibrary drops the defaults.
	Library          []string
	NoDefaultLibrary bool
	// Ignore drops every allocation whose stack (allocator side library
	// frames, site and callers) has a frame matching one of these
	// FramePatterns, e.g. "_dl_allocate_tls".
	Ignore []string
	// Focus and FocusFrames keep only the allocations whose stack has a
	// frame matching one of the Focus patterns or one of the FocusFrames
	// (function, file base name and line; Line 0 matches any line). With
	// neither set every allocation is kept. Ignore wins over focus.
	Focus       []string
	FocusFrames []Frame
	// Unchanged keeps sites whose bytes did not change in a diff's Sites.
	Unchanged bool
	// NoWrappers turns off the detection of allocation wrappers (see
	// analyzer.detectWrappers): the site is then always the first frame
	// outside library code.
	NoWrappers bool
}

// maxStack bounds the frames kept for a stack; massif's own --depth
// default is 30.
const maxStack = 64

// Site is the bytes one tree holds at one call site.
type Site struct {
	Frame Frame `json:"frame"`
	// Stack runs from the site outwards: the site, its caller, and so on,
	// along the heaviest call path into the site.
	Stack []Frame `json:"stack"`
	// Library are the library frames between the allocator and the site,
	// the allocator's caller first ("std::__new_allocator<...>::allocate").
	Library []Frame `json:"library,omitempty"`
	Bytes   int64   `json:"bytes"`
}

// Sites gathers one allocation tree by call site, the heaviest first. The
// tree may be a delta tree from DiffTree: sites are linear in the bytes, so
// the sites of DiffTree(a, b) are the differences of the sites of a and b.
func Sites(tree *Node, opts Options) []Site {
	an := newAnalyzer(opts)
	an.detectWrappers(tree)
	sum := an.summarize(tree, 0, false)
	out := make([]Site, 0, len(sum.sites))
	for _, e := range sum.sites {
		out = append(out, Site{Frame: e.frame, Stack: e.heaviest(nil).frames, Library: e.library, Bytes: e.bytes})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := absBytes(out[i].Bytes), absBytes(out[j].Bytes); a != b {
			return a > b
		}
		return frameLess(out[i].Frame, out[j].Frame)
	})
	return out
}

// analyzer holds what the summaries of one diff or series share: the
// options, the library decisions and the frame table that makes keys
// comparable between snapshots.
type analyzer struct {
	opts    Options
	lib     *library
	ignore  frameFilter
	focus   frameFilter
	ids     map[Frame]uint32
	frames  []Frame
	flags   []frameFlags // by id
	focused bool         // a focus is set
	// fnOf maps a frame id to its function's number in fns (function and
	// file, or function and object): wrappers are functions, whatever
	// the line.
	fnOf []int
	fns  map[Frame]int
	// wrappers are the functions found to be allocation wrappers (see
	// detectWrappers), by number; candidates what the trees said so far.
	wrappers   map[int]bool
	candidates map[int]*wrapperCandidate
}

type frameFlags uint8

const (
	flagLibrary frameFlags = 1 << iota
	flagIgnored
	flagFocused
)

func newAnalyzer(opts Options) *analyzer {
	return &analyzer{
		opts:       opts,
		lib:        newLibrary(&opts),
		ignore:     compilePatterns(opts.Ignore),
		focus:      compilePatterns(opts.Focus),
		ids:        make(map[Frame]uint32),
		focused:    len(opts.Focus) > 0 || len(opts.FocusFrames) > 0,
		fns:        make(map[Frame]int),
		wrappers:   make(map[int]bool),
		candidates: make(map[int]*wrapperCandidate),
	}
}

// id interns a frame (without its address) and works out its flags once.
func (an *analyzer) id(f Frame) uint32 {
	f.Addr = ""
	if id, ok := an.ids[f]; ok {
		return id
	}
	id := uint32(len(an.frames))
	an.ids[f] = id
	an.frames = append(an.frames, f)
	var fl frameFlags
	if an.lib.is(f) {
		fl |= flagLibrary
	}
	if an.ignore.match(f) {
		fl |= flagIgnored
	}
	if an.focus.match(f) {
		fl |= flagFocused
	}
	for _, w := range an.opts.FocusFrames {
		if matchFrameExact(w, f) {
			fl |= flagFocused
		}
	}
	an.flags = append(an.flags, fl)
	fn := Frame{Function: f.Function, File: f.File}
	if f.File == "" {
		fn.Object = f.Object
	}
	n, ok := an.fns[fn]
	if !ok {
		n = len(an.fns)
		an.fns[fn] = n
	}
	an.fnOf = append(an.fnOf, n)
	return id
}

// passes reports whether the frame id passes allocations on to its caller
// rather than being a site: library code, or a detected wrapper.
func (an *analyzer) passes(id uint32) bool {
	return an.flags[id]&flagLibrary != 0 || an.wrappers[an.fnOf[id]]
}

// detectWrappers finds the program's allocation wrappers in tree and adds
// them to an.wrappers; it reports whether it found any new one.
//
// A wrapper (mg_malloc, jv_mem_alloc, xmalloc) gets an allocation from the
// allocator and hands it to its caller, for many callers: reporting it as
// the site would merge unrelated allocations into one row. Over the trees
// the analyzer has seen (both sides of a diff, every hit of a series so
// far), a function is a wrapper when
//
//   - it calls the allocator itself: its frame is a child of the tree's
//     root (or of a wrapper's frame). A function that allocates through
//     library code, a std::vector's push_back, owns what it grows and
//     stays the site;
//   - all its allocations come from one line: a function that allocates on
//     several lines does more than pass one allocation on;
//   - that line is reached from at least two distinct callers (function
//     and line) that are not library code: with one caller there is
//     nothing to tell apart, and the function stays the site;
//
// so the site becomes each caller. Wrappers of wrappers are found by
// repeating the search. Once found, a function stays a wrapper for the
// analyzer's life, so that the sites of a series keep their keys; its
// frame is listed with the library frames of the sites it serves.
// Massif's --alloc-fn (the plan's alloc_fns) removes a wrapper that this
// misses, e.g. one called from a single place.
func (an *analyzer) detectWrappers(tree *Node) bool {
	if tree == nil || an.opts.NoWrappers {
		return false
	}
	grew := false
	for round := 0; round < 4; round++ {
		var walk func(n *Node)
		walk = func(n *Node) {
			for _, c := range n.Children {
				if c == nil || c.Below {
					continue
				}
				id := an.id(c.Frame)
				if an.wrappers[an.fnOf[id]] {
					walk(c)
					continue
				}
				if an.flags[id]&flagLibrary != 0 {
					continue
				}
				fn := an.fnOf[id]
				cd := an.candidates[fn]
				if cd == nil {
					cd = &wrapperCandidate{lines: make(map[uint32]bool), callers: make(map[uint32]bool)}
					an.candidates[fn] = cd
				}
				cd.lines[id] = true
				for _, cc := range c.Children {
					if cc == nil || cc.Below {
						continue
					}
					if cid := an.id(cc.Frame); an.flags[cid]&flagLibrary == 0 {
						cd.callers[cid] = true
					}
				}
			}
		}
		walk(tree)
		found := false
		for fn, cd := range an.candidates {
			if !an.wrappers[fn] && len(cd.lines) == 1 && len(cd.callers) >= 2 {
				an.wrappers[fn] = true
				found = true
			}
		}
		if !found {
			break
		}
		grew = true
	}
	return grew
}

// wrapperCandidate is what the trees an analyzer has seen say of a
// function that calls the allocator directly: its allocating lines and
// their callers.
type wrapperCandidate struct {
	lines   map[uint32]bool
	callers map[uint32]bool
}

// summary is one snapshot cut into sites. It keeps no tree, so that a
// series holds only the previous snapshot's summary.
type summary struct {
	heapBytes     int64 // mem_heap_B
	blocks        bool  // the tree had block counts
	treeBytes     int64 // the root's bytes
	belowBytes    int64 // below-threshold buckets not inside any site
	filteredBytes int64 // dropped by Ignore or Focus
	sites         map[string]*siteSum
	// buckets holds the path keys (see walker.key) of the parents of
	// below-threshold buckets that hold bytes.
	buckets map[string]struct{}
}

type siteSum struct {
	frame    Frame
	library  []Frame
	libKey   string // the path key of library
	libBytes int64  // the largest bytes emitted along library
	bytes    int64
	blocks   int64 // live blocks, when the summary has them
	chains   map[string]*chainSum
	// parents are the path keys of the tree nodes under which this site's
	// key was completed; a bucket at one of them or above can hide it.
	parents map[string]struct{}
}

type chainSum struct {
	frames []Frame // site first, then callers
	bytes  int64
}

// stacks counts the call paths into a site that hold bytes on either side
// of a diff (other may be nil).
func (s *siteSum) stacks(other *siteSum) int {
	n := 0
	for k, c := range s.chains {
		if c.bytes != 0 || (other != nil && other.chains[k] != nil && other.chains[k].bytes != 0) {
			n++
		}
	}
	if other != nil {
		for k, c := range other.chains {
			if s.chains[k] == nil && c.bytes != 0 {
				n++
			}
		}
	}
	return n
}

// heaviest returns the call path with the largest bytes, or, given the
// summary of the other side of a diff, the largest change.
func (s *siteSum) heaviest(other *siteSum) *chainSum {
	var best *chainSum
	var bestKey string
	var bestScore, bestBytes int64
	for k, c := range s.chains {
		score, bytes := absBytes(c.bytes), c.bytes
		if other != nil {
			var o int64
			if oc := other.chains[k]; oc != nil {
				o = oc.bytes
			}
			score = absBytes(c.bytes - o)
		}
		if best == nil || score > bestScore || (score == bestScore && (bytes > bestBytes || (bytes == bestBytes && k < bestKey))) {
			best, bestKey, bestScore, bestBytes = c, k, score, bytes
		}
	}
	if best == nil {
		return &chainSum{frames: []Frame{s.frame}}
	}
	return best
}

// walker cuts one tree into sites.
type walker struct {
	an   *analyzer
	sum  *summary
	path []uint32 // frame ids from the root's child down
	key  []byte   // path as 4 bytes per frame: the key of a tree position
	kbuf []byte   // scratch for site keys
}

// summarize cuts a tree into sites; blocks says whether its nodes carry
// block counts (Node.Blocks).
func (an *analyzer) summarize(tree *Node, heapBytes int64, blocks bool) *summary {
	sum := &summary{
		heapBytes: heapBytes,
		blocks:    blocks,
		sites:     make(map[string]*siteSum),
		buckets:   make(map[string]struct{}),
	}
	if tree == nil {
		return sum
	}
	sum.treeBytes = tree.Bytes
	w := &walker{an: an, sum: sum}
	// Bytes of the root that its children do not account for (a truncated
	// or inconsistent tree) belong to no site.
	sum.belowBytes += tree.Bytes - w.children(tree, -1, false, false)
	return sum
}

// children walks the children of n. site is the index in w.path of the
// site frame, -1 while every frame so far is library code; ignored and
// focused say whether a frame so far matched Ignore or Focus.
func (w *walker) children(n *Node, site int, ignored, focused bool) int64 {
	var sum int64
	for _, c := range n.Children {
		if c == nil {
			continue
		}
		sum += c.Bytes
		if c.Below {
			w.bucket(c, site, ignored, focused)
			continue
		}
		w.node(c, site, ignored, focused)
	}
	return sum
}

func (w *walker) bucket(c *Node, site int, ignored, focused bool) {
	if c.Bytes == 0 {
		return
	}
	w.sum.buckets[string(w.key)] = struct{}{}
	if site < 0 {
		w.sum.belowBytes += c.Bytes
		return
	}
	// Callers folded into a bucket: the bytes stay with the site, on the
	// call path that ends here.
	w.emit(site, c.Bytes, c.Blocks, ignored, focused)
}

func (w *walker) node(n *Node, site int, ignored, focused bool) {
	id := w.an.id(n.Frame)
	w.path = append(w.path, id)
	w.key = binary.LittleEndian.AppendUint32(w.key, id)
	fl := w.an.flags[id]
	if site < 0 && !w.an.passes(id) {
		site = len(w.path) - 1
	}
	ignored = ignored || fl&flagIgnored != 0
	focused = focused || fl&flagFocused != 0

	var childBytes, childBlocks int64
	for _, c := range n.Children {
		if c != nil {
			childBytes += c.Bytes
			childBlocks += c.Blocks
		}
	}
	if self, selfBlocks := n.Bytes-childBytes, n.Blocks-childBlocks; self != 0 || selfBlocks != 0 {
		w.emit(site, self, selfBlocks, ignored, focused)
	}
	w.children(n, site, ignored, focused)
	w.path = w.path[:len(w.path)-1]
	w.key = w.key[:len(w.key)-4]
}

// emit adds bytes (and blocks) allocated along the current path.
func (w *walker) emit(site int, bytes, blocks int64, ignored, focused bool) {
	if ignored || (w.an.focused && !focused) {
		w.sum.filteredBytes += bytes
		return
	}
	if site < 0 {
		// Library code all the way: the allocator's caller is the site.
		site = 0
	}
	an := w.an
	siteFrame := an.frames[w.path[site]]
	keyEnd := site + 1 // path[:keyEnd] makes the key
	// Keys are built in a reused buffer; map lookups with string(buf) do
	// not allocate, so only a new site or call path costs an allocation.
	kb := w.kbuf[:0]
	switch an.opts.GroupBy {
	case GroupByFunction:
		f := Frame{Function: siteFrame.Function, File: siteFrame.File}
		if f.File == "" {
			f.Object = siteFrame.Object
		}
		kb = binary.LittleEndian.AppendUint32(append(kb, 'f'), an.id(f))
		siteFrame = f
	case GroupByStack:
		keyEnd = len(w.path)
		if d := an.opts.Depth; d > 0 && site+1+d < keyEnd {
			keyEnd = site + 1 + d
		}
		kb = append(append(kb, 's'), w.key[4*site:4*keyEnd]...)
	default:
		kb = append(append(kb, 's'), w.key[4*site:4*(site+1)]...)
	}
	w.kbuf = kb
	e := w.sum.sites[string(kb)]
	if e == nil {
		e = &siteSum{frame: siteFrame, chains: make(map[string]*chainSum), parents: make(map[string]struct{})}
		w.sum.sites[string(kb)] = e
	}
	e.bytes += bytes
	e.blocks += blocks
	parent := w.key[:4*(keyEnd-1)]
	if _, ok := e.parents[string(parent)]; !ok {
		e.parents[string(parent)] = struct{}{}
	}
	if e.library == nil || (absBytes(bytes) > e.libBytes && string(w.key[:4*site]) != e.libKey) {
		e.library = w.framesOf(0, site)
		e.libKey = string(w.key[:4*site])
	}
	if e.libKey == string(w.key[:4*site]) {
		e.libBytes = max(e.libBytes, absBytes(bytes))
	}
	end := min(len(w.path), site+maxStack)
	ck := w.key[4*site : 4*end]
	c := e.chains[string(ck)]
	if c == nil {
		c = &chainSum{frames: w.framesOf(site, end)}
		e.chains[string(ck)] = c
	}
	c.bytes += bytes
}

// framesOf returns the frames of w.path[i:j], or an empty non-nil slice.
func (w *walker) framesOf(i, j int) []Frame {
	out := make([]Frame, 0, j-i)
	for _, id := range w.path[i:j] {
		out = append(out, w.an.frames[id])
	}
	return out
}

// hiddenIn reports whether a site of another summary whose key was
// completed under one of parents may be inside one of s's below-threshold
// buckets: s has a bucket under that parent or under any of its ancestors.
func (s *summary) hiddenIn(e *siteSum) bool {
	if len(s.buckets) == 0 {
		return false
	}
	for p := range e.parents {
		for k := 0; k <= len(p); k += 4 {
			if _, ok := s.buckets[p[:k]]; ok {
				return true
			}
		}
	}
	return false
}

func absBytes(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// frameLess orders frames by name, for stable output.
func frameLess(a, b Frame) bool {
	if c := strings.Compare(a.Function, b.Function); c != 0 {
		return c < 0
	}
	if c := strings.Compare(a.File, b.File); c != 0 {
		return c < 0
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return a.Object < b.Object
}
