# The native backend's part of snapctl's agent: jemalloc's own statistics,
# read through mallctl() in the stopped program.
#
# Read into the namespace of driver/gdb/agent.py with the other files of
# native/agent.go's list.

import errno
import os
import struct

import gdb


# jemalloc's own statistics, read where the program allocates with
# jemalloc (Debian's libjemalloc2, linked or preloaded, or linked in):
# glibc's arenas are then not its heap (docs/facts.md, fact 89). jemalloc
# keeps them per arena and adds them up when "epoch" is written;
# mallctl() reads them. A thread's tcache holds freed regions that
# jemalloc counts as allocated until the tcache flushes them:
# stats.arenas.<MALLCTL_ARENAS_ALL>.tcache_bytes is their sum over every
# thread, taken out of in-use heap as glibc's tcaches are. The names go in
# the scratch area below the stack pointer, as mallinfo2's result does:
# nothing is allocated in the program. A jemalloc built without
# statistics (--disable-stats) answers ENOENT, which is said, never taken
# for a flat heap (docs/facts.md, fact 96).
JE_STATS = (("allocated", "stats.allocated"), ("active", "stats.active"), ("resident", "stats.resident"),
            ("mapped", "stats.mapped"), ("tcache_bytes", "stats.arenas.4096.tcache_bytes"))
# JE_OPTIONAL are the statistics a jemalloc may lack (tcache_bytes came
# with 5.0): without them the stop is still measured.
JE_OPTIONAL = ("tcache_bytes",)
# JEMALLOC caches, by process and number of objfiles, the name and address
# of its mallctl, (None, 0) when it has none.
JEMALLOC = {}
# CALLING is set while gdb's own inferior call runs with every thread
# running: another thread's hit of a breakpoint then counts, and is not
# measured (SnapBreakpoint.take).
CALLING = False


class JemallocUnread(Exception):
    """jemalloc's statistics cannot be read in this program."""


def jemalloc_mallctl():
    """The name and address of the current process's mallctl, (None, 0)
    when it has none: its malloc is not jemalloc's."""
    key = (gdb.selected_inferior().pid, len(gdb.objfiles()))
    if key not in JEMALLOC:
        found = (None, 0)
        for name in ("mallctl", "je_mallctl"):
            try:
                found = (name, int(gdb.parse_and_eval("(unsigned long)&%s" % name)))
                break
            except gdb.error:
                pass
        JEMALLOC.clear()
        JEMALLOC[key] = found
    return JEMALLOC[key]


def jemalloc_stats(name, fn, callback):
    """jemalloc's statistics in the current process, by JE_STATS's short
    names. Called directly while the process has one thread; otherwise
    through gdb's call, from a command (never from a breakpoint's
    stop()), with every thread running as gdb lets them (scheduler-locking
    off): jemalloc takes its arenas' locks to add up, and a thread kept
    stopped inside malloc would hold one forever. JemallocUnread when
    mallctl refuses a statistic, CallFailed when a call does not return."""
    inferior = gdb.selected_inferior()
    direct = direct_usable()
    if not direct and (callback or not x86_64()):
        raise CallFailed("%s() not called: with more than one thread it is called only from a stop of every thread" % name)
    sp = int(gdb.newest_frame().read_register("sp"))
    buf = (sp - SCRATCH) & ~15
    # buf: the value read, its length, epoch's new value; then the names.
    blob = bytearray(struct.pack("<QQQQ", 0, 8, 1, 0))
    at = {}
    for key, stat in (("epoch", "epoch"),) + JE_STATS:
        at[key] = buf + len(blob)
        blob += stat.encode() + b"\0"

    def write(address, data):
        if direct:
            os.pwrite(DIRECT.mem, bytes(data), address)
        else:
            inferior.write_memory(address, bytes(data))

    def read(address):
        if direct:
            return struct.unpack("<Q", os.pread(DIRECT.mem, 8, address))[0]
        return struct.unpack("<Q", inferior.read_memory(address, 8).tobytes())[0]

    def call(args):
        if direct:
            r = DIRECT.call(inferior.pid, gdb.selected_thread().ptid[1], fn, 0, 0, name,
                            CALL_TIMEOUT.get("mallctl", 2.0), args=args, top=buf)
            if r is None:
                raise CallFailed("%s() could not be called directly" % name)
        else:
            global CALLING
            f = func("*(int (*)(unsigned long, unsigned long, unsigned long, unsigned long, unsigned long))" + name)
            CALLING = True
            try:
                with mode(), unwound_on_signal():
                    r = int(f(*args))
            except gdb.error as e:
                raise CallFailed("%s(): %s" % (name, e))
            finally:
                CALLING = False
        r &= 0xffffffff
        return r - (1 << 32) if r >= 1 << 31 else r

    if not direct:
        mode = jemalloc_call_mode(fn)
    write(buf, blob)
    r = call((at["epoch"], 0, 0, buf + 16, 8))
    if r != 0:
        raise JemallocUnread('%s("epoch") returned %s' % (name, errno_name(r)))
    out = {}
    for key, stat in JE_STATS:
        write(buf, struct.pack("<QQ", 0, 8))
        r = call((at[key], buf, buf + 8, 0, 0))
        if r == 0:
            out[key] = read(buf)
        elif key not in JE_OPTIONAL:
            why = " (a jemalloc built without statistics, --disable-stats)" if r == errno.ENOENT else ""
            raise JemallocUnread('%s("%s") returned %s%s' % (name, stat, errno_name(r), why))
    return out


def errno_name(r):
    return errno.errorcode.get(r, str(r))


class JemallocBusy(Exception):
    """A thread is inside jemalloc, which may hold a lock mallctl needs."""


def jemalloc_call_mode(fn):
    """How gdb's call of mallctl (at fn) runs, as a context manager
    class. With only the agent's breakpoints, every thread runs during
    the call (scheduler_unlocked): another thread's hit is counted, not
    measured (CALLING). A breakpoint snapctl drives over MI (commands,
    around_call) would stop gdb inside the call when another thread hits
    it, so then only the stopped thread runs (scheduler_locked), once no
    thread is found inside jemalloc's library, whose locks it may hold
    (JemallocBusy: the stop is allocator-busy); jemalloc linked into the
    program, whose frames cannot be told from the program's, runs with
    every thread and those breakpoints disabled (others_disabled: their
    hits meanwhile are not counted)."""
    if not any(b.is_valid() and b.enabled and not isinstance(b, SnapBreakpoint) for b in gdb.breakpoints()):
        return scheduler_unlocked
    lib = gdb.solib_name(fn)
    if not lib:
        return lambda: nested(scheduler_unlocked(), others_disabled())
    t = jemalloc_thread(lib)
    if t is not None:
        raise JemallocBusy("thread %d (%s) is inside jemalloc, which may hold a lock that mallctl() needs" % (t.num, t.ptid[1]))
    return scheduler_locked


class nested:
    """Two context managers as one."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __enter__(self):
        self.a.__enter__()
        try:
            self.b.__enter__()
        except BaseException:
            self.a.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            self.b.__exit__(*exc)
        finally:
            self.a.__exit__(*exc)


def jemalloc_thread(lib):
    """A thread with a frame in jemalloc's library lib, None when there
    is none. A thread waiting on a condition (jemalloc's background
    thread sleeps so) holds no lock of jemalloc's: its mutex is released
    for the wait. The current thread and frame are selected again after."""
    cur, frame = gdb.selected_thread(), gdb.selected_frame()
    try:
        for t in gdb.selected_inferior().threads():
            if not t.is_valid():
                continue
            if t.num != cur.num:
                t.switch()
            try:
                f, n = gdb.newest_frame(), 0
                while f is not None and n < 64:
                    name = f.name() or ""
                    if "pthread_cond_" in name:
                        break
                    if gdb.solib_name(f.pc()) == lib:
                        return t
                    f, n = f.older(), n + 1
            except gdb.error:
                continue
        return None
    finally:
        cur.switch()
        frame.select()


class others_disabled:
    """The breakpoints that snapctl drives over MI (with commands or
    around_call), disabled for a with block: another thread that hit one
    during gdb's call would stop gdb there and leave the call unfinished
    in the stopped thread. Its hits meanwhile are not counted; the
    agent's own breakpoints count theirs (CALLING)."""

    def __enter__(self):
        self.off = [b for b in gdb.breakpoints() if b.is_valid() and b.enabled and not isinstance(b, SnapBreakpoint)]
        for b in self.off:
            b.enabled = False

    def __exit__(self, *exc):
        for b in self.off:
            if b.is_valid():
                b.enabled = True


class scheduler_unlocked:
    """gdb's scheduler-locking off for a with block: every thread runs
    during gdb's calls."""

    def __enter__(self):
        self.prev = gdb.parameter("scheduler-locking")
        if self.prev not in ("off", "replay"):
            gdb.execute("set scheduler-locking off")

    def __exit__(self, *exc):
        if self.prev not in ("off", "replay"):
            gdb.execute("set scheduler-locking %s" % self.prev)


def jemalloc_memory(rec, name, fn, callback):
    """Adds jemalloc's figures to rec, the stop's record, or why they
    are missing."""
    try:
        je = jemalloc_stats(name, fn, callback)
    except JemallocBusy as e:
        rec["busy_error"] = str(e)
        rec["heap_unmeasured"] = "allocator-busy"
        return rec
    except CallFailed as e:
        rec["call_error"] = str(e)
        rec["heap_unmeasured"] = "allocator-call-failed"
        return rec
    except (JemallocUnread, gdb.error, OSError, struct.error) as e:
        rec["allocator_error"] = "jemalloc's statistics cannot be read: %s" % e
        rec["heap_unmeasured"] = "no-allocator-state"
        return rec
    cached = je.get("tcache_bytes", 0)
    rec.update(heap_in_use_bytes=je["allocated"] - cached, heap_free_bytes=je["active"] - je["allocated"] + cached,
               jemalloc=je)
    if "tcache_bytes" in je:
        rec["tcache_bytes"] = cached
    return rec
