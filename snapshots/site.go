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
	// Library adds frame patterns (docs/plan.md, "Frame patterns") for
	// library code to DefaultLibrary; NoDefaultLibrary drops the defaults.
	Library          []string
	NoDefaultLibrary bool
	// Ignore drops every allocation whose stack (allocator side library
	// frames, site and callers) has a frame matching one of these
	// frame patterns, e.g. "_dl_allocate_tls".
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
	// AllocFns name the program's own allocator wrappers (the plan's
	// valgrind.alloc_fns): each is a wrapper from the start, detected or
	// not, so that its callers are the sites. A name matches a function as
	// massif prints it ("Pool::get(int)") or its qualified name
	// ("Pool::get"). Massif's xtmemory snapshots do not apply --alloc-fn
	// (docs/facts.md, fact 36).
	AllocFns []string
	// Programs are the paths of the program's own module (as given and
	// with symbolic links resolved): a frame in it is never library
	// code, even unnamed (a stripped binary's frames) or under a library
	// folder.
	Programs []string
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
	if tree == nil {
		return []Site{}
	}
	t, _ := HeapTreeOf(&Snapshot{Tree: tree}, nil)
	t.HeapBytes = 0
	an := newAnalyzer(opts)
	an.detectWrappers(t)
	sum := an.summarize(t)
	out := make([]Site, 0, len(sum.sites))
	for _, e := range sum.sites {
		out = append(out, Site{Frame: an.frames[e.frame], Stack: an.heaviest(e, nil), Library: an.library(e), Bytes: e.bytes})
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
	// allocFns are Options.AllocFns, by name.
	allocFns map[string]bool
	// tableIDs caches id for the frames of table: id+1 by FrameTable
	// number, 0 when not looked up yet.
	table    *FrameTable
	tableIDs []uint32
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
		allocFns:   allocFnSet(opts.AllocFns),
	}
}

func allocFnSet(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
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
	// Matched once per frame here: lib.is would remember it a second time.
	if an.lib.patterns.match(f) && !an.program(f) {
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
		if an.allocFns[f.Function] || an.allocFns[qualifiedName(f.Function)] {
			an.wrappers[n] = true
		}
	}
	an.fnOf = append(an.fnOf, n)
	return id
}

// program reports whether f is a frame of the program's own module.
func (an *analyzer) program(f Frame) bool {
	if f.Object == "" {
		return false
	}
	for _, p := range an.opts.Programs {
		if f.Object == p {
			return true
		}
	}
	return false
}

// idOf returns the analyzer's id of line i's frame. The ids of a
// FrameTable's frames are remembered, so that a tree costs one lookup per
// line.
func (an *analyzer) idOf(t *HeapTree, i int32) uint32 {
	if an.table != t.Frames {
		an.table, an.tableIDs = t.Frames, an.tableIDs[:0]
	}
	f := t.nodes[i].frame
	for int(f) >= len(an.tableIDs) {
		an.tableIDs = append(an.tableIDs, 0)
	}
	if id := an.tableIDs[f]; id != 0 {
		return id - 1
	}
	id := an.id(t.Frames.frames[f])
	an.tableIDs[f] = id + 1
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
func (an *analyzer) detectWrappers(t *HeapTree) bool {
	if t == nil || len(t.nodes) == 0 || an.opts.NoWrappers {
		return false
	}
	grew := false
	for round := 0; round < 4; round++ {
		var walk func(n int32)
		walk = func(n int32) {
			t.children(n, func(c int32) {
				if t.nodes[c].frame == belowFrame {
					return
				}
				id := an.idOf(t, c)
				if an.wrappers[an.fnOf[id]] {
					walk(c)
					return
				}
				if an.flags[id]&flagLibrary != 0 {
					return
				}
				fn := an.fnOf[id]
				cd := an.candidates[fn]
				if cd == nil {
					cd = &wrapperCandidate{line: id}
					an.candidates[fn] = cd
				}
				cd.lines(id)
				t.children(c, func(cc int32) {
					if t.nodes[cc].frame == belowFrame {
						return
					}
					if cid := an.idOf(t, cc); an.flags[cid]&flagLibrary == 0 {
						cd.caller(cid)
					}
				})
			})
		}
		walk(0)
		found := false
		for fn, cd := range an.candidates {
			if !an.wrappers[fn] && !cd.lines2 && cd.callers2 {
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
// function that calls the allocator directly: whether it allocates on
// more than one line, and whether more than one caller reaches it. A big
// program has thousands of such functions, so it keeps the first line and
// caller seen rather than sets of them.
type wrapperCandidate struct {
	line, first      uint32 // the first line and the first caller seen
	hasCaller        bool
	lines2, callers2 bool // a second line, a second caller seen
}

// lines records an allocating line of the function.
func (c *wrapperCandidate) lines(id uint32) {
	if id != c.line {
		c.lines2 = true
	}
}

// caller records a caller of the function's allocating line.
func (c *wrapperCandidate) caller(id uint32) {
	switch {
	case !c.hasCaller:
		c.first, c.hasCaller = id, true
	case id != c.first:
		c.callers2 = true
	}
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
	frame uint32 // the analyzer's id of the site's frame
	// libKey is the path key (see walker.key) of the site's library
	// frames: the ones along which the largest bytes were emitted, the
	// first such path on a tie; libBytes is that largest.
	libKey   string
	libSet   bool
	libBytes int64
	bytes    int64
	blocks   int64 // live blocks, when the summary has them
	// chains are the call paths into the site by path key (site first,
	// then callers), chainBytes their bytes.
	chains     keySet
	chainBytes []int64
	// parents are the path keys of the tree nodes under which this site's
	// key was completed; a bucket at one of them or above can hide it.
	parents keySet
}

// keySet is a small set of path keys, numbered in the order added. Most
// sites have one or two call paths and one parent: a slice searched in
// order costs far less than a map per site; a map indexes the keys once
// there are many.
type keySet struct {
	keys  []string
	index map[string]int
}

// find returns the number of key, or -1.
func (ks *keySet) find(key []byte) int {
	if ks.index != nil {
		if i, ok := ks.index[string(key)]; ok {
			return i
		}
		return -1
	}
	for i, k := range ks.keys {
		if k == string(key) {
			return i
		}
	}
	return -1
}

// add adds a key that find did not find and returns its number.
func (ks *keySet) add(key []byte) int {
	ks.keys = append(ks.keys, string(key))
	i := len(ks.keys) - 1
	switch {
	case ks.index != nil:
		ks.index[ks.keys[i]] = i
	case len(ks.keys) > 8:
		ks.index = make(map[string]int, 2*len(ks.keys))
		for j, k := range ks.keys {
			ks.index[k] = j
		}
	}
	return i
}

// chain returns the bytes of the call path key, and whether the site has
// it.
func (s *siteSum) chain(key string) (int64, bool) {
	if i := s.chains.find([]byte(key)); i >= 0 {
		return s.chainBytes[i], true
	}
	return 0, false
}

// stacks counts the call paths into a site that hold bytes on either side
// of a diff (other may be nil).
func (s *siteSum) stacks(other *siteSum) int {
	n := 0
	for i, k := range s.chains.keys {
		if s.chainBytes[i] != 0 {
			n++
		} else if other != nil {
			if o, _ := other.chain(k); o != 0 {
				n++
			}
		}
	}
	if other != nil {
		for i, k := range other.chains.keys {
			if _, ok := s.chain(k); !ok && other.chainBytes[i] != 0 {
				n++
			}
		}
	}
	return n
}

// heaviest returns the frames of the call path with the largest bytes,
// or, given the summary of the other side of a diff, the largest change.
func (an *analyzer) heaviest(s, other *siteSum) []Frame {
	best := -1
	var bestKey string
	var bestScore, bestBytes int64
	for i, k := range s.chains.keys {
		bytes := s.chainBytes[i]
		score := absBytes(bytes)
		if other != nil {
			o, _ := other.chain(k)
			score = absBytes(bytes - o)
		}
		if best < 0 || score > bestScore || (score == bestScore && (bytes > bestBytes || (bytes == bestBytes && k < bestKey))) {
			best, bestKey, bestScore, bestBytes = i, k, score, bytes
		}
	}
	if best < 0 {
		return []Frame{an.frames[s.frame]}
	}
	return an.framesOfKey(bestKey)
}

// library returns a site's library frames.
func (an *analyzer) library(s *siteSum) []Frame { return an.framesOfKey(s.libKey) }

// framesOfKey returns the frames a path key names, or an empty non-nil
// slice.
func (an *analyzer) framesOfKey(key string) []Frame {
	out := make([]Frame, 0, len(key)/4)
	for i := 0; i+4 <= len(key); i += 4 {
		out = append(out, an.frames[binary.LittleEndian.Uint32([]byte(key[i:i+4]))])
	}
	return out
}

// walker cuts one tree into sites.
type walker struct {
	an   *analyzer
	t    *HeapTree
	sum  *summary
	path []uint32 // frame ids from the root's child down
	key  []byte   // path as 4 bytes per frame: the key of a tree position
	kbuf []byte   // scratch for site keys
}

// summarize cuts a tree into sites.
func (an *analyzer) summarize(t *HeapTree) *summary {
	sum := &summary{
		heapBytes: t.HeapBytes,
		blocks:    t.Blocks,
		sites:     make(map[string]*siteSum),
		buckets:   make(map[string]struct{}),
	}
	if len(t.nodes) == 0 {
		return sum
	}
	root := t.nodes[0]
	sum.treeBytes = root.bytes
	w := &walker{an: an, sum: sum, t: t}
	// Bytes of the root that its children do not account for (a truncated
	// or inconsistent tree) belong to no site.
	sum.belowBytes += root.bytes - w.children(0, -1, false, false)
	return sum
}

// children walks the children of line n. site is the index in w.path of
// the site frame, -1 while every frame so far is library code; ignored
// and focused say whether a frame so far matched Ignore or Focus.
func (w *walker) children(n int32, site int, ignored, focused bool) int64 {
	var sum int64
	t := w.t
	for c := n + 1; c < t.nodes[n].end; c = t.nodes[c].end {
		sum += t.nodes[c].bytes
		if t.nodes[c].frame == belowFrame {
			w.bucket(c, site, ignored, focused)
			continue
		}
		w.node(c, site, ignored, focused)
	}
	return sum
}

func (w *walker) bucket(c int32, site int, ignored, focused bool) {
	n := &w.t.nodes[c]
	if n.bytes == 0 {
		return
	}
	w.sum.buckets[string(w.key)] = struct{}{}
	if site < 0 {
		w.sum.belowBytes += n.bytes
		return
	}
	// Callers folded into a bucket: the bytes stay with the site, on the
	// call path that ends here.
	w.emit(site, n.bytes, n.blocks, ignored, focused)
}

func (w *walker) node(i int32, site int, ignored, focused bool) {
	t := w.t
	id := w.an.idOf(t, i)
	w.path = append(w.path, id)
	w.key = binary.LittleEndian.AppendUint32(w.key, id)
	fl := w.an.flags[id]
	if site < 0 && !w.an.passes(id) {
		site = len(w.path) - 1
	}
	ignored = ignored || fl&flagIgnored != 0
	focused = focused || fl&flagFocused != 0

	var childBytes, childBlocks int64
	for c := i + 1; c < t.nodes[i].end; c = t.nodes[c].end {
		childBytes += t.nodes[c].bytes
		childBlocks += t.nodes[c].blocks
	}
	n := &t.nodes[i]
	if self, selfBlocks := n.bytes-childBytes, n.blocks-childBlocks; self != 0 || selfBlocks != 0 {
		w.emit(site, self, selfBlocks, ignored, focused)
	}
	w.children(i, site, ignored, focused)
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
	siteFrame := w.path[site]
	keyEnd := site + 1 // path[:keyEnd] makes the key
	// Keys are built in a reused buffer; map lookups with string(buf) do
	// not allocate, so only a new site or call path costs an allocation.
	kb := w.kbuf[:0]
	switch an.opts.GroupBy {
	case GroupByFunction:
		sf := an.frames[siteFrame]
		f := Frame{Function: sf.Function, File: sf.File}
		if f.File == "" {
			f.Object = sf.Object
		}
		siteFrame = an.id(f)
		kb = binary.LittleEndian.AppendUint32(append(kb, 'f'), siteFrame)
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
		e = &siteSum{frame: siteFrame}
		w.sum.sites[string(kb)] = e
	}
	e.bytes += bytes
	e.blocks += blocks
	if parent := w.key[:4*(keyEnd-1)]; e.parents.find(parent) < 0 {
		e.parents.add(parent)
	}
	lib := w.key[:4*site]
	if !e.libSet || (absBytes(bytes) > e.libBytes && string(lib) != e.libKey) {
		e.libKey, e.libSet = string(lib), true
	}
	if e.libKey == string(lib) {
		e.libBytes = max(e.libBytes, absBytes(bytes))
	}
	end := min(len(w.path), site+maxStack)
	ck := w.key[4*site : 4*end]
	c := e.chains.find(ck)
	if c < 0 {
		c = e.chains.add(ck)
		e.chainBytes = append(e.chainBytes, 0)
	}
	e.chainBytes[c] += bytes
}

// hiddenIn reports whether a site of another summary whose key was
// completed under one of parents may be inside one of s's below-threshold
// buckets: s has a bucket under that parent or under any of its ancestors.
func (s *summary) hiddenIn(e *siteSum) bool {
	if len(s.buckets) == 0 {
		return false
	}
	for _, p := range e.parents.keys {
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
	if a.Object != b.Object {
		return a.Object < b.Object
	}
	return a.Offset < b.Offset
}
