# The native backend's part of snapctl's agent: glibc's arenas and
# per-thread caches read from the stopped process's memory, by the agent
# itself or by snapctl's reader (heapread.go) over a socket; where their
# symbols come from (libc_symbols, with elf.py's reader).
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
# (skip_library_debug_info); None while gdb's own setting holds.
DEBUG_DIRS = None


def skip_library_debug_info(nowhere):
    """Has gdb read no separate debug file from here on (the program's own
    is read already): with Debian's libc6-dbg, indexing libc's takes a
    native run 0.15-0.2 s when libc loads, and the measurement needs only
    its symbol table (see arenas)."""
    global DEBUG_DIRS
    DEBUG_DIRS = gdb.parameter("debug-file-directory")
    gdb.execute("set debug-file-directory %s" % nowhere)


# glibc's allocator read from the stopped process's memory. With more
# than one thread no stop calls into the allocator to read it: another
# thread, stopped anywhere, may hold an arena's lock, and gdb lets a call
# run only from a command, never from a breakpoint's stop(). Instead the
# agent reads what mallinfo2() would add up, with every thread stopped:
# each arena's malloc_state (its lock, fastbins, top chunk, bins, the next
# arena, system_mem) and mp_ (n_mmaps, mmapped_mem), whose addresses come
# from the symbol table of the file that defines mallinfo2 or of its
# separate debug file (Debian's libc6-dbg), found by build id as gdb finds
# it; no debug information is read. int_mallinfo in malloc.c is the model:
# the top chunk and every chunk in a fastbin or a regular bin is free, the
# rest of system_mem is in use (so a chunk in a thread's tcache counts as
# in use, as there, until native_memory takes the tcaches out). The layouts are glibc's from 2.27 to 2.41 on 64-bit
# little-endian machines: malloc_state is 2200 bytes throughout, mp_ is
# 112 bytes up to 2.34 and 136 from 2.35 (transparent huge page fields);
# the symbol table's sizes select the layout, and any other size leaves
# the heap unread (Heap.why).

# MALLOC_STATE are the offsets in struct malloc_state: mutex (an int, 0
# when free), fastbinsY[10], top, bins[254], next, system_mem.
MS_SIZE, MS_FASTBINS, MS_TOP, MS_BINS, MS_NEXT, MS_SYSTEM_MEM = 2200, 16, 96, 112, 2160, 2184
NFASTBINS, NBINS = 10, 128
# EMPTY_BINS holds, by arena address, what the bk link of each of its bins
# 1 to 127 holds while the bin is empty: the bin itself (bin_at).
EMPTY_BINS = {}
# MP_LAYOUTS gives, by the size of mp_, the offsets of n_mmaps (int) and
# mmapped_mem in it.
MP_LAYOUTS = {112: (40, 56), 136: (60, 80)}
# A list longer than its heaps have room for (system_mem over the 32
# bytes of the smallest chunk) goes round a cycle: a heap the program
# corrupted, or memory that is not a heap's. The walk stops there.
MIN_CHUNK = 32
# glibc's per-thread cache (tcache, 2.26 on) keeps freed chunks marked in
# use, so mallinfo2() and the arenas count them as in use; the
# measurement takes them out of in-use heap and adds them to free
# (tcache_bytes). Each thread's tcache_perthread_struct is a malloc'd
# chunk, pointed to by libc's thread-local `tcache` (in the symbol table
# with the arenas', its value an offset in libc's TLS block), which lies
# at a fixed distance below every thread's thread pointer (x86-64's TLS
# variant II): libc's l_tls_offset less that offset. l_tls_offset is read
# from libc's link_map at the offset glibc publishes for libthread_db
# (_thread_db_link_map_l_tls_offset); a static program's one TLS block
# lies right below the thread pointer. The thread pointer is the
# pthread_t that libthread_db gives as the thread's handle. The struct is
# counts[64] (uint16_t, a 0x290-byte chunk; char up to 2.29, a 0x250-byte
# chunk), then entries[64]; bin i holds chunks of 32 + 16 i bytes, so the
# counts alone give the bytes: two reads a thread, no list walked.
TCACHE_SYMBOLS = ("tcache", "_thread_db_link_map_l_tls_offset", "_dl_main_map")
TCACHE_BINS, TCACHE_MIN = 64, 32
TCACHE_SIZES = [TCACHE_MIN + 16 * i for i in range(TCACHE_BINS)]
TCACHE_LAYOUTS = {0x290: 2, 0x250: 1}
# TCACHE_LAST is the last glibc whose tcache is known to be so; a
# program's own glibc of unknown version is checked by the chunk's size.
TCACHE_LAST = (2, 41)


class HeapUnreadable(Exception):
    """The arenas could not be read at this stop."""


class WalkTooLong(Exception):
    """More free chunks than the agent walks itself (PY_WALK)."""


# PY_WALK is how many free chunks the agent walks itself before it asks
# snapctl's reader (about 5 ms here).
PY_WALK = 1000

# HEAP_READER is the name, in the abstract namespace, of the socket of
# snapctl's reader of glibc's arenas (the native backend's heapread.go),
# None when the agent reads them itself (Heap.read_all). READ_TIMEOUT
# bounds, in seconds, one reading: snapctl's reading of ten million free
# chunks takes about a second.
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
    which process and where its arenas are (Heap.layout); the first for a
    process carries gdb's /proc/PID/mem descriptor (SCM_RIGHTS), so that
    snapctl reads what gdb may read, under attach too. The answer is
    internal/arenas.Result, or its error."""

    def __init__(self, name):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        self.sock.settimeout(READ_TIMEOUT)
        self.sock.connect("\0" + name)
        # The process whose memory file snapctl holds.
        self.pid = None

    def read(self, h):
        """(locked, arenas, figures) for Heap h, as Heap.read_all."""
        req = json.dumps({"pid": h.pid, "layout": h.layout()}).encode()
        if self.pid != h.pid:
            if h.mem < 0:
                h.read(h.arena, 8)  # opens it, or says why not
            self.sock.sendmsg([req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", h.mem))])
            self.pid = h.pid
        else:
            self.sock.send(req)
        rep = json.loads(self.sock.recv(1 << 16))
        if rep.get("error"):
            raise HeapUnreadable(rep["error"])
        if rep["locked"]:
            return rep["locked"], rep["arenas"], None
        return 0, rep["arenas"], rep["mallinfo2"]


class Heap:
    """Where glibc keeps the allocator's state in one process, and the
    reading of it. why says why it cannot be read, "" when it can."""

    def __init__(self, inferior):
        self.pid = inferior.pid
        self.why = ""
        self.mem = -1
        self.budget = None
        self.narenas = None
        # tcache is the distance of each thread's tcache pointer below its
        # thread pointer, None when tcache_why says why it is unknown.
        self.tcache, self.tcache_why = None, ""
        syms = libc_symbols(("main_arena", "mp_", "narenas", "__libc_version") + TCACHE_SYMBOLS)
        # No mallinfo2 yet (a stop before libc is loaded): asked again at
        # the next stop.
        self.retry = syms is None
        syms = syms or {}
        if "narenas" in syms:
            self.narenas = syms["narenas"][0]
        if self.retry:
            self.why = "the program has no mallinfo2: no glibc allocator (yet)"
            return
        version = self.version(syms.get("__libc_version"))
        try:
            self.tcache = self.find_tcache(syms, version)
        except (HeapUnreadable, gdb.error, struct.error) as e:
            self.tcache_why = "glibc's per-thread caches cannot be found: %s" % e
        if "main_arena" not in syms or "mp_" not in syms:
            self.why = ("glibc's arenas cannot be found: no symbol table for libc "
                        "(install Debian's libc6-dbg, or the distribution's libc debug symbols)")
            return
        (self.arena, arena_size), (self.mp, mp_size) = syms["main_arena"], syms["mp_"]
        if arena_size != MS_SIZE or mp_size not in MP_LAYOUTS or version < (2, 27) or not x86_64():
            self.why = "glibc %s's allocator is not one snapctl can read (malloc_state %d bytes, mp_ %d)" % (
                ".".join(map(str, version)), arena_size, mp_size)
            return
        self.n_mmaps, self.mmapped_mem = MP_LAYOUTS[mp_size]
        # Safe-linking (glibc 2.32) hides fastbin links: the link at
        # address A holds next ^ (A >> 12).
        self.mangled = version >= (2, 32)
        try:
            self.mem = os.open("/proc/%d/mem" % self.pid, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            self.why = "the process's memory cannot be read: %s" % e

    def version(self, sym):
        """glibc's version, from __libc_version; (0, 0) when unknown."""
        if sym is None:
            return (0, 0)
        try:
            text = self.read(sym[0], 16).split(b"\0")[0].decode()
            return tuple(int(x) for x in text.split(".")[:2])
        except (HeapUnreadable, ValueError, UnicodeDecodeError):
            return (0, 0)

    def close(self):
        if self.mem >= 0:
            os.close(self.mem)
            self.mem = -1

    def read(self, address, size):
        try:
            if self.mem < 0:
                self.mem = os.open("/proc/%d/mem" % self.pid, os.O_RDONLY | os.O_CLOEXEC)
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
            out.append((address, self.read(address, MS_SIZE)))
            address = struct.unpack_from("<Q", out[-1][1], MS_NEXT)[0]
            if address == self.arena:
                return out
            if len(out) > 65536 or address == 0:
                raise HeapUnreadable("the list of arenas does not lead back to main_arena")

    def locked(self, arenas):
        """How many arenas' locks are held."""
        return sum(1 for _, state in arenas if struct.unpack_from("<i", state, 0)[0] != 0)

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

    def layout(self):
        """Where the arenas are, as snapctl's reader takes it
        (internal/arenas.Layout)."""
        return {"main_arena": self.arena, "mp": self.mp, "n_mmaps": self.n_mmaps,
                "mmapped_mem": self.mmapped_mem, "mangled": self.mangled}

    def mallinfo(self, arenas, budget=None):
        """What mallinfo2() would return, as a dict of its fields;
        WalkTooLong past budget free chunks."""
        m = dict.fromkeys(MALLINFO2, 0)
        limit = sum(struct.unpack_from("<Q", state, MS_SYSTEM_MEM)[0] for _, state in arenas) // MIN_CHUNK + 1
        self.budget = budget
        for address, state in arenas:
            self.add_arena(m, address, state, limit)
        mp = self.read(self.mp, self.mmapped_mem + 8)
        m["hblks"] = struct.unpack_from("<i", mp, self.n_mmaps)[0]
        m["hblkhd"] = struct.unpack_from("<Q", mp, self.mmapped_mem)[0]
        return m

    def add_arena(self, m, address, state, limit):
        size = lambda chunk: struct.unpack("<Q", self.read(chunk + 8, 8))[0] & ~7
        top = struct.unpack_from("<Q", state, MS_TOP)[0]
        if top == 0:
            # An allocator not yet initialized (nothing allocated yet):
            # mallinfo2() would set it up, its top chunk and bins empty.
            m["ordblks"] += 1
            return
        avail, nblocks = size(top), 1
        fastavail = nfast = 0
        for p in struct.unpack_from("<%dQ" % NFASTBINS, state, MS_FASTBINS):
            while p:
                if p & 15:
                    raise HeapUnreadable("arena 0x%x: a fastbin chunk at 0x%x is misaligned" % (address, p))
                head, link = struct.unpack("<QQ", self.read(p + 8, 16))
                fastavail += head & ~7
                nfast += 1
                self.spend()
                if nfast > limit:
                    raise HeapUnreadable("arena 0x%x: a fastbin does not end within the %d chunks the heaps can hold" % (address, limit))
                p = ((p + 16) >> 12) ^ link if self.mangled else link
        avail += fastavail
        walked = 0
        # bin_at(i): the bin's fd and bk pointers, seen as a chunk whose fd
        # lies at bins[2 * (i - 1)]; an empty bin's bk (last(b)) is b
        # itself. Most bins are empty: they are found in one pass.
        links = struct.unpack_from("<%dQ" % (2 * (NBINS - 1)), state, MS_BINS)
        empty = EMPTY_BINS.get(address)
        if empty is None:
            empty = EMPTY_BINS[address] = tuple(address + MS_BINS + 16 * (i - 2) for i in range(1, NBINS))
        for i, p, b in zip(range(1, NBINS), links[1::2], empty):
            if p == b:
                continue
            after = b
            while p != b:
                head, fd, bk = struct.unpack("<QQQ", self.read(p + 8, 24))
                if fd != after:
                    # Links that do not agree: a heap the program
                    # corrupted, or memory that is not a heap's.
                    raise HeapUnreadable("arena 0x%x: bin %d: chunk 0x%x's forward link is not 0x%x" % (address, i, p, after))
                avail += head & ~7
                nblocks += 1
                walked += 1
                self.spend()
                if walked > limit:
                    raise HeapUnreadable("arena 0x%x: bin %d does not end within the %d chunks the heaps can hold" % (address, i, limit))
                p, after = bk, p
        system_mem = struct.unpack_from("<Q", state, MS_SYSTEM_MEM)[0]
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

    def find_tcache(self, syms, version):
        """Where each thread's tcache pointer lies, as its distance below
        the thread pointer (see TCACHE_SYMBOLS). version is glibc's,
        (0, 0) when unknown (a static program)."""
        if not x86_64():
            raise HeapUnreadable("not an x86-64 process")
        if version > TCACHE_LAST:
            raise HeapUnreadable("glibc %s's tcache is newer than the layout snapctl knows" % ".".join(map(str, version)))
        if "" not in syms:
            raise HeapUnreadable("no symbol table for libc (install Debian's libc6-dbg, or the distribution's libc debug symbols)")
        if "tcache" not in syms:
            raise HeapUnreadable("libc's symbol table has no tcache")
        base = syms[""][0]
        offset = syms["tcache"][0] - base
        if "_dl_main_map" in syms:
            # A static program: its TLS block is the only one, right
            # below the thread pointer (glibc's __libc_setup_tls).
            memsz, align = elf_tls_block(gdb.current_progspace().filename)
            return -(-memsz // max(align, 1)) * max(align, 1) - offset
        if "_thread_db_link_map_l_tls_offset" not in syms:
            raise HeapUnreadable("libc's symbol table has no _thread_db_link_map_l_tls_offset")
        # The descriptor glibc keeps for libthread_db: the field's size in
        # bits, a count, its offset in struct link_map.
        bits, _, field = struct.unpack("<III", self.read(syms["_thread_db_link_map_l_tls_offset"][0], 12))
        if bits != 64:
            raise HeapUnreadable("link_map's l_tls_offset is %d bits" % bits)
        tls = struct.unpack("<Q", self.read(self.link_map(base) + field, 8))[0]
        if tls == 0 or tls >= 1 << 32:
            raise HeapUnreadable("libc's TLS block is not static (l_tls_offset 0x%x)" % tls)
        return tls - offset

    def link_map(self, base):
        """The link_map of the object loaded at base, from the dynamic
        linker's list (_r_debug.r_map; public fields l_addr, then l_next
        at 24)."""
        lm = struct.unpack("<Q", self.read(int(gdb.parse_and_eval("(unsigned long)&_r_debug")) + 8, 8))[0]
        for _ in range(65536):
            if lm == 0:
                break
            l_addr, l_next = struct.unpack("<Q16xQ", self.read(lm, 32))
            if l_addr == base:
                return lm
            lm = l_next
        raise HeapUnreadable("libc is not in the dynamic linker's list")

    def tcache_bytes(self, threads):
        """The bytes of the chunks in the tcaches of threads, every one
        stopped: counts[i] chunks of TCACHE_MIN + 16 i bytes in bin i."""
        total = 0
        for th in threads:
            p = struct.unpack("<Q", self.read(thread_pointer(th) - self.tcache, 8))[0]
            # None yet (the thread has not allocated), or gone.
            if p == 0 or p & 15:
                continue
            # The chunk's size, then counts, in one read.
            data = self.read(p - 8, 8 + 2 * TCACHE_BINS)
            head = struct.unpack_from("<Q", data)[0] & ~7
            width = TCACHE_LAYOUTS.get(head)
            if width is None:
                raise HeapUnreadable("thread %d's tcache at 0x%x is a chunk of %d bytes, not glibc's tcache_perthread_struct"
                                     % (th.num, p, head))
            counts = struct.unpack_from("<%d%s" % (TCACHE_BINS, "H" if width == 2 else "B"), data, 8)
            total += sum(map(operator.mul, counts, TCACHE_SIZES))
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
        except (gdb.error, AttributeError, OSError, struct.error) as e:
            h = Heap.__new__(Heap)
            h.pid, h.why, h.mem, h.narenas, h.retry = inferior.pid, "glibc's arenas cannot be found: %s" % e, -1, None, False
            h.tcache, h.tcache_why = None, ""
        if not h.retry:
            HEAPS[inferior.pid] = h
    return h


def libc_symbols(names):
    """The symbols names of the file that defines mallinfo2 in the current
    process (a static program that keeps its table) or of that file's
    separate debug file (Debian's libc6-dbg), found by build id as gdb
    finds it, as (address in the process, size) by name: where they lie
    is their distance from mallinfo2, which is under the name "" (a
    thread-local symbol's value is an offset in the file's TLS block: less
    that distance, it is that offset). {} when there is no such table, None
    when the process has no mallinfo2 (yet). No debug information is
    read."""
    try:
        fn = int(gdb.parse_and_eval("(unsigned long)&mallinfo2"))
    except gdb.error:
        return None
    path = gdb.solib_name(fn) or gdb.current_progspace().filename
    objfile = next((o for o in gdb.objfiles() if o.is_valid() and o.filename == path), None)
    if objfile is None:
        return {}
    paths = [objfile.filename]
    if objfile.build_id:
        dirs = DEBUG_DIRS if DEBUG_DIRS is not None else gdb.parameter("debug-file-directory")
        for d in dirs.split(os.pathsep):
            paths.append(os.path.join(d, ".build-id", objfile.build_id[:2], objfile.build_id[2:] + ".debug"))
    best = {}
    for path in paths:
        syms = elf_symbols(path, ("mallinfo2",) + tuple(names), sizes=True)
        if "mallinfo2" not in syms:
            continue
        base = fn - syms["mallinfo2"][0]
        found = {n: (base + v, size) for n, (v, size) in syms.items() if n != "mallinfo2"}
        found[""] = (base, 0)
        if len(found) > len(best):
            best = found
        if len(best) == len(names) + 1:
            break
    return best
