# snapctl's agent inside gdb.
#
# A plan breakpoint with nothing to do but the snapshot (no commands, no
# around_call) is a gdb.Breakpoint whose stop method does the whole stop in
# gdb: it evaluates the condition, counts the hit, takes the snapshot and
# the stacks, appends one JSON line to the records file and returns False,
# so that gdb resumes the target without stopping: no *stopped record, no
# breakpoint notification, no MI round trip. snapctl reads the records
# file as it grows and does the rest (naming and keeping the snapshot,
# run.json, the analysis).
#
# stop returns True, and gdb stops as for any breakpoint, when snapctl must
# act: after the hit that finishes the breakpoint (max_hits), which snapctl
# deletes, and after a failed snapshot, which the record describes.
#
# The hit selection below must agree with plan.Breakpoint's
# ShouldSnapshot and Done; TestAgentHitSelection compares them.
#
# This file is the agent's core, the same for every backend: taking
# stops (SnapBreakpoint), the records and busy files snapctl reads
# (Agent), the check of a plan's locations (location_resolves). A
# backend whose stops need more of gdb's Python keeps it in its own
# folder and registers a Stops object in BACKENDS under the kind of its
# measurement (backend.go's AgentMeasure): the native backend's files
# (driver/backend/native/agent/, listed in native/agent.go) are read
# into this file's namespace after it, as one script. A kind without one
# (massif, memcheck) is measured by valgrind's monitor command. The
# files' unit tests (*_test.py, `python3 -m unittest`) are run by .ci/run.

import json
import os
import time

import gdb


def should_snapshot(hit, every, max_hits):
    """Whether hit (1-based, counted after skip) takes a snapshot."""
    every = max(every, 1)
    return hit >= 1 and (hit - 1) % every == 0 and (max_hits == 0 or hit <= max_hits)


def done(hit, every, max_hits):
    """Whether no hit after this one would take a snapshot."""
    every = max(every, 1)
    if max_hits == 0:
        return False
    following = hit + every - (hit - 1) % every
    return hit >= max_hits or following > max_hits


def frame_record(frame):
    """A frame as snapctl's driver records it (gdb MI's frame fields)."""
    pc = frame.pc()
    rec = {"func": frame.name() or "??", "addr": "0x%016x" % pc}
    sal = frame.find_sal()
    if sal.symtab is not None:
        rec["file"] = sal.symtab.filename
        rec["fullname"] = sal.symtab.fullname()
        rec["line"] = sal.line
    else:
        lib = gdb.solib_name(pc)
        if lib:
            rec["from"] = lib
    return rec


def backtrace(depth):
    """The selected thread's frames, innermost first, at most depth."""
    frames = []
    frame = gdb.newest_frame()
    while frame is not None and len(frames) < depth:
        frames.append(frame_record(frame))
        frame = frame.older()
    return frames


def thread_record(thread, details):
    rec = {"id": str(thread.num), "state": "stopped"}
    lwp = thread.ptid[1]
    if lwp:
        rec["target-id"] = "Thread %d" % lwp
    if details:
        rec["details"] = details
    return rec


class RecordLost(Exception):
    """A record could not be written (see Agent.write)."""


# BUSY_WIDTH is the length of every line of the busy file: each one
# overwrites the whole of the last.
BUSY_WIDTH = 32


class Stops:
    """What a backend's Python adds to the agent's stops; these defaults
    are valgrind's (massif, memcheck), whose stops need nothing more."""

    def start(self, measure):
        """Called as the Agent is made, with its measurement."""

    def repeated(self):
        """Whether the current stop is no new hit (the native backend's
        step over a breakpoint reports one again): gdb resumes, and the
        hit is not counted."""
        return False

    def calling(self):
        """Whether a stop's own call into the program runs: a hit then
        is counted, not measured."""
        return False

    def defers(self, measure):
        """Whether a stop's measurement waits for gdb's stop of every
        thread (see Agent.defers)."""
        return False

    def memory(self, measure, callback):
        """The stop's measurement as a dict for the record, or None when
        valgrind's monitor command writes it to a file."""
        return None


# BACKENDS holds the Stops of each backend that has its own, by the kind
# of its measurement; the backend's files add theirs as gdb reads them.
BACKENDS = {}


class Agent:
    def __init__(self, records, snapdir, busy, measure):
        self.fd = os.open(records, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        # The busy file says whether a stop is under way, "N BP" for the
        # Nth stop, at breakpoint BP, or "-" between stops: snapctl reads
        # it to find a stop that does not end (a stalled vgdb or
        # valgrind), which would otherwise leave it waiting forever.
        self.busy = os.open(busy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        self.mark("-")
        self.calls = 0
        self.snapdir = snapdir
        # snapctl creates this file when the run is to end (Ctrl-C,
        # --timeout): from then on no stop is taken.
        self.halt = os.path.join(snapdir, "agent-halt")
        # How a stop is measured, as snapctl's backend says (backend.go):
        # massif's snapshot command, its file's extension and the line
        # valgrind prints on success; or the native backend's reading of
        # /proc and glibc's allocator, written as JSON.
        self.measure = measure
        self.ext = measure["ext"]
        self.stops = BACKENDS.get(measure["kind"]) or Stops()
        self.stops.start(measure)
        self.taken = 0
        self.breakpoints = []
        # The one thread of the last stop, as (number, details), while the
        # target had only one.
        self.single = None
        # Valgrind's details of each thread by number, read while the set
        # of threads stays as it was (self.known).
        self.details = {}
        self.known = None
        # A stop's breakpoint, hit and thread, whose measurement waits
        # for gdb's stop of every thread (see defers).
        self.deferred = None
        # Why a record could not be written (see write).
        self.lost = None

    def insert(self, path):
        """Inserts the breakpoint described in the JSON file at path and
        prints its gdb number."""
        with open(path) as f:
            spec = json.load(f)
        bp = SnapBreakpoint(self, spec)
        self.breakpoints.append(bp)
        print(bp.number)

    def hits(self):
        """Prints how often each breakpoint's condition held, skipped hits
        included (gdb's "times"), and whether it is still pending (no
        library defined its location), as a JSON object by gdb number."""
        print(json.dumps({str(bp.number): {"times": bp.times, "pending": bp.pending}
                          for bp in self.breakpoints if bp.is_valid()}))

    def mark(self, text):
        os.pwrite(self.busy, (text.ljust(BUSY_WIDTH - 1) + "\n").encode(), 0)

    def begin(self, bp):
        self.calls += 1
        self.mark("%d %d" % (self.calls, bp.number))

    def write(self, rec):
        """Appends rec to the records. A record that cannot be written
        whole (a full file system) is kept as lost, and RecordLost tells
        the stop to stop gdb, so that snapctl asks (see stopped) and ends
        the run rather than lose stops without a word."""
        data = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
        try:
            n = os.write(self.fd, data)
        except OSError as e:
            self.lost = "writing the agent's records: %s" % e
            raise RecordLost()
        if n != len(data):
            self.lost = "writing the agent's records: %d of %d bytes written" % (n, len(data))
            raise RecordLost()

    def threads(self, current, frame):
        """Every thread with its innermost frame; the current one's is
        frame. Reading another thread's frame selects it, so the current
        thread and its innermost frame are selected again after.

        A thread's details (valgrind's "tid 1 VgTs_Runnable") cost a round
        trip through vgdb each. While the target has one thread, the same
        as at the last stop, they are not read again: snapctl's MI path
        does not list such a thread again either."""
        threads = sorted(gdb.selected_inferior().threads(), key=lambda t: t.num)
        if len(threads) == 1 and self.single is not None and self.single[0] == threads[0].num:
            return [dict(thread_record(threads[0], self.single[1]), frame=frame)]
        self.single = None
        out = []
        try:
            for t in threads:
                rec = thread_record(t, t.details)
                if len(threads) == 1:
                    self.single = (t.num, t.details)
                if t.num == current.num:
                    rec["frame"] = frame
                elif t.is_valid():
                    # A thread gdb cannot unwind is still listed, as
                    # -thread-info lists it, without a frame.
                    try:
                        t.switch()
                        rec["frame"] = frame_record(gdb.newest_frame())
                    except gdb.error:
                        pass
                out.append(rec)
        finally:
            if len(threads) > 1:
                current.switch()
                gdb.newest_frame().select()
        return out

    def current_details(self, current):
        """Valgrind's details of the current thread, read through vgdb
        only when the set of threads changed since they were last read."""
        nums = tuple(sorted(t.num for t in gdb.selected_inferior().threads()))
        if nums != self.known:
            self.known, self.details = nums, {}
        if current.num not in self.details:
            self.details[current.num] = current.details
        return self.details[current.num]

    def defers(self):
        """Whether a stop that takes a measurement leaves it for gdb's stop
        (see stopped): a native measurement while the process has more
        than one thread. gdb calls a breakpoint's stop() while the other
        threads run on (natively gdb 13 drives the threads one by one
        underneath all-stop): the allocator is read only once gdb has
        stopped every thread, and gdb's own inferior call (no direct
        call) is made from a command, never from stop(). With native.sites
        a stop is taken in stop() only where gdb has stopped every thread
        before calling it (SiteCutter.in_place): heaptrack's stream is cut
        while no thread runs. The backend's Stops says (NativeStops)."""
        return self.stops.defers(self.measure)

    def stopped(self):
        """Takes the measurement that a stop left for gdb's stop of every
        thread (see defers), from snapctl's command at that stop: the
        record is written as stop() would have. A record that could not be
        written is said after agentFailed (agent.go), for snapctl to end
        the run."""
        if self.lost is None and self.deferred is not None:
            self.take_deferred()
        if self.lost is not None:
            print("snapctl: agent failed: %s" % self.lost)

    def take_deferred(self):
        bp, hit, thread = self.deferred
        self.deferred = None
        self.begin(bp)
        try:
            if thread.is_valid():
                thread.switch()
            try:
                rec = self.snapshot(bp, hit, callback=False)
            except Exception as e:
                rec = {"bp": str(bp.number), "kind": "agent", "error": "%s: %s" % (type(e).__name__, e)}
            try:
                self.write(rec)
            except RecordLost:
                pass
        finally:
            self.mark("-")

    def snapshot(self, bp, hit, callback=True):
        self.taken += 1
        path = "%s/%d%s" % (self.snapdir, self.taken, self.ext)
        # A backend's own measurement (the native backend's) goes in the
        # record: a file per stop would cost its creation here and its
        # removal in snapctl.
        memory = self.stops.memory(self.measure, callback)
        if memory is not None:
            path = ""
        else:
            # Success prints only the report line; valgrind's errors come
            # back as text.
            out = gdb.execute("%s %s" % (self.measure["monitor"], path), to_string=True)
            report = self.measure["report"]
            msg = "\n".join(l.strip() for l in out.splitlines() if l.strip() and report not in l)
            if msg:
                return {"bp": str(bp.number), "kind": "snapshot", "error": msg}
        rec = {
            "bp": str(bp.number),
            "hit": hit,
            "time": time.time(),
            "snapshot": path,
            "done": done(hit, bp.every, bp.max_hits),
        }
        if memory is not None:
            rec["memory"] = memory
        current = gdb.selected_thread()
        # How much thread state the stop records (the plan's "threads"):
        # every thread read costs round trips through vgdb.
        if bp.threads == "none":
            rec["thread"] = thread_record(current, None)
            rec["frame"] = bp.stopped_frame()
            return rec
        frames = backtrace(bp.depth)
        if bp.threads == "all":
            threads = self.threads(current, frames[0])
            thread = next(dict(t) for t in threads if t["id"] == str(current.num))
            del thread["frame"]
        else:
            thread = thread_record(current, self.current_details(current))
            threads = [dict(thread, frame=frames[0])]
        rec.update(thread=thread, backtrace=frames, threads=threads)
        return rec


def location_resolves(location, condition):
    """Whether location resolves in the program as gdb has read it, with
    condition (may be empty) valid there, as -break-insert would find
    them. The breakpoint that finds out is internal, so that it takes no
    user number, and goes at once."""
    try:
        bp = gdb.Breakpoint(location, internal=True)
    except gdb.error:
        return False
    try:
        if bp.pending:
            return False
        if condition:
            bp.condition = condition
        return True
    except gdb.error:
        return False
    finally:
        bp.delete()




def utf8_host_charset():
    """Has gdb decode the program's paths as UTF-8 where its locale says
    ASCII. gdb hands Python every file name (a program's, an objfile's, a
    symtab's) decoded with its host charset, strictly, and under the C
    locale (no LANG, as in many CI jobs and services) that is ASCII: a
    program under "/srv/müller" failed every native stop. Python's file
    functions encode those names as UTF-8 again under the C locale (its
    UTF-8 mode), so the bytes round-trip. gdb's charset for the target's
    own strings is left alone."""
    if "ANSI_X3.4-1968" in gdb.execute("show host-charset", to_string=True):
        gdb.execute("set host-charset UTF-8")


utf8_host_charset()




class SnapBreakpoint(gdb.Breakpoint):
    def __init__(self, agent, spec):
        # A location in a library not loaded yet is pending until the
        # library loads: snapctl checked before the run that the program,
        # a library it links, or (pending: true) a later one defines it.
        super().__init__(spec["location"])
        self.agent = agent
        self.cond = spec.get("condition", "")
        self.skip = spec.get("skip", 0)
        self.every = spec.get("every", 1)
        self.max_hits = spec.get("max_hits", 0)
        self.threads = spec.get("threads", "none")
        self.depth = spec.get("depth", 32)
        self.times = 0
        # The stopped frame's record, by the address of the breakpoint's
        # one location (see stopped_frame).
        self.frame_at = (None, None)

    def stopped_frame(self):
        """The record of the frame the breakpoint stopped in. Creating
        gdb's frame costs a round trip through vgdb (the unwinder reads
        the stack), about as much as the snapshot: while the breakpoint
        has one location, every hit stops at its address, in the same
        frame record, which is read once per address."""
        locations = getattr(self, "locations", None)  # gdb 13 and later
        if not locations or len(locations) != 1:
            return frame_record(gdb.newest_frame())
        address = locations[0].address
        if self.frame_at[0] != address:
            self.frame_at = (address, frame_record(gdb.newest_frame()))
        return dict(self.frame_at[1])

    def stop(self):
        # The run is ending: the hit is not measured, and it stops the
        # program for the interrupt snapctl sends then. Declined, the hit
        # would resume the program, and an interrupt that valgrind's
        # gdbserver reports as a breakpoint's hit (the next hit of a
        # program that hits all the time) would never stop it.
        if os.path.exists(self.agent.halt):
            return True
        if self.agent.stops.repeated():
            return False
        self.agent.begin(self)
        try:
            return self.take()
        except RecordLost:
            return True
        finally:
            self.agent.mark("-")

    def take(self):
        # A condition gdb cannot evaluate counts as true, as gdb counts it
        # for its own conditions, and the record says why.
        try:
            if self.cond and not bool(gdb.parse_and_eval(self.cond)):
                return False
        except Exception as e:  # gdb.error, or a value with no truth value
            self.agent.write({"bp": str(self.number), "kind": "condition", "error": str(e)})
        self.times += 1
        hit = self.times - self.skip
        if not should_snapshot(hit, self.every, self.max_hits):
            return False
        if self.agent.stops.calling():
            # Hit by another thread during a stop's call (jemalloc_stats):
            # counted, not measured.
            return False
        if self.agent.defers():
            self.agent.deferred = (self, hit, gdb.selected_thread())
            return True
        try:
            rec = self.agent.snapshot(self, hit)
        except Exception as e:
            rec = {"bp": str(self.number), "kind": "agent", "error": "%s: %s" % (type(e).__name__, e)}
        self.agent.write(rec)
        return "error" in rec or rec["done"]
