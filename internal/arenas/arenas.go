// Package arenas reads glibc's allocator from a stopped process's memory:
// what mallinfo2() would return, added up as glibc's int_mallinfo does,
// without calling anything in the process. The memory comes in large
// blocks from /proc/PID/mem (read once each per reading), and the free
// lists are walked here, so that a stop costs about the same on any heap
// (docs/design.md, "Threaded programs, natively"; docs/facts.md, fact
// 86).
//
// The process must be stopped, every thread of it, for the figures to be
// exact: the lists change under a running thread.
package arenas

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"
)

// Layout says where glibc keeps the allocator's state in one process, as
// Find finds it in libc's symbol table: main_arena and mp_, the
// offsets of n_mmaps (an int) and mmapped_mem in mp_, and whether fastbin
// links are safe-linked (glibc 2.32 on: the link at A holds next ^ (A >>
// 12)). The struct malloc_state layout is glibc's from 2.27 to 2.41
// (2200 bytes).
type Layout struct {
	MainArena  uint64 `json:"main_arena"`
	MP         uint64 `json:"mp"`
	NMmaps     int    `json:"n_mmaps"`
	MmappedMem int    `json:"mmapped_mem"`
	Mangled    bool   `json:"mangled"`
}

// Mallinfo is struct mallinfo2, field for field.
type Mallinfo struct {
	Arena    uint64 `json:"arena"`
	Ordblks  uint64 `json:"ordblks"`
	Smblks   uint64 `json:"smblks"`
	Hblks    uint64 `json:"hblks"`
	Hblkhd   uint64 `json:"hblkhd"`
	Usmblks  uint64 `json:"usmblks"`
	Fsmblks  uint64 `json:"fsmblks"`
	Uordblks uint64 `json:"uordblks"`
	Fordblks uint64 `json:"fordblks"`
	Keepcost uint64 `json:"keepcost"`
}

// Result is one reading: the arenas in main_arena's ring, how many of
// their locks were held (then nothing else was read: a thread is inside
// the allocator and the lists may be half changed), and the figures.
type Result struct {
	Arenas   int      `json:"arenas"`
	Locked   int      `json:"locked"`
	Mallinfo Mallinfo `json:"mallinfo2"`
	// Chunks is how many free chunks were walked, BytesRead how much of
	// the process's memory was read to do it.
	Chunks    uint64 `json:"chunks"`
	BytesRead uint64 `json:"bytes_read"`
}

// struct malloc_state: mutex (an int, 0 when free), flags,
// have_fastchunks, fastbinsY[10], top, last_remainder, bins[254],
// binmap[4], next, next_free, attached_threads, system_mem,
// max_system_mem.
const (
	msMutex     = 0
	msSize      = 2200
	msFastbins  = 16
	msTop       = 96
	msBins      = 112
	msNext      = 2160
	msSystemMem = 2184
	nFastbins   = 10
	nBins       = 128
	maxArenas   = 65536
	// minChunk is the smallest chunk's size.
	minChunk = 32
)

// struct malloc_chunk: the size word at chunkHead (its low sizeFlags
// bits are flags), the fd and bk links right after it at chunkLinks,
// where a chunk's user memory starts; chunks are chunkAlign-aligned.
// Safe-linking (glibc 2.32) stores a fastbin link at address A as
// next ^ (A >> mangleShift).
const (
	chunkHead   = 8
	chunkLinks  = 16
	sizeFlags   = 7
	chunkAlign  = 16
	mangleShift = 12
)

// ErrCorrupt is what a heap whose lists do not hold together is: a
// misaligned link, a bin whose links disagree, a list longer than the
// heap can hold. Errors wrap it.
var ErrCorrupt = errors.New("the heap's lists do not hold together")

// A Reader reads one process's allocator, again at every stop. It keeps
// the memory it copied the heap into from one reading to the next, so
// that a reading writes into pages already there: on the development
// machine a fresh page's first touch cost more than copying it (docs/facts.md,
// fact 86). It holds at most maxBytes; Close gives it back.
type Reader struct {
	m *memory
}

// NewReader returns a Reader of the process whose memory src reads
// (/proc/PID/mem, or anything that reads at addresses).
func NewReader(src io.ReaderAt) *Reader {
	return &Reader{m: newMemory(src)}
}

// Read reads the allocator's state now. The process must be stopped,
// every thread of it.
func (r *Reader) Read(l Layout) (Result, error) {
	m := r.m
	m.reset()
	m.mangled = l.Mangled
	res, err := read(m, l)
	res.BytesRead = m.read
	return res, err
}

// Close gives back the memory the Reader holds.
func (r *Reader) Close() { r.m.release() }

// Read reads the allocator of the process whose memory src reads, once.
func Read(src io.ReaderAt, l Layout) (Result, error) {
	r := NewReader(src)
	defer r.Close()
	return r.Read(l)
}

type arena struct {
	addr  uint64
	state []byte
}

func read(m *memory, l Layout) (Result, error) {
	var r Result
	if l.MainArena == 0 || l.MP == 0 || l.NMmaps < 0 || l.MmappedMem < 0 {
		return r, fmt.Errorf("no main_arena or mp_")
	}
	var ring []arena
	var systemMem uint64
	for addr := l.MainArena; ; {
		state := make([]byte, msSize)
		if err := m.readAt(state, addr); err != nil {
			return r, fmt.Errorf("arena 0x%x: %w", addr, err)
		}
		ring = append(ring, arena{addr, state})
		if le32(state, msMutex) != 0 {
			r.Locked++
		}
		systemMem += le64(state, msSystemMem)
		addr = le64(state, msNext)
		if addr == l.MainArena {
			break
		}
		if addr == 0 || len(ring) >= maxArenas {
			return r, fmt.Errorf("the list of arenas does not lead back to main_arena: %w", ErrCorrupt)
		}
	}
	r.Arenas = len(ring)
	if r.Locked > 0 {
		return r, nil
	}
	// No list can hold more chunks than the heaps have room for (a
	// chunk is at least minChunk bytes): a longer walk is going round a
	// cycle.
	limit := systemMem/minChunk + 1
	w := walker{m: m, limit: limit, sums: make([]sums, len(ring))}
	for i, a := range ring {
		if err := w.start(i, a); err != nil {
			return r, fmt.Errorf("arena 0x%x: %w", a.addr, err)
		}
	}
	err := w.walk()
	r.Chunks = w.chunks
	if err != nil {
		return r, err
	}
	mi := &r.Mallinfo
	for i, a := range ring {
		// int_mallinfo (malloc.c): the top chunk, every chunk in a
		// fastbin and in a regular bin is free, the rest of system_mem
		// is in use.
		s, systemMem := w.sums[i], le64(a.state, msSystemMem)
		avail := s.top + s.fastavail + s.binavail
		mi.Smblks += s.nfast
		mi.Ordblks += 1 + s.nbin // the top chunk always counts
		mi.Fordblks += avail
		mi.Uordblks += systemMem - avail
		mi.Arena += systemMem
		mi.Fsmblks += s.fastavail
		if a.addr == l.MainArena {
			mi.Keepcost = s.top
		}
	}
	mp := make([]byte, max(l.NMmaps+4, l.MmappedMem+8))
	if err := m.readAt(mp, l.MP); err != nil {
		return r, fmt.Errorf("mp_: %w", err)
	}
	mi.Hblks = uint64(int64(int32(le32(mp, l.NMmaps))))
	mi.Hblkhd = le64(mp, l.MmappedMem)
	return r, nil
}

// sums are one arena's free chunks: the top chunk's size, the fastbins'
// and the regular bins' chunks and bytes.
type sums struct {
	top              uint64
	nfast, fastavail uint64
	nbin, binavail   uint64
}

// A list is one free list being walked: a fastbin (singly linked, ends
// at 0) or a regular bin (doubly linked, walked from its last chunk
// along bk back to the bin itself, each chunk's fd pointing to the one
// the walk came from).
type list struct {
	arena int
	addr  uint64 // the arena's
	fast  bool
	bin   int
	p     uint64 // the next chunk
	after uint64 // a bin's: the chunk the walk came from
	end   uint64 // a bin's: the bin itself
	n     uint64
	// parks counts the times the list waited for a block: a list that
	// waits at most steps jumps about the heap.
	parks uint64
}

// A walker walks every free list of every arena at once, a block of
// memory at a time: each list goes on as long as its next chunk lies in
// memory already read, then waits for its block; the next block read is
// the one nearest the last, among those lists wait for. Lists that run
// through the heap in the same direction (a fastbin fills in the order
// the program frees) so read each block once, whatever the number of
// lists, even where the heap is bigger than the memory the walk keeps.
type walker struct {
	m       *memory
	limit   uint64
	sums    []sums
	lists   []list
	waiting map[uint64][]int // by block, the lists whose next chunk lies there
	chunks  uint64
	mangled bool
}

// start adds arena i's lists.
func (w *walker) start(i int, a arena) error {
	state := a.state
	top := le64(state, msTop)
	if top == 0 {
		// An allocator not yet initialized: mallinfo2() would set it up,
		// with an empty top and empty bins.
		return nil
	}
	size, err := w.m.word(top + chunkHead)
	if err != nil {
		return fmt.Errorf("the top chunk at 0x%x: %w", top, err)
	}
	w.sums[i].top = size &^ sizeFlags
	for f := 0; f < nFastbins; f++ {
		if p := le64(state, msFastbins+8*f); p != 0 {
			w.lists = append(w.lists, list{arena: i, addr: a.addr, fast: true, bin: f, p: p})
		}
	}
	for b := 1; b < nBins; b++ {
		// bin_at(b) is seen as a chunk whose fd lies at bins[2(b-1)];
		// last(bin) is its bk, the bin itself while it is empty.
		bin := a.addr + msBins + 16*uint64(b-1) - chunkLinks
		if p := le64(state, msBins+16*(b-1)+8); p != bin {
			w.lists = append(w.lists, list{arena: i, addr: a.addr, bin: b, p: p, after: bin, end: bin})
		}
	}
	return nil
}

func (w *walker) walk() error {
	w.waiting = make(map[uint64][]int)
	for i := range w.lists {
		w.wait(i)
	}
	last := uint64(0)
	for len(w.waiting) > 0 {
		var next uint64
		best := ^uint64(0)
		for key := range w.waiting {
			d := key - last
			if key < last {
				d = last - key
			}
			if d < best || d == best && key < next {
				next, best = key, d
			}
		}
		ready := w.waiting[next]
		delete(w.waiting, next)
		for _, i := range ready {
			if err := w.run(i); err != nil {
				l := &w.lists[i]
				what := fmt.Sprintf("bin %d", l.bin)
				if l.fast {
					what = fmt.Sprintf("fastbin %d", l.bin)
				}
				return fmt.Errorf("arena 0x%x: %s: %w", l.addr, what, err)
			}
		}
		last = next
	}
	return nil
}

// wait puts list i with the lists waiting for its next chunk's block.
func (w *walker) wait(i int) {
	key := (w.lists[i].p + chunkHead) >> blockShift
	w.waiting[key] = append(w.waiting[key], i)
}

// run walks list i until it ends, or waits for a block not read yet.
func (w *walker) run(i int) error {
	l := &w.lists[i]
	s := &w.sums[l.arena]
	w.m.whole = l.parks < 8 || l.parks*4 < l.n
	for {
		p := l.p
		if l.fast {
			if p&(chunkAlign-1) != 0 {
				return fmt.Errorf("a chunk at 0x%x is misaligned: %w", p, ErrCorrupt)
			}
			v, err := w.m.words(p+chunkHead, 2)
			if err != nil {
				return fmt.Errorf("chunk 0x%x: %w", p, err)
			}
			s.fastavail += v[0] &^ sizeFlags
			s.nfast++
			if w.m.mangled {
				l.p = ((p + chunkLinks) >> mangleShift) ^ v[1]
			} else {
				l.p = v[1]
			}
		} else {
			v, err := w.m.words(p+chunkHead, 3)
			if err != nil {
				return fmt.Errorf("chunk 0x%x: %w", p, err)
			}
			if v[1] != l.after {
				return fmt.Errorf("chunk 0x%x's forward link is not 0x%x: %w", p, l.after, ErrCorrupt)
			}
			s.binavail += v[0] &^ sizeFlags
			s.nbin++
			l.p, l.after = v[2], p
		}
		w.chunks++
		l.n++
		if l.n > w.limit {
			return fmt.Errorf("the list does not end within the %d chunks the heaps can hold: %w", w.limit, ErrCorrupt)
		}
		if l.fast && l.p == 0 || !l.fast && l.p == l.end {
			return nil
		}
		if !w.m.resident(l.p+chunkHead) || !w.m.resident(l.p+chunkLinks+15) {
			l.parks++
			w.wait(i)
			return nil
		}
	}
}

func le32(b []byte, off int) uint32 { return binary.LittleEndian.Uint32(b[off:]) }
func le64(b []byte, off int) uint64 { return binary.LittleEndian.Uint64(b[off:]) }

// Memory is read in blocks of blockSize bytes, aligned, each once per
// reading: a free list mostly goes from one chunk to a neighbour, so a
// block read for one chunk serves the next ones. A list that jumps about
// the heap (a large bin, sorted by size) has only the page it needs read
// (whole is false). Blocks live in mmapped slabs kept from one reading to
// the next, at most maxBytes of them: past that (a heap bigger than
// maxBytes) the blocks read so far are dropped and their slabs reused.
const (
	blockShift = 16
	blockSize  = 1 << blockShift
	pageShift  = 12
	pageSize   = 1 << pageShift
	slabSize   = 16 << 20
	maxBytes   = 256 << 20
)

// A block is blockSize bytes of the process from an aligned address,
// read a page or more at a time: valid holds a bit for each page read,
// tried for each page a read was attempted for.
type block struct {
	data         []byte
	valid, tried uint16
}

type memory struct {
	src io.ReaderAt
	// mangled: fastbin links are safe-linked (Layout.Mangled).
	mangled bool
	// whole: a block is read whole, else a page at a time.
	whole bool
	// blocks maps an address >> blockShift to its block.
	blocks map[uint64]*block
	// The last block found, the common case.
	lastKey uint64
	last    *block
	// slabs are the mmapped memory blocks are read into, used in order:
	// slab next, from offset used.
	slabs      [][]byte
	next, used int
	read       uint64
	scratch    [32]byte
	wordBuf    [4]uint64
}

func newMemory(src io.ReaderAt) *memory {
	return &memory{src: src, blocks: make(map[uint64]*block), lastKey: ^uint64(0), whole: true}
}

// reset starts a reading: nothing read yet, the slabs reused from the
// first.
func (m *memory) reset() {
	clear(m.blocks)
	m.lastKey, m.last = ^uint64(0), nil
	m.next, m.used, m.read = 0, 0, 0
	m.whole = true
}

func (m *memory) release() {
	for _, s := range m.slabs {
		syscall.Munmap(s)
	}
	m.slabs = nil
	m.reset()
}

// alloc returns a block's room in a slab.
func (m *memory) alloc() ([]byte, error) {
	if m.next < len(m.slabs) && m.used+blockSize > len(m.slabs[m.next]) {
		m.next, m.used = m.next+1, 0
	}
	if m.next == len(m.slabs) {
		if len(m.slabs)*slabSize >= maxBytes {
			// Full: what was read goes, the slabs are used again.
			clear(m.blocks)
			m.lastKey, m.last = ^uint64(0), nil
			m.next, m.used = 0, 0
		} else {
			s, err := syscall.Mmap(-1, 0, slabSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
			if err != nil {
				return nil, fmt.Errorf("memory for the heap's copy: %w", err)
			}
			m.slabs = append(m.slabs, s)
		}
	}
	b := m.slabs[m.next][m.used : m.used+blockSize : m.used+blockSize]
	m.used += blockSize
	return b, nil
}

// block returns the block that holds addr, with the page of addr read
// (or tried).
func (m *memory) block(addr uint64) (*block, error) {
	key := addr >> blockShift
	b := m.last
	if key != m.lastKey {
		var ok bool
		if b, ok = m.blocks[key]; !ok {
			data, err := m.alloc()
			if err != nil {
				return nil, err
			}
			b = &block{data: data}
			m.blocks[key] = b
		}
		m.lastKey, m.last = key, b
	}
	pg := uint(addr>>pageShift) & (blockSize/pageSize - 1)
	if b.tried&(1<<pg) != 0 {
		return b, nil
	}
	base := key << blockShift
	if m.whole && b.tried == 0 {
		// The whole block, or what is mapped of it from its start: a
		// short read ends at the mapping's end. The pages not read are
		// tried one by one when needed (a heap begins on a page, not on
		// a block).
		n, _ := m.src.ReadAt(b.data, int64(base))
		m.read += uint64(n)
		full := n >> pageShift
		b.valid = uint16(1<<full - 1)
		b.tried = b.valid
		if b.tried&(1<<pg) != 0 {
			return b, nil
		}
	}
	off := int(pg) << pageShift
	n, _ := m.src.ReadAt(b.data[off:off+pageSize], int64(base)+int64(off))
	m.read += uint64(n)
	b.tried |= 1 << pg
	if n == pageSize {
		b.valid |= 1 << pg
	}
	return b, nil
}

// readAt fills p from address addr.
func (m *memory) readAt(p []byte, addr uint64) error {
	for len(p) > 0 {
		b, err := m.block(addr)
		if err != nil {
			return err
		}
		if b.valid&(1<<(uint(addr>>pageShift)&(blockSize/pageSize-1))) == 0 {
			return m.unreadable(addr, len(p))
		}
		off := addr & (blockSize - 1)
		end := (off | (pageSize - 1)) + 1
		n := copy(p, b.data[off:end])
		p, addr = p[n:], addr+uint64(n)
	}
	return nil
}

// unreadable is the error of a read at addr that found nothing: the
// kernel's own words for it.
func (m *memory) unreadable(addr uint64, n int) error {
	var one [1]byte
	_, err := m.src.ReadAt(one[:], int64(addr))
	if err == nil || err == io.EOF {
		err = errors.New("unmapped")
	}
	return fmt.Errorf("reading %d bytes at 0x%x: %v", n, addr, err)
}

// resident reports whether the page holding addr was read.
func (m *memory) resident(addr uint64) bool {
	key := addr >> blockShift
	b := m.last
	if key != m.lastKey {
		var ok bool
		if b, ok = m.blocks[key]; !ok {
			return false
		}
	}
	return b.valid&(1<<(uint(addr>>pageShift)&(blockSize/pageSize-1))) != 0
}

// word reads the 8 bytes at addr.
func (m *memory) word(addr uint64) (uint64, error) {
	w, err := m.words(addr, 1)
	if err != nil {
		return 0, err
	}
	return w[0], nil
}

// words reads n (at most 4) consecutive 8-byte words at addr. The slice
// is valid until the next call.
func (m *memory) words(addr uint64, n int) ([]uint64, error) {
	size := uint64(8 * n)
	if b := m.last; b != nil && addr>>blockShift == m.lastKey {
		off := addr & (blockSize - 1)
		pg := uint(off >> pageShift)
		// Within one page that was read.
		if (off+size-1)>>pageShift == uint64(pg) && b.valid&(1<<pg) != 0 {
			d := b.data[off:]
			for i := 0; i < n; i++ {
				m.wordBuf[i] = binary.LittleEndian.Uint64(d[8*i:])
			}
			return m.wordBuf[:n], nil
		}
	}
	buf := m.scratch[:size]
	if err := m.readAt(buf, addr); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		m.wordBuf[i] = binary.LittleEndian.Uint64(buf[8*i:])
	}
	return m.wordBuf[:n], nil
}
