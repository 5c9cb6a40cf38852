# The native backend's part of snapctl's agent: a stop's measurement
# (resident memory from /proc, the allocator through mallinfo2, glibc's
# arenas or jemalloc, heaptrack's cut with native.sites), and the hooks
# the agent's stops call for the native backend (NativeStops).
#
# Read into the namespace of driver/gdb/agent.py with the other files of
# native/agent.go's list.

import json
import os
import struct
import time

import gdb


# The native backend's measurement (snapctl's native.go reads it). Nothing
# here allocates in the target or writes to its streams: /proc is read by
# gdb, and the allocator answers through mallinfo2(), which only reads.


def proc_status(pid):
    """VmRSS and RssAnon of process pid, in bytes, from /proc. The file is
    read with os's calls: Python's open() adds three system calls and a
    decoder, a third of the reading's cost."""
    fd = os.open("/proc/%d/status" % pid, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 8192)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    text = b"".join(chunks)
    return status_kib(text, b"\nVmRSS:") * 1024, status_kib(text, b"\nRssAnon:") * 1024


def status_kib(text, key):
    """The figure of the line key begins in /proc/PID/status's text ("\nVmRSS:
    1452 kB"), 0 when there is none."""
    i = text.find(key)
    if i < 0:
        return 0
    i += len(key)
    return int(text[i:text.index(b"\n", i)].split()[0])


# MALLINFO2 are struct mallinfo2's fields, ten size_t, in order.
MALLINFO2 = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")




def mallinfo2():
    """glibc's mallinfo2() as a dict. On x86-64 it is called as CALL_TYPE
    mallinfo2(buf), which needs no debug information: the ABI returns a
    large struct through a hidden pointer in the first argument register,
    here buf, a scratch area SCRATCH bytes below the stack pointer, past
    the red zone and the call's own frames, which the call overwrites and
    nothing reads. A process with one thread is called directly
    (direct_call); otherwise, or when that cannot be done, gdb makes the
    call. Elsewhere gdb makes the call with libc's debug information."""
    if not x86_64():
        v = func("mallinfo2")()
        return {f: int(v[f]) for f in MALLINFO2}
    size = 8 * len(MALLINFO2)
    data = direct_call("mallinfo2", result=size)
    if data is None:
        buf = (int(gdb.newest_frame().read_register("sp")) - SCRATCH) & ~15
        voidp = gdb.lookup_type("void").pointer()
        func("*(%s (*)(void *))mallinfo2" % CALL_TYPE)(gdb.Value(buf).cast(voidp))
        data = gdb.selected_inferior().read_memory(buf, size).tobytes()
    return dict(zip(MALLINFO2, struct.unpack("<%dQ" % len(MALLINFO2), data)))


def malloc_trim():
    """Calls glibc's malloc_trim(0), directly as mallinfo2 is when it
    can."""
    if x86_64():
        if direct_call("malloc_trim", 0) is None:
            func("*(%s (*)(unsigned long))malloc_trim" % CALL_TYPE)(0)
    else:
        func("*(int (*)(unsigned long))malloc_trim")(0)


def native_memory(trim, callback=True):
    """The native measurement of the stopped process. In a breakpoint's
    stop() (callback) the process has one thread and the direct call is
    usable, or, with native.sites, gdb has stopped every thread and
    nothing is called while there are more (see Agent.defers and
    SiteCutter.in_place); elsewhere it runs from a command of
    snapctl's with every thread stopped, and gdb may make a call.
    Wherever libc's symbol table gives the arenas, with one thread or
    more, they are read from memory, nothing called (Heap.read_all);
    mallinfo2() is called only without it, in a process of one thread.
    malloc_trim, which must be called, runs with only the stopped thread
    (scheduler-locking on) and only when no arena's lock is held. An
    arena whose lock is held is in the middle of a change: that stop
    records resident memory only (busy_error). A stop without the
    allocator's figures says why in heap_unmeasured, the run.json event
    kind of its cause."""
    inferior = gdb.selected_inferior()
    pid = inferior.pid
    # Listing the threads asks gdbserver for them: once a stop.
    threads = inferior.threads()
    single = len(threads) == 1
    rss, anon = proc_status(pid)
    rec = {"rss_bytes": rss, "anon_rss_bytes": anon}
    # With native.sites, heaptrack's record is the in-use heap whatever
    # the allocator, and no thread may run before the stream's cut.
    name, fn = jemalloc_mallctl() if SITES is None else (None, 0)
    if fn:
        return jemalloc_memory(rec, name, fn, callback)
    h = heap()
    arenas = False
    try:
        if not h.why:
            t0 = time.monotonic()
            locked, count, mi = h.read_all()
            rec["heap_read_seconds"] = round(time.monotonic() - t0, 6)
            arenas = True
            if locked:
                rec["busy_error"] = ("a thread holds the lock of %d of glibc's %d arenas: it is inside the allocator"
                                     % (locked, count))
                rec["heap_unmeasured"] = "allocator-busy"
                return rec
        elif single:
            mi = mallinfo2()
        else:
            # A static binary, a libc that is not glibc, or no symbol
            # table for libc.
            rec["allocator_error"] = h.why
            rec["heap_unmeasured"] = "no-allocator-state"
            return rec
    except CallFailed as e:
        # This stop's call, not the allocator: the next stop calls again.
        rec["call_error"] = str(e)
        rec["heap_unmeasured"] = "allocator-call-failed"
        return rec
    except HeapUnreadable as e:
        rec["call_error"] = "glibc's arenas could not be read: %s" % e
        rec["heap_unmeasured"] = "allocator-call-failed"
        return rec
    except gdb.error as e:
        # A static binary, or a libc that is not glibc.
        rec["allocator_error"] = str(e)
        rec["heap_unmeasured"] = "no-allocator-state"
        return rec
    cached = None
    if h.tcache is not None:
        try:
            cached = h.tcache_bytes(threads)
        except HeapUnreadable as e:
            rec["call_error"] = "glibc's per-thread caches could not be read: %s" % e
            rec["heap_unmeasured"] = "allocator-call-failed"
            return rec
    else:
        rec["tcache_error"] = h.tcache_why or "glibc's per-thread caches cannot be found: %s" % h.why
    rec.update(heap_in_use_bytes=mi["uordblks"] - (cached or 0), heap_free_bytes=mi["fordblks"] + (cached or 0),
               mmap_bytes=mi["hblkhd"], arena_bytes=mi["arena"], mallinfo2={f: mi[f] for f in MALLINFO2})
    if cached is not None:
        rec["tcache_bytes"] = cached
    n = h.count()
    if n is not None:
        rec["arenas"] = n
    if trim:
        try:
            if single:
                malloc_trim()
            elif not arenas:
                raise CallFailed("malloc_trim() not called: with more than one thread it is called only when "
                                 "no arena's lock is held, which needs libc's symbol table")
            else:
                with scheduler_locked():
                    malloc_trim()
            rec["trim_released_bytes"] = rss - proc_status(pid)[0]
        except (CallFailed, gdb.error) as e:
            rec["call_error"] = str(e)
    return rec


def measure_native(path, trim, reader=None):
    """Writes the native measurement of the stopped target to path, for
    a stop over MI: every thread is stopped (gdb's all-stop). With
    native.sites heaptrack's stream is cut there too. reader is the
    socket of snapctl's reader of glibc's arenas (HEAP_READER), for runs
    whose stops all go over MI, where no Agent says it."""
    global HEAP_READER
    if reader and not HEAP_READER and ARENA_READER is None:
        HEAP_READER = reader
    rec = native_memory(trim, callback=False)
    if SITES is not None:
        rec.update(SITES.cut())
    elif not trim and "mallinfo2" in rec:
        rec["reading"] = reading()
    with open(path, "w") as f:
        json.dump(rec, f)


def reading():
    """What snapctl needs to take the next stops' measurement itself,
    without gdb, as native_memory takes it here (native/quick.go): where
    glibc's arenas, its arena count and each thread's tcache pointer lie
    and how they are laid out (what snapctl found, internal/arenas.Glibc,
    handed back), and each thread's thread pointer by kernel id.
    None when native_memory would not read the arenas so (jemalloc, no
    tcache)."""
    inferior = gdb.selected_inferior()
    h = HEAPS.get(inferior.pid)
    if h is None or h.why or h.tcache is None or jemalloc_mallctl()[1]:
        return None
    threads = {}
    try:
        for th in inferior.threads():
            threads[str(th.ptid[1])] = thread_pointer(th)
    except HeapUnreadable:
        return None
    return {"pid": inferior.pid, "glibc": FOUND.get(inferior.pid), "threads": threads}


class NativeStops(Stops):
    """The native backend's part of the agent's stops (agent.py's Stops):
    a hit is counted once across gdb's step over the breakpoint
    (repeated_hit) and not inside heaptrack's own calls, a stop during
    jemalloc's mallctl() call is only counted, and the measurement is
    native_memory's, with heaptrack's cut under native.sites."""

    def start(self, measure):
        global HEAP_READER
        HEAP_READER = measure.get("heap_reader")

    def repeated(self):
        return repeated_hit() or heaptrack_call()

    def calling(self):
        return CALLING

    def defers(self, measure):
        if measure.get("sites", False):
            return SITES is None or not SITES.in_place(measure.get("trim", False))
        return not direct_usable()

    def memory(self, measure, callback):
        memory = native_memory(measure.get("trim", False), callback)
        if SITES is not None:
            memory.update(SITES.cut())
        return memory


BACKENDS["native"] = NativeStops()
