# The native backend's part of snapctl's agent: heaptrack's stream cut at
# a stop (native.sites), and the check that a stop is not inside
# heaptrack's own calls. Where the library keeps its lock and buffer is
# the heaptrack package's to say (heaptrack.AgentLayout, given by
# record_sites); where the library is loaded, gdb's.
#
# Read into the namespace of driver/gdb/agent.py with the other files of
# native/agent.go's list.

import json
import os
import select
import struct
import time

import gdb


# SITES cuts heaptrack's stream at every measured stop (native.sites), once
# snapctl says where (record_sites). MARK_WAIT bounds, in seconds, the
# write of a mark into a FIFO that snapctl does not empty.
SITES = None
MARK_WAIT = 10


def record_sites(fifo, layout):
    """Cuts heaptrack's stream at every measured stop from now on: its
    library writes into fifo, which snapctl reads. layout is JSON,
    heaptrack.AgentLayout: where the library's lock and output state lie,
    as snapctl read them from the library (heaptrack.ReadLayout)."""
    global SITES
    SITES = SiteCutter(fifo, json.loads(layout))


def heaptrack_call():
    """Whether the current stop is heaptrack's library calling a
    function of a library (native.sites): its start-up calls getpid, its
    writes call write, under its own lock. Such a hit is not the
    program's: it is not counted, and stopping there would find the lock
    held by the stopped thread itself. A stop in the program's own code
    is never one; elsewhere the innermost frames are looked at
    (docs/facts.md, fact 91)."""
    if SITES is None:
        return False
    try:
        frame = gdb.newest_frame()
        if gdb.current_progspace().solib_name(frame.pc()) is None:
            return False
        inside = SITES.contains(gdb.selected_inferior().pid)
        for _ in range(HEAPTRACK_DEPTH):
            if frame is None:
                break
            if inside(frame.pc()):
                return True
            frame = frame.older()
    except (gdb.error, OSError, LookupError):
        pass
    return False


# HEAPTRACK_DEPTH is how many frames from the innermost heaptrack_call
# looks at: heaptrack's own calls into libc are a few frames under its
# entry points.
HEAPTRACK_DEPTH = 12


def sites_cut():
    """Cuts heaptrack's stream at this stop, from snapctl's command once
    it let a thread out of heaptrack's lock, and prints the result as JSON
    (see SiteCutter.cut)."""
    print(json.dumps(SITES.cut()))


class SiteCutter:
    """Cuts heaptrack's stream at a stop, from inside gdb, while no thread
    of the program runs (native.sites; snapctl's heaptrack package reads
    the stream). heaptrack's library writes every event under one lock
    into a 4,096-byte buffer, written into the FIFO only when full
    (docs/facts.md, facts 48 and 51). With the lock free, the stream at
    the stop is what the FIFO received, then the buffer: the cut reads the
    buffer from /proc/PID/mem and writes a mark into the FIFO, a NUL,
    "snapctl-mark K N" and the buffer's N bytes (heaptrack.FIFOMark),
    after everything the library wrote. A held lock means a thread is writing
    an event: snapctl lets it out (native's letOut) and asks again
    (sites_cut).

    Cut in place, inside a breakpoint's stop(), only where gdb stops every
    thread before it calls stop(): gdb's target not in non-stop mode
    underneath all-stop (maint set target-non-stop off, which snapctl run
    sets with sites)."""

    def __init__(self, fifo, layout):
        self.fifo, self.layout, self.lib = fifo, layout, layout["lib"]
        # The layout's reads, made once: the lock word and its owner in
        # one read, the state's fields in another.
        self.lock_read = layout.get("lock_owner", 8) + 4
        self.lock_fields = struct.Struct("<I%dxi" % (self.lock_read - 8))
        self.state_read = max(layout.get("fd", 0) + 4, layout.get("size", 4) + 4, layout.get("buffer", 8) + 8)
        self.pid = None
        self.mem = None
        self.base = None
        self.checked = False
        self.marks = 0
        self.all_stop = None

    def in_place(self, trim):
        """Whether a stop in a breakpoint's stop() can be measured and cut
        there: every thread stopped by gdb, no thread inside heaptrack's
        lock, and no malloc_trim to call in a process of threads."""
        if self.all_stop is None:
            out = gdb.execute("maint show target-non-stop", to_string=True)
            self.all_stop = out.rstrip().endswith("is off.")
        if not self.all_stop:
            return False
        inferior = gdb.selected_inferior()
        threads = len(inferior.threads())
        # stop() never makes gdb's own inferior call: one thread calls
        # the allocator directly or not in place; more than one call
        # nothing but malloc_trim, which then waits for a command.
        if (threads == 1 and not direct_usable()) or (trim and threads > 1):
            return False
        try:
            word, _ = self.lock_state(inferior.pid)
        except (OSError, struct.error, LookupError, gdb.error):
            return False
        return word == 0

    def contains(self, pid):
        """A test of whether an address of process pid lies in heaptrack's
        library: from its load address over the span of its segments."""
        self.open(pid)
        lo, hi = self.base, self.base + self.layout["span"]
        return lambda pc: lo <= pc < hi

    def lock_state(self, pid):
        """heaptrack's lock in process pid: its lock word and its owner's
        TID (a glibc mutex; the layout says where)."""
        self.open(pid)
        return self.lock_fields.unpack(os.pread(self.mem, self.lock_read, self.lock_at))

    def open(self, pid):
        """Finds the library in process pid and opens its memory, once."""
        if self.pid == pid:
            return
        if self.mem is not None:
            os.close(self.mem)
        self.pid, self.mem = None, None
        base = library_base(self.layout)
        self.mem = os.open("/proc/%d/mem" % pid, os.O_RDONLY | os.O_CLOEXEC)
        self.pid, self.base, self.checked = pid, base, False
        self.lock_at, self.data_at = base + self.layout["lock"], base + self.layout["data"]

    def cut(self):
        """Marks the stream at this stop. Returns {"sites_mark": K}, or
        {"sites_empty": True} while the library has no output yet (it
        opens it at the program's first allocation), {"sites_busy": TID}
        when thread TID holds the lock, {"sites_error": why}."""
        try:
            word, owner = self.lock_state(gdb.selected_inferior().pid)
            if word != 0:
                return {"sites_busy": owner}
            l = self.layout
            (state,) = struct.unpack("<Q", os.pread(self.mem, 8, self.data_at))
            if state == 0:
                return {"sites_empty": True}
            # One read of the fields (16 bytes in heaptrack 1.4's layout).
            fields = os.pread(self.mem, self.state_read, state)
            fd = struct.unpack_from("<i", fields, l["fd"])[0]
            size = struct.unpack_from("<I", fields, l["size"])[0]
            buf = struct.unpack_from("<Q", fields, l["buffer"])[0]
            if fd < 0:
                return {"sites_empty": True}
            if size > l["capacity"] or buf == 0:
                return {"sites_error": "heaptrack's buffer reads %d bytes at %#x: not the layout of %s" % (size, buf, self.lib)}
            if not self.checked:
                if not os.path.samestat(os.stat("/proc/%d/fd/%d" % (self.pid, fd)), os.stat(self.fifo)):
                    return {"sites_error": "heaptrack's output (fd %d) is not %s: not the layout of %s" % (fd, self.fifo, self.lib)}
                self.checked = True
            pending = os.pread(self.mem, size, buf) if size else b""
            if len(pending) != size:
                return {"sites_error": "heaptrack's buffer could not be read whole"}
            k = self.marks + 1
            self.write(b"\0snapctl-mark %d %d\n" % (k, size) + pending)
            self.marks = k
            return {"sites_mark": k}
        except (OSError, LookupError, struct.error, gdb.error) as e:
            return {"sites_error": "cutting heaptrack's stream: %s" % e}

    def write(self, data):
        # Opened without blocking, which fails at once when snapctl no
        # longer reads (ENXIO) rather than waiting forever. Nothing else
        # writes while every thread is stopped, so the mark goes in whole
        # however many writes it takes; a FIFO that stays full (snapctl
        # stopped reading) fails the cut rather than hold gdb.
        fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            view = memoryview(data)
            deadline = time.monotonic() + MARK_WAIT
            poller = select.poll()
            poller.register(fd, select.POLLOUT)
            while view:
                try:
                    view = view[os.write(fd, view):]
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise OSError("heaptrack's FIFO stayed full for %g s: snapctl reads no more" % MARK_WAIT)
                    poller.poll(left * 1000)
        finally:
            os.close(fd)


def library_base(layout):
    """Where heaptrack's library is loaded in the current process: where
    gdb finds the layout's anchor, a function the library exports, less
    the anchor's value in the file (heaptrack.AgentLayout)."""
    try:
        at = int(gdb.parse_and_eval("(unsigned long)&'%s'" % layout["anchor"]))
    except gdb.error as e:
        raise LookupError("the process has not loaded %s: %s" % (layout["lib"], e))
    return at - layout["anchor_value"]
