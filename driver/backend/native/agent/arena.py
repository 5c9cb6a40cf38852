# The native backend's part of snapctl's agent: glibc's arenas and
# per-thread caches read from the stopped process's memory, by the agent
# itself or by snapctl's reader (heapread.go) over a socket. Where they
# are and how glibc lays them out comes from snapctl (internal/arenas'
# Glibc, read from libc's symbol table in Go): no offset into glibc's
# memory is written here.
#
# Read into the namespace of driver/gdb/agent.py with the other files of
# native/agent.go's list.

import json
import operator
import os
import socket
import struct

import gdb


# DEBUG_DIRS is gdb's debug-file-directory as the plan left it, once
# snapctl has pointed gdb away from the libraries' separate debug files
# (skip_library_debug_info); None while gdb's own setting holds. snapctl
# looks for libc's debug file there (Heap).
DEBUG_DIRS = None


def skip_library_debug_info(nowhere):
    """Has gdb read no separate debug file from here on (the program's own
    is read already): with Debian's libc6-dbg, indexing libc's takes a
    native run 0.15-0.2 s when libc loads, and the measurement needs only
    its symbol table, which snapctl reads (Heap)."""
    global DEBUG_DIRS
    DEBUG_DIRS = gdb.parameter("debug-file-directory")
    gdb.execute("set debug-file-directory %s" % nowhere)


# glibc's allocator read from the stopped process's memory. With more
# than one thread no stop calls into the allocator to read it: another
# thread, stopped anywhere, may hold an arena's lock, and gdb lets a call
# run only from a command, never from a breakpoint's stop(). Instead the
# agent reads what mallinfo2() would add up, with every thread stopped:
# each arena's malloc_state (its lock, fastbins, top chunk, bins, the next
# arena, system_mem) and mp_ (n_mmaps, mmapped_mem). snapctl finds them
# (a find request to its reader, once a process: Heap): libc's symbol
# table gives their addresses, its sizes the layout (glibc 2.27 to 2.41
# on x86-64), and anything else leaves the heap unread (Heap.why).
# int_mallinfo in malloc.c is the model: the top chunk and every chunk in
# a fastbin or a regular bin is free, the rest of system_mem is in use
# (so a chunk in a thread's tcache counts as in use, as there, until
# native_memory takes the tcaches out).
#
# EMPTY_BINS holds, by arena address, what the bk link of each of its bins
# 1 to NBINS - 1 holds while the bin is empty: the bin itself (bin_at).
EMPTY_BINS = {}
# glibc's per-thread cache (tcache, 2.26 on) keeps freed chunks marked in
# use, so mallinfo2() and the arenas count them as in use; the
# measurement takes them out of in-use heap and adds them to free
# (tcache_bytes). Each thread's tcache_perthread_struct is a malloc'd
# chunk, pointed to by libc's thread-local `tcache`, which lies at a fixed
# distance below every thread's thread pointer (snapctl finds it: Glibc's
# tcache). The thread pointer is the pthread_t that libthread_db gives as
# the thread's handle. The struct starts with its counts, one a bin, so
# the counts alone give the bytes: two reads a thread, no list walked.


class HeapUnreadable(Exception):
    """The arenas could not be read at this stop."""


class WalkTooLong(Exception):
    """More free chunks than the agent walks itself (PY_WALK)."""


# PY_WALK is how many free chunks the agent walks itself before it asks
# snapctl's reader (about 5 ms here).
PY_WALK = 1000

# HEAP_READER is the name, in the abstract namespace, of the socket of
# snapctl's reader of glibc's arenas (the native backend's heapread.go),
# None when there is none: then glibc's allocator is not found, and a
# process of one thread is measured by calling mallinfo2()
# (native_memory). Once found, a heap is walked here when snapctl's
# reader goes away (Heap.read_all). READ_TIMEOUT bounds, in seconds, one
# answer: snapctl's reading of ten million free chunks takes about a
# second.
HEAP_READER = None
READ_TIMEOUT = 300
ARENA_READER = None


def arena_reader():
    """The connection to snapctl's reader, None when there is none."""
    global ARENA_READER, HEAP_READER
    if ARENA_READER is None and HEAP_READER:
        try:
            ARENA_READER = ArenaReader(HEAP_READER)
        except OSError:
            HEAP_READER = None
    return ARENA_READER


def close_arena_reader():
    global ARENA_READER, HEAP_READER
    if ARENA_READER is not None:
        ARENA_READER.sock.close()
    ARENA_READER, HEAP_READER = None, None


class ArenaReader:
    """A connection to snapctl's reader of glibc's arenas. A request says
    which process and either what to find its allocator by (find) or
    where its arenas are (read); the first for a process carries gdb's
    /proc/PID/mem descriptor (SCM_RIGHTS), so that snapctl reads what gdb
    may read, under attach too. The answer is internal/arenas.Glibc or
    internal/arenas.Result, or its error."""

    def __init__(self, name):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self.sock.settimeout(READ_TIMEOUT)
        self.sock.connect("\0" + name)
        # The process whose memory file snapctl holds.
        self.pid = None

    def ask(self, h, req):
        """snapctl's answer to req, about Heap h's process."""
        req = json.dumps(dict(req, pid=h.pid)).encode()
        if self.pid != h.pid:
            self.sock.sendmsg([req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", h.open()))])
            self.pid = h.pid
        else:
            self.sock.send(req)
        rep = json.loads(self.sock.recv(1 << 16))
        if rep.get("error"):
            raise HeapUnreadable(rep["error"])
        return rep

    def find(self, h, mallinfo2, dirs):
        """internal/arenas.Glibc, as a dict, of Heap h's process, whose
        mallinfo2 is at address mallinfo2; dirs are where gdb looks for
        separate debug files."""
        return self.ask(h, {"find": {"mallinfo2": mallinfo2, "debug_dirs": dirs}})["glibc"]

    def read(self, h):
        """(locked, arenas, figures) for Heap h, as Heap.read_all."""
        rep = self.ask(h, {"layout": h.layout})
        if rep["locked"]:
            return rep["locked"], rep["arenas"], None
        return 0, rep["arenas"], rep["mallinfo2"]


class Heap:
    """Where glibc keeps the allocator's state in one process, as snapctl
    finds it (internal/arenas.Glibc), and the reading of it. why says why
    it cannot be read, "" when it can."""

    def __init__(self, inferior):
        self.pid = inferior.pid
        self.why = ""
        self.mem = -1
        self.budget = None
        self.narenas = None
        # tcache is the distance of each thread's tcache pointer below its
        # thread pointer, None when tcache_why says why it is unknown.
        self.tcache, self.tcache_why = None, ""
        try:
            fn = int(gdb.parse_and_eval("(unsigned long)&mallinfo2"))
        except gdb.error:
            fn = None
        # No mallinfo2 yet (a stop before libc is loaded): asked again at
        # the next stop.
        self.retry = fn is None
        if self.retry:
            self.why = "the program has no mallinfo2: no glibc allocator (yet)"
            return
        reader = arena_reader()
        if reader is None:
            self.why = "glibc's arenas cannot be found: snapctl's reader of them is not running"
            return
        dirs = DEBUG_DIRS if DEBUG_DIRS is not None else gdb.parameter("debug-file-directory")
        try:
            self.glibc(reader.find(self, fn, dirs.split(os.pathsep)))
        except OSError as e:
            # snapctl is gone, or closed the socket.
            close_arena_reader()
            raise HeapUnreadable("snapctl's reader of them did not answer: %s" % e)

    def glibc(self, g):
        """Takes what snapctl found of glibc's allocator
        (internal/arenas.Glibc). Its layouts stay dicts (ms, chunk,
        tcache_layout): a Heap with more than 30 attributes would have
        Python read each of them, self.mem and self.budget at every chunk
        walked too, more slowly (docs/facts.md, fact 128)."""
        FOUND[self.pid] = g
        self.narenas = g["narenas"] or None
        self.tcache_why = g.get("tcache_why", "")
        self.chunk = g["chunk"]
        if not self.tcache_why:
            self.tcache = g["tcache"]
            t = g["tcache_struct"]
            # The struct is a chunk's user memory: its size word lies
            # links - head bytes before.
            self.tcache_layout = (t["bins"], [t["min"] + t["step"] * i for i in range(t["bins"])],
                                  {size: width for size, width in t["widths"]}, self.chunk["links"] - self.chunk["head"])
        self.why = g.get("why", "")
        if self.why:
            return
        self.layout = {k: g[k] for k in ("main_arena", "mp", "n_mmaps", "mmapped_mem", "mangled")}
        self.arena, self.mp = g["main_arena"], g["mp"]
        self.n_mmaps, self.mmapped_mem = g["n_mmaps"], g["mmapped_mem"]
        self.mangled = g["mangled"]
        self.ms = g["malloc_state"]

    def open(self):
        """The process's memory file's descriptor, opened if need be."""
        if self.mem < 0:
            try:
                self.mem = os.open("/proc/%d/mem" % self.pid, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as e:
                raise HeapUnreadable("the process's memory cannot be read: %s" % e)
        return self.mem

    def close(self):
        if self.mem >= 0:
            os.close(self.mem)
            self.mem = -1

    def read(self, address, size):
        if self.mem < 0:
            self.open()
        try:
            data = os.pread(self.mem, size, address)
        except (OSError, OverflowError) as e:
            raise HeapUnreadable("reading %d bytes at 0x%x: %s" % (size, address, e))
        if len(data) != size:
            raise HeapUnreadable("reading %d bytes at 0x%x: short read" % (size, address))
        return data

    def arenas(self):
        """Every arena as (address, its malloc_state's bytes), main first."""
        out, address = [], self.arena
        while True:
            out.append((address, self.read(address, self.ms["size"])))
            address = struct.unpack_from("<Q", out[-1][1], self.ms["next"])[0]
            if address == self.arena:
                return out
            if len(out) > 65536 or address == 0:
                raise HeapUnreadable("the list of arenas does not lead back to main_arena")

    def locked(self, arenas):
        """How many arenas' locks are held (the mutex, an int, 0 when
        free)."""
        return sum(1 for _, state in arenas if struct.unpack_from("<i", state, self.ms["mutex"])[0] != 0)

    def read_all(self):
        """Reads the arenas: (locked, arenas, figures), the figures
        mallinfo2()'s as a dict, None while an arena's lock is held.
        snapctl reads them when it can (HEAP_READER): it reads the memory
        in bulk and walks the lists in Go, which costs about what copying
        the heap costs, where the walk below costs a read and Python's
        work per free chunk (0.55 s a stop at 200,000 free chunks).
        Raises HeapUnreadable."""
        arenas = self.arenas()
        locked = self.locked(arenas)
        if locked:
            return locked, len(arenas), None
        reader = arena_reader()
        if reader is None:
            return 0, len(arenas), self.mallinfo(arenas)
        # A small heap is walked here: a round trip to snapctl wakes two
        # processes, which on a loaded machine can take longer than
        # PY_WALK chunks read here.
        try:
            return 0, len(arenas), self.mallinfo(arenas, PY_WALK)
        except WalkTooLong:
            pass
        try:
            return reader.read(self)
        except socket.timeout:
            close_arena_reader()
            raise HeapUnreadable("snapctl's reading took more than %d s" % READ_TIMEOUT)
        except OSError:
            # snapctl is gone, or closed the socket: the walk here.
            close_arena_reader()
        return 0, len(arenas), self.mallinfo(arenas)

    def mallinfo(self, arenas, budget=None):
        """What mallinfo2() would return, as a dict of its fields;
        WalkTooLong past budget free chunks."""
        m = dict.fromkeys(MALLINFO2, 0)
        # A list longer than its heaps have room for (system_mem over
        # the smallest chunk's size) goes round a cycle: a heap the
        # program corrupted, or memory that is not a heap's. The walk
        # stops there.
        limit = sum(struct.unpack_from("<Q", state, self.ms["system_mem"])[0] for _, state in arenas) // self.ms["min_chunk"] + 1
        self.budget = budget
        for address, state in arenas:
            self.add_arena(m, address, state, limit)
        mp = self.read(self.mp, max(self.n_mmaps + 4, self.mmapped_mem + 8))
        m["hblks"] = struct.unpack_from("<i", mp, self.n_mmaps)[0]
        m["hblkhd"] = struct.unpack_from("<Q", mp, self.mmapped_mem)[0]
        return m

    def add_arena(self, m, address, state, limit):
        c, ms = self.chunk, self.ms
        head, fd_at, flags, align, shift = c["head"], c["links"], ~c["flags"], c["align"] - 1, c["mangle_shift"]
        # Names looked up once, not at every chunk.
        read, spend, unpack, mangled = self.read, self.spend, struct.unpack, self.mangled
        size = lambda chunk, head=head, flags=flags: unpack("<Q", read(chunk + head, 8))[0] & flags
        top = struct.unpack_from("<Q", state, ms["top"])[0]
        if top == 0:
            # An allocator not yet initialized (nothing allocated yet):
            # mallinfo2() would set it up, its top chunk and bins empty.
            m["ordblks"] += 1
            return
        avail, nblocks = size(top), 1
        fastavail = nfast = 0
        for p in struct.unpack_from("<%dQ" % ms["nfastbins"], state, ms["fastbins"]):
            while p:
                if p & align:
                    raise HeapUnreadable("arena 0x%x: a fastbin chunk at 0x%x is misaligned" % (address, p))
                word, link = unpack("<QQ", read(p + head, 16))
                fastavail += word & flags
                nfast += 1
                spend()
                if nfast > limit:
                    raise HeapUnreadable("arena 0x%x: a fastbin does not end within the %d chunks the heaps can hold" % (address, limit))
                p = ((p + fd_at) >> shift) ^ link if mangled else link
        avail += fastavail
        walked = 0
        # bin_at(i): the bin's fd and bk pointers, seen as a chunk whose fd
        # lies at bins[2 * (i - 1)]; an empty bin's bk (last(b)) is b
        # itself. Most bins are empty: they are found in one pass.
        nbins = ms["nbins"]
        links = struct.unpack_from("<%dQ" % (2 * (nbins - 1)), state, ms["bins"])
        empty = EMPTY_BINS.get(address)
        if empty is None:
            # Each bin is two links, fd and bk.
            empty = EMPTY_BINS[address] = tuple(address + ms["bins"] + 16 * (i - 1) - fd_at for i in range(1, nbins))
        for i, p, b in zip(range(1, nbins), links[1::2], empty):
            if p == b:
                continue
            after = b
            while p != b:
                word, fd, bk = unpack("<QQQ", read(p + head, 24))
                if fd != after:
                    # Links that do not agree: a heap the program
                    # corrupted, or memory that is not a heap's.
                    raise HeapUnreadable("arena 0x%x: bin %d: chunk 0x%x's forward link is not 0x%x" % (address, i, p, after))
                avail += word & flags
                nblocks += 1
                walked += 1
                spend()
                if walked > limit:
                    raise HeapUnreadable("arena 0x%x: bin %d does not end within the %d chunks the heaps can hold" % (address, i, limit))
                p, after = bk, p
        system_mem = struct.unpack_from("<Q", state, ms["system_mem"])[0]
        m["smblks"] += nfast
        m["ordblks"] += nblocks
        m["fordblks"] += avail
        m["uordblks"] += system_mem - avail
        m["arena"] += system_mem
        m["fsmblks"] += fastavail
        if address == self.arena:
            m["keepcost"] = size(top)

    def spend(self):
        """Counts a chunk walked against the budget (see mallinfo)."""
        if self.budget is not None:
            self.budget -= 1
            if self.budget < 0:
                raise WalkTooLong()

    def count(self):
        """glibc's own count of arenas (an arena is never freed), None
        when its address is unknown."""
        if self.narenas is None:
            return None
        try:
            return struct.unpack("<Q", self.read(self.narenas, 8))[0]
        except HeapUnreadable:
            return None

    def tcache_bytes(self, threads):
        """The bytes of the chunks in the tcaches of threads, every one
        stopped: counts[i] chunks of tcache_sizes[i] bytes in bin i, each
        count as wide as the struct's chunk size says."""
        bins, sizes, widths, before = self.tcache_layout
        flags, align = ~self.chunk["flags"], self.chunk["align"]
        total = 0
        for th in threads:
            p = struct.unpack("<Q", self.read(thread_pointer(th) - self.tcache, 8))[0]
            # None yet (the thread has not allocated), or gone.
            if p == 0 or p % align:
                continue
            # The chunk's size, then counts, in one read.
            data = self.read(p - before, before + 2 * bins)
            size = struct.unpack_from("<Q", data)[0] & flags
            width = widths.get(size)
            if width is None:
                raise HeapUnreadable("thread %d's tcache at 0x%x is a chunk of %d bytes, not glibc's tcache_perthread_struct"
                                     % (th.num, p, size))
            counts = struct.unpack_from("<%d%s" % (bins, "H" if width == 2 else "B"), data, before)
            total += sum(map(operator.mul, counts, sizes))
        return total


def thread_pointer(th):
    """The thread pointer of th (its fs base): glibc's pthread_t, which
    libthread_db gives as the thread's handle; else read from the
    thread's registers."""
    try:
        handle = th.handle()
    except (gdb.error, RuntimeError, AttributeError):
        # No libthread_db (a static program that does not use threads).
        handle = None
    if handle and len(handle) == 8:
        return int.from_bytes(handle, "little")
    current = gdb.selected_thread()
    try:
        th.switch()
        return int(gdb.parse_and_eval("(unsigned long)$fs_base"))
    except gdb.error as e:
        raise HeapUnreadable("thread %d's thread pointer: %s" % (th.num, e))
    finally:
        if current is not None and current.is_valid():
            current.switch()


# HEAPS holds each process's Heap, by pid.
HEAPS = {}
# FOUND holds what snapctl found of glibc's allocator in each process
# (internal/arenas.Glibc), by pid, as it came: the agent hands it back
# with its reading (measure.py), for snapctl's own measurement.
FOUND = {}


def heap():
    """The current process's Heap."""
    inferior = gdb.selected_inferior()
    h = HEAPS.get(inferior.pid)
    if h is None:
        for old in HEAPS.values():
            old.close()
        HEAPS.clear()
        try:
            h = Heap(inferior)
        except (gdb.error, AttributeError, OSError, struct.error, ValueError, KeyError, HeapUnreadable) as e:
            h = Heap.__new__(Heap)
            h.pid, h.why, h.mem, h.narenas, h.retry = inferior.pid, "glibc's arenas cannot be found: %s" % e, -1, None, False
            h.tcache, h.tcache_why = None, ""
        if not h.retry:
            HEAPS[inferior.pid] = h
    return h
