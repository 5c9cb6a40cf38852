package native

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/snapctl/snapctl/internal/arenas"
	"github.com/snapctl/snapctl/internal/proc"
)

// A stop measured by snapctl alone. The agent's measurement
// (agent/measure.py, measure_native) is an exchange with gdb's Python at
// every stop, about half of what a measured stop of a threaded server
// costs it beyond gdb's own stop (docs/facts.md, fact 125). Everything
// it reads, snapctl can read itself while every thread is stopped:
// resident memory from /proc/PID/status, glibc's arenas from the
// process's memory (internal/arenas, as the agent's larger heaps already
// are), the arena count, and each thread's tcache through its thread
// pointer. Only where those lie needs gdb: the agent says it with a
// measurement it took (its "reading"), and snapctl measures the next
// stops itself while the process's threads are ones the agent named; a
// stop with a thread it did not (a thread started since) is the agent's
// again, which names it. The record is the agent's, field for field
// (native_memory), so Stage reads both alike, with by_snapctl.
//
// Not so measured: native.sites (the stop cuts heaptrack's stream in
// gdb), native.trim_probe (a call into the program), jemalloc (read
// through its mallctl()), and a glibc whose arenas or tcaches the agent
// cannot read; those stops are the agent's, as before.

// quickReading is the agent's "reading": what snapctl found of glibc's
// allocator in process Pid (arenas.Glibc, which the agent reads with and
// hands back), and each thread's thread pointer, by kernel id.
type quickReading struct {
	Pid     int               `json:"pid"`
	Glibc   *arenas.Glibc     `json:"glibc"`
	Threads map[string]uint64 `json:"threads"`
}

// quick measures stops of one process without gdb once the agent has
// said where to read.
type quick struct {
	r *quickReading
	// threads are the thread pointers of the threads the agent named,
	// by kernel id, with each thread's start time, which tells a thread
	// from a later one given the same id.
	threads map[int]quickThread
	// seen are the process's threads at the last stop, with their
	// start times: when snapctl could not measure it, the agent's
	// reading of that stop names their thread pointers (took).
	seen   map[int]uint64
	src    *arenas.Process
	reader *arenas.Reader
	// taken counts the stops measured so (Stage counts them).
	taken int
}

type quickThread struct {
	tp, start uint64
}

// measure is the measurement of the stopped process, in the agent's
// record, or nil when snapctl cannot take it alone (the agent takes it).
// pid is the process gdb runs or attached to.
func (q *quick) measure(pid int) []byte {
	// The threads are read before the agent's first reading too: the
	// agent's measurement of this stop names them.
	tids, ok := threadStarts(pid)
	q.seen = tids
	if !ok || q.r == nil || q.r.Pid != pid || q.r.Glibc == nil || q.r.Glibc.Why != "" || q.r.Glibc.TcacheWhy != "" {
		return nil
	}
	// Resident memory first, as the agent reads it: nothing of snapctl's
	// has read the process's memory at this stop yet.
	rss, anon, err := procStatus(pid)
	if err != nil {
		return nil
	}
	if q.reader == nil {
		q.src = &arenas.Process{Pid: pid}
		q.reader = arenas.NewReader(q.src)
	}
	tps := make([]uint64, 0, len(tids))
	var found *threadFinder
	for tid, start := range tids {
		t, ok := q.threads[tid]
		if !ok || t.start != start {
			// A thread started since the agent's reading.
			if found == nil {
				found = q.finder(pid)
			}
			tp, ok := found.find(tid)
			if !ok {
				return nil
			}
			t = quickThread{tp: tp, start: start}
			q.threads[tid] = t
		}
		tps = append(tps, t.tp)
	}
	// Threads that have ended are forgotten.
	for tid := range q.threads {
		if _, ok := tids[tid]; !ok {
			delete(q.threads, tid)
		}
	}
	return q.read(q.r.Glibc, rss, anon, tps)
}

// read measures the stopped process's heap from glibc g's state and the
// thread pointers tps of its threads, with resident memory rss and anon
// read first: the agent's record.
func (q *quick) read(g *arenas.Glibc, rss, anon int64, tps []uint64) []byte {
	rec := map[string]any{"rss_bytes": rss, "anon_rss_bytes": anon, "by_snapctl": true}
	t0 := time.Now()
	res, err := q.reader.Read(g.Layout)
	if err != nil {
		// A heap that does not hold together, or memory snapctl may
		// not read: the agent says so, in its words.
		return nil
	}
	rec["heap_read_seconds"] = roundSeconds(time.Since(t0).Seconds())
	if res.Locked > 0 {
		rec["busy_error"] = fmt.Sprintf("a thread holds the lock of %d of glibc's %d arenas: it is inside the allocator", res.Locked, res.Arenas)
		rec["heap_unmeasured"] = "allocator-busy"
		return q.done(rec)
	}
	cached, ok := q.tcacheBytes(g, tps)
	if !ok {
		return nil
	}
	mi := res.Mallinfo
	rec["heap_in_use_bytes"] = int64(mi.Uordblks) - cached
	rec["heap_free_bytes"] = int64(mi.Fordblks) + cached
	rec["mmap_bytes"] = mi.Hblkhd
	rec["arena_bytes"] = mi.Arena
	rec["mallinfo2"] = mi
	rec["tcache_bytes"] = cached
	if g.NArenas != 0 {
		if n, err := q.word(g.NArenas); err == nil {
			rec["arenas"] = n
		}
	}
	return q.done(rec)
}

// seized measures process pid, stopped by snapctl as its tracer, from
// glibc g's state found in Go and its threads' thread pointers tps (each
// thread's fs_base): no reading of the agent's is needed.
func (q *quick) seized(pid int, g *arenas.Glibc, tps []uint64) []byte {
	rss, anon, err := procStatus(pid)
	if err != nil {
		return nil
	}
	if q.reader == nil || q.src.Pid != pid {
		q.close()
		q.src = &arenas.Process{Pid: pid}
		q.reader = arenas.NewReader(q.src)
	}
	return q.read(g, rss, anon, tps)
}

func (q *quick) done(rec map[string]any) []byte {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil
	}
	return data
}

// roundSeconds rounds to the microsecond, as the agent does.
func roundSeconds(s float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(s, 'f', 6, 64), 64)
	return v
}

// tcacheBytes is the bytes in the tcaches of the threads whose thread
// pointers are tps, as the agent's Heap.tcache_bytes counts them; false
// when one cannot be read.
func (q *quick) tcacheBytes(g *arenas.Glibc, tps []uint64) (int64, bool) {
	t := g.TcacheStruct
	// The struct is a chunk's user memory: its size word lies this far
	// before it.
	head := uint64(g.Chunk.Links - g.Chunk.Head)
	var total int64
	for _, tp := range tps {
		p, err := q.word(tp - uint64(g.Tcache))
		if err != nil {
			return 0, false
		}
		// None yet (the thread has not allocated), or gone.
		if p == 0 || p%uint64(g.Chunk.Align) != 0 {
			continue
		}
		data := make([]byte, head+2*uint64(t.Bins))
		if _, err := q.src.ReadAt(data, int64(p-head)); err != nil {
			return 0, false
		}
		size := binary.LittleEndian.Uint64(data) &^ uint64(g.Chunk.Flags)
		width := 0
		for _, w := range t.Widths {
			if w[0] == size {
				width = int(w[1])
			}
		}
		if width == 0 {
			return 0, false
		}
		counts := data[head:]
		for i := 0; i < t.Bins; i++ {
			var n uint64
			if width == 2 {
				n = uint64(binary.LittleEndian.Uint16(counts[2*i:]))
			} else {
				n = uint64(counts[i])
			}
			total += int64(n) * int64(t.Min+t.Step*i)
		}
	}
	return total, true
}

func (q *quick) word(addr uint64) (uint64, error) {
	var b [8]byte
	if _, err := q.src.ReadAt(b[:], int64(addr)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// took takes the agent's reading of a stop snapctl did not measure
// itself: the threads it names are those seen at that stop.
func (q *quick) took(r *quickReading) {
	seen := q.seen
	q.seen = nil
	if r == nil {
		return
	}
	if q.r == nil || q.r.Pid != r.Pid {
		q.close()
		q.threads = nil
	}
	q.r = r
	if q.threads == nil {
		q.threads = map[int]quickThread{}
	}
	for id, tp := range r.Threads {
		tid, err := strconv.Atoi(id)
		if err != nil {
			continue
		}
		if start, ok := seen[tid]; ok {
			q.threads[tid] = quickThread{tp: tp, start: start}
		}
	}
	// Threads that have ended are forgotten.
	for tid := range q.threads {
		if _, ok := seen[tid]; !ok {
			delete(q.threads, tid)
		}
	}
}

func (q *quick) close() {
	if q.reader != nil {
		q.reader.Close()
		q.reader, q.src = nil, nil
	}
}

// A thread's thread pointer, without gdb. On x86-64 it points at the
// thread's control block, whose first words the ABI fixes (glibc's
// tcbhead_t, which compiled code reads through %fs): the block's own
// address at 0 and again at 16, the stack protector's guard at 0x28
// and the pointer guard at 0x30, the same two values in every thread
// of the process. glibc puts a thread's control block (its struct
// pthread) at the top of the thread's stack, which pthread_create
// allocates or the program gives it, the static TLS right below it and
// the stack below that: so the thread pointer of a thread started since
// the agent's reading is the first address above its stack pointer
// (from /proc/PID/task/TID/syscall, which the kernel fills for a
// stopped thread) whose words are so, with the guards of a thread the
// agent named, in the mapping that holds the stack pointer. The first:
// the kernel merges neighbouring anonymous mappings, and the control
// blocks of other threads (the main thread's, in the loader's TLS
// block) can lie further up the same mapping. Not found, the stop is
// the agent's.

// tcbScan is how much of a stack is read at a time looking for its
// control block.
const tcbScan = 16 << 10

// threadFinder finds the thread pointers of threads of one stopped
// process.
type threadFinder struct {
	q                    *quick
	pid                  int
	maps                 []proc.Mapping
	stackGuard, ptrGuard uint64
	ok                   bool
}

// finder returns a threadFinder for process pid, which finds nothing
// when no thread the agent named gives the guards.
func (q *quick) finder(pid int) *threadFinder {
	f := &threadFinder{q: q, pid: pid}
	for _, t := range q.threads {
		var b [0x38]byte
		if _, err := q.src.ReadAt(b[:], int64(t.tp)); err != nil {
			continue
		}
		if binary.LittleEndian.Uint64(b[0:]) != t.tp || binary.LittleEndian.Uint64(b[16:]) != t.tp {
			continue
		}
		f.stackGuard, f.ptrGuard = binary.LittleEndian.Uint64(b[0x28:]), binary.LittleEndian.Uint64(b[0x30:])
		maps, err := proc.Maps(pid)
		f.maps, f.ok = maps, err == nil
		break
	}
	return f
}

// find is the thread pointer of thread tid, stopped.
func (f *threadFinder) find(tid int) (uint64, bool) {
	if !f.ok {
		return 0, false
	}
	sp, _, ok := proc.StoppedAt(f.pid, tid)
	if !ok {
		return 0, false
	}
	var m *proc.Mapping
	for i := range f.maps {
		if f.maps[i].Lo <= sp && sp < f.maps[i].Hi {
			m = &f.maps[i]
		}
	}
	if m == nil || m.Path != "" && m.Path != "[stack]" {
		return 0, false
	}
	buf := make([]byte, tcbScan+0x38)
	for lo := (sp + 15) &^ 15; lo+0x38 <= m.Hi; lo += tcbScan {
		b := buf[:min(uint64(len(buf)), m.Hi-lo)]
		if _, err := f.q.src.ReadAt(b, int64(lo)); err != nil {
			return 0, false
		}
		for off := 0; off+0x38 <= len(b); off += 16 {
			a := lo + uint64(off)
			if binary.LittleEndian.Uint64(b[off:]) == a && binary.LittleEndian.Uint64(b[off+16:]) == a &&
				binary.LittleEndian.Uint64(b[off+0x28:]) == f.stackGuard && binary.LittleEndian.Uint64(b[off+0x30:]) == f.ptrGuard {
				return a, true
			}
		}
	}
	return 0, false
}

// threadStarts are process pid's threads with their start times (field
// 22 of /proc/PID/task/TID/stat); false when they cannot be read.
func threadStarts(pid int) (map[int]uint64, bool) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	f, err := os.Open(dir)
	if err != nil {
		return nil, false
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil || len(names) == 0 {
		return nil, false
	}
	out := make(map[int]uint64, len(names))
	buf := make([]byte, 1024)
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		start, ok := startTime(dir+"/"+name+"/stat", buf)
		if !ok {
			return nil, false
		}
		out[tid] = start
	}
	return out, true
}

// startTime reads a stat file's start time into buf's room.
func startTime(path string, buf []byte) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	n, _ := f.Read(buf)
	f.Close()
	data := buf[:n]
	// The command's name, in parentheses, may hold anything.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(data[i+1:]))
	// Field 3 (state) is fields[0]; field 22 (starttime) fields[19].
	if len(fields) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	return v, err == nil
}

// procStatus is VmRSS and RssAnon of process pid in bytes, as the
// agent's proc_status reads them (0 for a line there is none of).
func procStatus(pid int) (rss, anon int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return statusKiB(data, "\nVmRSS:") * 1024, statusKiB(data, "\nRssAnon:") * 1024, nil
}

func statusKiB(data []byte, key string) int64 {
	i := bytes.Index(data, []byte(key))
	if i < 0 {
		return 0
	}
	rest := data[i+len(key):]
	if j := bytes.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	f := strings.Fields(string(rest))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseInt(f[0], 10, 64)
	return v
}
