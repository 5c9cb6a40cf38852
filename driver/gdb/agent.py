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

import errno
import json
import operator
import os
import select
import signal
import socket
import struct
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
        global HEAP_READER
        HEAP_READER = measure.get("heap_reader")
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
        while no thread runs."""
        if self.measure["kind"] != "native":
            return False
        if self.measure.get("sites", False):
            return SITES is None or not SITES.in_place(self.measure.get("trim", False))
        return not direct_usable()

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
        memory = None
        if self.measure["kind"] == "native":
            # The measurement goes in the record: a file per stop would
            # cost its creation here and its removal in snapctl.
            memory, path = native_memory(self.measure.get("trim", False), callback), ""
            if SITES is not None:
                memory.update(SITES.cut())
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


# LAST_AT holds each thread's program counter and stack pointer at its
# last stop at a breakpoint, then its other general registers where they
# can be read (x86-64), by LWP (see repeated_hit).
LAST_AT = {}
# GPRS are the general registers besides rip and rsp that a repeated
# report finds as they were (see repeated_hit).
GPRS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp",
        "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")


def repeated_hit():
    """Whether the current stop at a breakpoint reports again a hit already
    counted. Natively, a signal that comes while gdb steps the thread over
    the breakpoint (SIGALRM, SIGCHLD: one that gdb passes without
    stopping) is delivered with a step-resume breakpoint of gdb's at the
    same address, and when the handler returns there gdb checks the
    breakpoint again (docs/facts.md, fact 42). The thread has not moved:
    same program counter and stack pointer as at its last stop, and the
    kernel's signal frame, whose saved rsp and rip lie side by side, is
    below the stack pointer (Direct.signal_frame), read from the
    process's memory file, which gdb's process may open also where
    gdbserver traces the process. Where it cannot, gdb is asked whether
    it holds a step-resume breakpoint for the thread at this address,
    which costs 0.1 ms (with a fast timer gdb restarts the step over and
    over, and the longer a check takes the less often the thread gets
    through) and misses a repeated report that comes after another
    thread's stop, when gdb has deleted the step-resume breakpoint: under
    gdbserver, with four threads under a 200 us timer, 2,452 hits were
    counted for 400 calls (docs/facts.md, fact 66). A repeated hit also
    holds the thread's signals for gdb's next step (see hold), which
    then gets through.

    Every general register must be as at the last stop too: a signal that
    comes just as the thread reaches the breakpoint's address on its way
    to a new hit (the instruction before it done) leaves a signal frame
    saved at that address, and in a loop calling the same function the
    stack pointer is the last hit's. Only the registers tell that hit
    from a repeated report: the thread ran between the two stops
    (docs/facts.md, fact 79)."""
    thread = gdb.selected_thread()
    tid = thread.ptid[1]
    d = direct_tracer()
    at = d.pc_sp(tid) if d else None
    traced = at is not None
    if not traced:
        frame = gdb.newest_frame()
        at = (frame.pc(), int(frame.read_register("sp")))
        if x86_64():
            at += tuple(int(frame.read_register(r)) for r in GPRS)
    if tid in HELD:
        release(tid)
    same = same_state(LAST_AT.get(tid), at)
    if len(LAST_AT) >= 4096 and tid not in LAST_AT:
        # Threads that ended: a program that starts thread after thread.
        LAST_AT.clear()
    LAST_AT[tid] = at
    if not same:
        return False
    if d:
        if not d.signal_frame(at[1], at[0]):
            return False
    elif not step_resume_at(thread.num, at[0]):
        return False
    hold(d if traced else None, tid, at[0], at[1])
    return True


# TEMPS are the registers gdb 13 may borrow to step a rip-relative
# instruction out of line (amd64's displaced stepping: the one the
# instruction does not use, set to the address of the next instruction);
# when a signal interrupts that step, gdb puts back the pc but not the
# register (docs/facts.md, fact 79).
TEMPS = frozenset(GPRS.index(r) + 2 for r in ("rax", "rbx", "rcx", "rdx", "rsi", "rdi"))


def same_state(last, at):
    """Whether at, a thread's pc, sp and general registers, is its state
    last (see repeated_hit): every register the same, but for at most one
    of TEMPS that holds an address just after pc, gdb's."""
    if last is None or last[:2] != at[:2] or len(last) != len(at):
        return False
    differ = [i for i in range(2, len(at)) if last[i] != at[i]]
    return not differ or (len(differ) == 1 and differ[0] in TEMPS and 0 < at[differ[0]] - at[0] <= 15)


# A signal that comes faster than gdb steps a thread over a breakpoint
# interrupts nearly every step (docs/facts.md, fact 42): gdb delivers it,
# the handler returns to the breakpoint, gdb checks it again
# (repeated_hit) and steps again, and so on, while the thread makes no
# progress. At a repeated hit the thread's signals are therefore held for
# the step: they are blocked, and a Release breakpoint where the step
# ends (the next instruction, a jump's targets, a return's address)
# unblocks them, so that what is pending is delivered there, one
# instruction later than the program would have seen it. Where gdb's
# process traces the thread, its mask is set with PTRACE_SETSIGMASK (the
# thread is stopped, and nothing in memory changes while other threads
# run). Under gdbserver (attach's guard) only gdbserver may use ptrace,
# and the thread sets its mask itself, in a call of sigprocmask that gdb
# makes (call_sigmask): the step then gets through as natively, where
# without it a step never did (docs/facts.md, fact 66). The Release
# breakpoint disables itself once no held thread waits there, so that
# gdb does not step over it in turn: a step with the thread's signals
# unblocked would start the same loop there. The program's handlers run as before; a process-directed
# signal may go to another thread, as it may whenever a thread blocks it.
# Only the signals an instruction cannot raise itself are held: a blocked
# fault or trap would be delivered with the default action. Where the
# step ends is not known (a jump through a register, a system call, which
# could wait with the signals blocked), the thread is not held. This
# cannot wait for a stop of snapctl's: stop() returning True at a repeated
# hit does not stop gdb, whose step-resume breakpoint there outranks the
# plan's. Every hold ends at gdb's next stop.
PTRACE_GETSIGMASK, PTRACE_SETSIGMASK = 0x420A, 0x420B
HOLD_MASK = ((1 << 64) - 1) & ~sum(1 << (s - 1) for s in (
    signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGTRAP, signal.SIGSYS))
# HELD holds each thread whose signals are held, by LWP: the signals
# blocked for the step (those it had blocked itself stay so), the
# Release breakpoints that end the hold, and whether gdb's process traces
# the thread (PTRACE_SETSIGMASK) or the thread called sigprocmask.
HELD = {}
# RELEASES are the Release breakpoints by address, made once, enabled
# only while a thread's step ends there.
RELEASES = {}
# NEXT_AT caches, by the address of a breakpoint, where a step from
# there ends: the addresses, RETURN for a return (to the address on the
# stack), or None when the instruction may go anywhere (a jump through a
# register, a system call, a fault).
NEXT_AT = {}
RETURN = "return"
# BRANCHES are the mnemonics (gdb's AT&T disassembly) of instructions
# that change the flow or enter the kernel: a step from one of them ends
# at its target, when the disassembly gives it ("jmp 0x401136 <f+16>"),
# or anywhere.
BRANCHES = ("j", "call", "ret", "lret", "loop", "syscall", "sysenter", "sysexit", "sysret", "int", "iret",
            "ud", "hlt", "xbegin", "xabort", "xend", "bound", "(bad)")
# PREFIXES come before a mnemonic in gdb's disassembly. A repeated string
# instruction (rep, repz...) moves one element per step and stays where it
# is: its end is not known.
PREFIXES = ("lock", "bnd", "notrack", "xacquire", "xrelease", "cs", "ds", "es", "ss", "fs", "gs", "data16", "addr32")


def step_ends(d, pc, sp):
    """The addresses where a step over the instruction at pc, with the
    stack pointer at sp, ends; None when they are not known. d is the
    _Direct of the thread's tracer, None under gdbserver."""
    ends = NEXT_AT.get(pc, False)
    if ends is False:
        ends = None
        try:
            insn = gdb.selected_inferior().architecture().disassemble(pc)[0]
            words = insn["asm"].split("#")[0].split()
            while words and (words[0] in PREFIXES or words[0].startswith("rex")):
                words = words[1:]
            if len(words) > 1 and words[0].startswith("rep") and words[1].startswith("ret"):
                words = words[1:]  # "repz ret", an old idiom for ret
            op = words[0] if words else "rep"
            after = pc + insn["length"]
            if op.startswith("rep"):
                pass
            elif not op.startswith(BRANCHES):
                ends = (after,)
            elif op in ("ret", "retq"):
                ends = RETURN
            elif op.startswith(("j", "call", "loop")) and len(words) > 1 and words[1].startswith("0x"):
                target = int(words[1], 16)
                ends = (target,) if op in ("jmp", "jmpq", "call", "callq") else (target, after)
        except (gdb.error, ValueError, IndexError, KeyError):
            ends = None
        NEXT_AT[pc] = ends
    if ends == RETURN:
        try:
            if d:
                data = os.pread(d.mem, 8, sp)
            else:
                data = gdb.selected_inferior().read_memory(sp, 8).tobytes()
        except (OSError, gdb.error):
            return None
        return struct.unpack("<Q", data) if len(data) == 8 else None
    if ends and pc in ends:
        return None  # a jump to itself: the breakpoint is the end
    return ends


def sigmask(d, tid, mask=None):
    """Thread tid's blocked signals, or sets them to mask; None when ptrace
    refuses."""
    c = d.c
    buf = c.c_ulonglong(0 if mask is None else mask)
    req = PTRACE_GETSIGMASK if mask is None else PTRACE_SETSIGMASK
    if d.ptrace(req, tid, 8, c.byref(buf)) != 0:
        return None
    return buf.value


def call_sigmask(how, mask):
    """Has the selected thread call sigprocmask(how, &mask, &old), through
    gdb, and returns old, the signals it had blocked; None when the call
    cannot be made. The call runs the thread alone (scheduler-locking
    on), so that no other thread reports a stop into it, and a signal
    that gdb stops at (snapctl's SIGINT) unwinds it: gdb would otherwise
    leave the thread inside it. The sets lie SCRATCH bytes below the
    stack pointer, as mallinfo2's result does. On x86-64 the call is
    typed as returning CALL_TYPE, for the registers' sake (see
    CALL_TYPE); its result is not read: old is."""
    if not x86_64():
        return None
    inferior = gdb.selected_inferior()
    buf = (int(gdb.newest_frame().read_register("sp")) - SCRATCH) & ~15
    voidp = gdb.lookup_type("void").pointer()
    try:
        # sigset_t is 128 bytes in glibc; the kernel's, 8.
        inferior.write_memory(buf, struct.pack("<Q", mask) + bytes(SIGSET - 8) + bytes(8))
        with scheduler_locked(), unwound_on_signal():
            func("*(%s (*)(int, void *, void *))sigprocmask" % CALL_TYPE)(
                how, gdb.Value(buf).cast(voidp), gdb.Value(buf + SIGSET).cast(voidp))
        return struct.unpack("<Q", inferior.read_memory(buf + SIGSET, 8).tobytes())[0]
    except (gdb.error, gdb.MemoryError):
        return None


# SIGSET is the size of glibc's sigset_t; SIG_BLOCK and SIG_UNBLOCK, how
# sigprocmask changes the mask.
SIGSET, SIG_BLOCK, SIG_UNBLOCK = 128, 0, 1


def hold(d, tid, pc, sp):
    """Holds thread tid's signals for gdb's step over the breakpoint at
    pc, sp its stack pointer (see HELD); nothing when where the step ends
    is not known. d is the _Direct of the thread's tracer; None when gdb
    does not trace it (gdbserver does), and the thread, the selected
    one, blocks its signals itself; only in a process of one thread:
    gdb 13 dies of SIGSEGV after such a call in a process whose other
    threads it has resumed with a signal (docs/facts.md, fact 66)."""
    if d is None and len(gdb.selected_inferior().threads()) != 1:
        return
    ends = step_ends(d, pc, sp)
    if not ends:
        return
    releases = []
    try:
        for at in ends:
            bp = RELEASES.get(at)
            if bp is None or not bp.is_valid():
                bp = RELEASES[at] = Release(at)
            bp.enabled = True
            releases.append(bp)
        if d:
            mask = sigmask(d, tid)
            if mask is not None and sigmask(d, tid, mask | HOLD_MASK) is not None:
                HELD[tid] = (HOLD_MASK & ~mask, releases, True)
                return
        else:
            mask = call_sigmask(SIG_BLOCK, HOLD_MASK)
            if mask is not None:
                HELD[tid] = (HOLD_MASK & ~mask, releases, False)
                return
    except (gdb.error, RuntimeError):
        pass
    release_needless(releases)


def release(tid):
    """Ends the hold of thread tid's signals (see HELD), stopped here and,
    when gdb does not trace it, the selected thread."""
    added, releases, traced = HELD.pop(tid)
    d = direct_tracer()
    if traced and d:
        mask = sigmask(d, tid)
        if mask is not None:
            sigmask(d, tid, mask & ~added)
    elif not traced:
        call_sigmask(SIG_UNBLOCK, added)
    release_needless(releases)


def release_needless(releases):
    """Disables those of releases that no held thread waits at."""
    for bp in releases:
        if bp.is_valid() and not any(bp in held[1] for held in HELD.values()):
            bp.enabled = False


def release_all(event=None):
    """Ends every hold, at gdb's stop of every thread. A thread that
    blocked its signals itself unblocks them the same way, selected for
    its call."""
    if not HELD:
        return
    selected = gdb.selected_thread()
    try:
        for tid in list(HELD):
            if not HELD[tid][2]:
                thread = next((t for t in gdb.selected_inferior().threads() if t.ptid[1] == tid), None)
                if thread is None or not thread.is_valid():
                    release_needless(HELD.pop(tid)[1])
                    continue
                thread.switch()
            release(tid)
    finally:
        if selected is not None and selected.is_valid():
            selected.switch()


class Release(gdb.Breakpoint):
    """Where a held thread's step ends (see HELD)."""

    def __init__(self, address):
        super().__init__("*0x%x" % address, internal=True)

    def stop(self):
        # An exception here would stop gdb at a breakpoint that is not
        # the plan's.
        try:
            tid = gdb.selected_thread().ptid[1]
            if tid in HELD:
                release(tid)
        except Exception:
            pass
        return False


gdb.events.stop.connect(release_all)
gdb.events.exited.connect(lambda event: HELD.clear())


class NewHit(gdb.Function):
    """$_snapctl_hit(): 0 when the stop reports again a hit already
    counted (see repeated_hit), else 1. The native backend's GDB/MI
    breakpoints have it first in their condition, so that gdb counts and
    reports only new hits."""

    def __init__(self):
        super().__init__("_snapctl_hit")

    def invoke(self):
        return 0 if repeated_hit() or heaptrack_call() else 1


NewHit()


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


def step_resume_at(thread, pc):
    """Whether gdb holds a step-resume breakpoint of thread (gdb's number)
    at address pc, one of those it inserts where a signal interrupted a
    step (maint info breakpoints: "step resume" or "high-priority step
    resume", the address, "thread N" last)."""
    address, owner = "0x%016x" % pc, "thread %d" % thread
    for line in gdb.execute("maint info breakpoints", to_string=True).splitlines():
        if "step resume" in line and address in line and line.rstrip().endswith(owner):
            return True
    return False


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
        if os.path.exists(self.agent.halt):
            return False
        if self.agent.measure["kind"] == "native" and (repeated_hit() or heaptrack_call()):
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
        if CALLING:
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


# FUNCS caches the allocator's functions as gdb values, by process:
# looking a name up in libc's debug info at every stop costs more than the
# call itself.
FUNCS = {}


def func(expr):
    """The gdb value of expr, a function, in the current process."""
    key = (gdb.selected_inferior().pid, expr)
    if key not in FUNCS:
        FUNCS[key] = gdb.parse_and_eval(expr)
    return FUNCS[key]


# CALL_TYPE is the type the inferior calls below are made through on
# x86-64: returning double, whatever the function returns. After a call
# gdb restores every register to its value from before the call, with one
# ptrace write for each register whose value its register cache does not
# hold, and when a call that returns an integer or a struct in memory
# ends, the cache holds only the general registers: the hundred-odd
# vector and x87 registers of the XSAVE area then cost a read and a write
# of the whole area each, 3-5 ms a call here on an AVX-512 machine.
# Reading a double result reads xmm0, which loads the whole area into the
# cache, so that the restore writes only the registers the call changed.
# The double read is never used.
CALL_TYPE = "double"


def x86_64():
    return gdb.selected_inferior().architecture().name() == "i386:x86-64"


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


# SCRATCH is how far below the stack pointer a call's result is written.
SCRATCH = 16384


def malloc_trim():
    """Calls glibc's malloc_trim(0), directly as mallinfo2 is when it
    can."""
    if x86_64():
        if direct_call("malloc_trim", 0) is None:
            func("*(%s (*)(unsigned long))malloc_trim" % CALL_TYPE)(0)
    else:
        func("*(int (*)(unsigned long))malloc_trim")(0)


# direct_call calls a function of the stopped process on x86-64 Linux
# through ptrace from gdb's own process, whose main thread, where this
# code runs, is the process's tracer. gdb's inferior call costs 0.6-0.8 ms
# here (it restores each general register with a read and a write of all
# of them, each changed vector register the same way with the XSAVE area,
# around a full stop of its own); this costs about 0.1 ms: a read and a
# write of each register set around the call, which returns to address 0
# and so stops with SIGSEGV there (gdb's own call returns to the stack and
# stops the same way). It runs only the stopped thread, so it is used only
# while the process has one: elsewhere another thread may hold an arena's
# lock, and gdb's call lets every thread run. The thread ends the call
# with the registers, vector state and siginfo it began it with, which
# gdb holds in its caches, and with the signals it had blocked; what
# changes is the stack below the stack pointer, as with gdb's call. A
# call given up while a handler runs in it (see CALL_TIMEOUT: with a 50 us
# timer on a loaded machine, the handlers delivered into mallinfo2() took
# more than its 2 s) would otherwise leave the handler's mask, its own
# signal blocked, as the thread's from then on.
#
# A signal that arrives during the call is delivered to the program when
# gdb's signal table would pass it without stopping (SIGALRM, SIGCHLD...),
# once: when it comes again it is blocked for the rest of the call, and
# delivered as the program goes on after the stop. A timer faster than a
# ptrace stop's round trip (50 us on a loaded machine) would otherwise
# have its handler run between every two instructions of the function,
# which never returned before its timeout.
# Any other ends the call, and so does a fault inside the called function
# or a signal it raises (glibc aborts on a heap it finds corrupted): the
# thread is put back and the signal sent again (with tgkill's siginfo),
# for gdb to see and handle at the stop as it would after its own call. A
# call that faulted may hold an arena's lock: the program is better off
# dying of the fault than going on. CallFailed says what happened, and the
# stop records it. The process's exit is left for gdb to collect.
DIRECT = None

# CALL_TIMEOUT bounds a direct call, in seconds, by function: a call
# that waits for an arena's lock held by the stopped thread (a signal
# handler that interrupted malloc, when libc's symbol table cannot tell
# that the lock is held) would never return. malloc_trim walks and gives
# back a whole heap.
CALL_TIMEOUT = {"mallinfo2": 2.0, "malloc_trim": 10.0, "mallctl": 2.0}

# FAULTS are the signals with which a called function faults.
FAULTS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGTRAP)


class CallFailed(Exception):
    """A direct call that was made and did not return."""


def direct_call(name, arg=0, result=0):
    """Calls name(arg) directly when the current process has one thread on
    x86-64 Linux and returns its integer result; with result, name's
    argument is a scratch area SCRATCH bytes below the stack pointer, and
    the call returns the first result bytes written there. None when gdb
    must make the call (nothing was changed then); CallFailed when the
    call was made and did not return."""
    if not direct_usable():
        return None
    inferior = gdb.selected_inferior()
    fn = int(func("(unsigned long)&" + name))
    return DIRECT.call(inferior.pid, gdb.selected_thread().ptid[1], fn, arg, result, name, CALL_TIMEOUT.get(name, 2.0))


def direct_tracer():
    """The _Direct of the current process when its registers can be read
    through ptrace from here (x86-64), else None."""
    global DIRECT
    if not x86_64():
        return None
    if DIRECT is None:
        try:
            DIRECT = _Direct()
        except (ImportError, OSError, AttributeError):
            DIRECT = False
    if not DIRECT:
        return None
    DIRECT.refuses(gdb.selected_inferior().pid)
    return DIRECT if DIRECT.mem >= 0 else None


def direct_usable():
    """Whether a call in the current process can be made directly (see
    direct_call) without changing anything first."""
    global DIRECT
    inferior = gdb.selected_inferior()
    if len(inferior.threads()) != 1 or not x86_64():
        return False
    if DIRECT is None:
        try:
            DIRECT = _Direct()
        except (ImportError, OSError, AttributeError):
            DIRECT = False
    return bool(DIRECT) and not DIRECT.refuses(inferior.pid)


# PASSED caches, by signal number, whether gdb's signal table passes the
# signal to the program without stopping.
PASSED = {}


def passed_quietly(sig):
    if sig not in PASSED:
        try:
            out = gdb.execute("info signals %s" % signal.Signals(sig).name, to_string=True)
            cols = out.splitlines()[1].split()
            PASSED[sig] = cols[1] == "No" and cols[3] == "Yes"  # Stop, Print, Pass
        except (gdb.error, IndexError, ValueError):
            PASSED[sig] = False
    return PASSED[sig]


class _Direct:
    """ptrace through ctypes, loaded at the first direct call."""

    GETREGS, SETREGS, CONT, GETSIGINFO, SETSIGINFO, GETREGSET, SETREGSET = 12, 13, 7, 0x4202, 0x4203, 0x4204, 0x4205
    NT_X86_XSTATE = 0x202
    WALL = 0x40000000  # __WALL: the thread may not be the process's first
    SYS_TGKILL = 234
    # XSAVE is room for the XSAVE area: 2.7 KB with AVX-512, 11 KB with
    # AMX; the kernel says how much it filled.
    XSAVE = 64 * 1024
    # struct user_regs_struct, <sys/user.h>
    REGS = ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax "
            "rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()

    def __init__(self):
        import ctypes
        self.c = ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.ptrace = self.libc.ptrace
        self.ptrace.restype = ctypes.c_long
        self.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

        class Regs(ctypes.Structure):
            _fields_ = [(n, ctypes.c_ulonglong) for n in self.REGS]

        class IOVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        self.Regs = Regs
        self.regs, self.now = Regs(), Regs()
        self.siginfo = ctypes.create_string_buffer(128)
        self.info = ctypes.create_string_buffer(128)  # the siginfo of a stop in the call
        self.xstate = ctypes.create_string_buffer(self.XSAVE)
        self.iov = IOVec(ctypes.addressof(self.xstate), self.XSAVE)
        # The process called last: its pid, /proc/PID/mem open for
        # writing, and whether it refuses direct calls.
        self.pid, self.mem, self.refused = 0, -1, True
        # stopped says that the thread is in a stop snapctl has taken
        # from the kernel (see settle).
        self.stopped = True
        # How far below the stack pointer the last signal frame was
        # found (see signal_frame).
        self.frame_depth = 0
        # When the running call is given up (see wait), and after how
        # long (timeout); the function called (fn) and the signals held
        # blocked during the call (held, see run).
        self.deadline, self.expired, self.timeout = 0.0, False, 2.0
        self.fn, self.held = 0, 0
        # restop: a SIGSTOP not of snapctl's came while take_stop took
        # snapctl's own, and is sent again by restore.
        self.restop = False
        # The thread's blocked signals before the call, put back with its
        # registers (see restore).
        self.mask = 0

    def refuses(self, pid):
        """Whether process pid cannot be called directly: its memory file
        does not open, or it runs with a shadow stack (the kernel's x86
        user shadow stacks), whose return to address 0 would fault."""
        if pid != self.pid:
            if self.mem >= 0:
                os.close(self.mem)
            self.pid, self.mem, self.refused = pid, -1, True
            try:
                with open("/proc/%d/status" % pid, "rb") as f:
                    shstk = any(l.startswith(b"x86_Thread_features:") and b"shstk" in l for l in f)
                self.mem = os.open("/proc/%d/mem" % pid, os.O_RDWR | os.O_CLOEXEC)
                self.refused = shstk
            except OSError:
                pass
        return self.refused

    def pc_sp(self, tid):
        """Thread tid's program counter and stack pointer, then its other
        general registers (GPRS); None when they cannot be read."""
        regs = self.now
        if self.ptrace(self.GETREGS, tid, None, self.c.byref(regs)) != 0:
            return None
        return (regs.rip, regs.rsp) + tuple(getattr(regs, r) for r in GPRS)

    # FRAME_WINDOW is how far below the stack pointer the kernel's signal
    # frame is looked for: the red zone, the XSAVE area (up to 11 KB with
    # AMX) and the frame itself.
    FRAME_WINDOW = 16384

    def signal_frame(self, sp, pc):
        """Whether a signal frame saved at stack pointer sp and address pc
        lies below sp: struct sigcontext holds rsp, then rip. The rip found
        is overwritten (the memory is below the stack pointer, free), so
        that a frame is found once. The kernel puts the frame at the same
        distance below the same stack pointer every time, so that
        distance is tried first (16 bytes read, not 16 KB)."""
        pattern = struct.pack("<QQ", sp, pc)
        try:
            at = sp - self.frame_depth
            found = self.frame_depth > 0 and os.pread(self.mem, 16, at) == pattern
            if not found:
                start = max(sp - self.FRAME_WINDOW, 0)
                data = os.pread(self.mem, sp - start, start)
                i = data.rfind(pattern)
                if i < 0 or i % 8:
                    return False
                at = start + i
                self.frame_depth = sp - at
            os.pwrite(self.mem, bytes(8), at + 8)
        except OSError:
            return False
        return True

    def call(self, pid, tid, fn, arg, result, name, timeout, args=(), top=0):
        """Calls fn(arg); args, when given, are the first integer
        arguments instead (rdi, rsi, rdx, rcx, r8), and top is where the
        call's stack begins below, above it the caller's data."""
        c, regs = self.c, self.regs
        self.iov.len = self.XSAVE
        if (self.ptrace(self.GETREGS, tid, None, c.byref(regs)) != 0
                or self.ptrace(self.GETREGSET, tid, self.NT_X86_XSTATE, c.byref(self.iov)) != 0
                or self.ptrace(self.GETSIGINFO, tid, None, self.siginfo) != 0):
            return None
        self.mask = sigmask(self, tid)
        if self.mask is None:
            return None
        top = top or regs.rsp
        if result:
            arg = top = (regs.rsp - SCRATCH) & ~15
        # The return address, 0, goes below the scratch area, or the red
        # zone, aligned as at a call.
        sp = ((top - 256) & ~15) - 8
        try:
            if os.pwrite(self.mem, bytes(8), sp) != 8:
                return None
        except OSError:
            return None
        call = self.Regs.from_buffer_copy(regs)
        # orig_rax -1: a thread stopped in a system call does not restart
        # it as the call begins.
        call.rip, call.rsp, call.rdi, call.rax, call.orig_rax = fn, sp, arg, 0, (1 << 64) - 1
        for reg, value in zip(("rdi", "rsi", "rdx", "rcx", "r8"), args):
            setattr(call, reg, value)
        if self.ptrace(self.SETREGS, tid, None, c.byref(call)) != 0:
            return None
        self.timeout, self.fn, self.held = timeout, fn, 0
        self.deadline, self.expired = time.monotonic() + timeout, False
        try:
            rax, why = self.run(tid)
        except BaseException:
            # Python raises gdb's quit (SIGINT) between two of its steps,
            # where the thread may be running the call: it is run to the
            # call's end, or to where it holds no lock, before it is put
            # back.
            self.settle(tid)
            self.finish(tid)
            self.restore(tid)
            raise
        if why == "exited":
            raise CallFailed("the process ended during %s()" % name)
        if not self.restore(tid):
            raise CallFailed("the registers from before %s() could not be put back" % name)
        if why == "timeout":
            # The thread goes back to the breakpoint as it was: the call
            # holds no lock (holds_no_lock); it waits for an arena's lock
            # (that the stopped thread holds itself, in a signal handler
            # that interrupted malloc), or a handler runs in it.
            raise CallFailed("%s() did not return within %g s (it waits for a lock the stopped thread may hold, "
                             "or a signal handler runs in it): given up where it held no lock" % (name, timeout))
        if why:
            sig, how = why
            self.libc.syscall(self.SYS_TGKILL, pid, tid, sig)
            raise CallFailed("%s() %s %s" % (name, how, signal.Signals(sig).name))
        if result:
            try:
                data = os.pread(self.mem, result, arg)
            except OSError:
                data = b""
            if len(data) != result:
                raise CallFailed("%s()'s result could not be read" % name)
            return data
        return rax

    def restore(self, tid):
        c = self.c
        ok = (self.ptrace(self.SETREGS, tid, None, c.byref(self.regs)) == 0
              and self.ptrace(self.SETREGSET, tid, self.NT_X86_XSTATE, c.byref(self.iov)) == 0
              and self.ptrace(self.SETSIGINFO, tid, None, self.siginfo) == 0
              and sigmask(self, tid, self.mask) is not None)
        if self.restop:
            self.restop = False
            self.libc.syscall(self.SYS_TGKILL, self.pid, tid, signal.SIGSTOP)
        return ok

    def wait(self, tid):
        """Waits for the running thread to stop and returns the signal,
        or None when the process ended instead. The end is only looked at
        (WNOWAIT), so that gdb reaps it; a stop is then taken without
        WEXITED, so that a process killed meanwhile is not reaped either.
        A call still running at self.deadline (it waits for a lock that
        the stopped thread itself holds, say) is stopped with SIGSTOP
        (self.expired), which run then reports."""
        delay, flags = 0.00002, os.WEXITED | os.WSTOPPED | os.WNOWAIT | self.WALL
        while True:
            info = os.waitid(os.P_PID, tid, flags | os.WNOHANG)
            if info is not None:
                break
            if not self.expired and time.monotonic() > self.deadline:
                self.expired = True
                self.libc.syscall(self.SYS_TGKILL, self.pid, tid, signal.SIGSTOP)
            time.sleep(delay)
            delay = min(2 * delay, 0.005)
        if info.si_code not in (os.CLD_TRAPPED, os.CLD_STOPPED):
            return None
        if os.waitid(os.P_PID, tid, os.WSTOPPED | os.WNOHANG | self.WALL) is None:
            return None
        self.stopped = True
        return info.si_status

    def run(self, tid):
        """Runs the thread until the call returns: (rax, None) when it
        does, (None, (SIG, HOW)) when signal SIG ends it first, HOW saying
        whence, (None, "exited") when the process ends or cannot be
        resumed."""
        sig, info, delivered = 0, self.info, set()
        while True:
            self.stopped = False
            if self.ptrace(self.CONT, tid, None, sig) != 0:
                self.stopped = True
                return None, "exited"
            sig = self.wait(tid)
            if (sig is None or self.ptrace(self.GETREGS, tid, None, self.c.byref(self.now)) != 0
                    or self.ptrace(self.GETSIGINFO, tid, None, info) != 0):
                return None, "exited"
            if sig == signal.SIGSEGV and self.now.rip == 0:
                rax = self.now.rax
                if self.expired and not self.take_stop(tid):
                    return None, "exited"
                return rax, None
            # siginfo_t: si_signo, si_errno, si_code, then for a signal a
            # process sent (si_code SI_USER, or below: SI_TKILL...) the
            # sender's pid.
            (code,), (sender,) = struct.unpack_from("<i", info, 8), struct.unpack_from("<i", info, 16)
            if self.expired and sig == signal.SIGSTOP and code <= 0 and sender == os.getpid():
                if self.holds_no_lock(tid, delivered):
                    return None, "timeout"
                # Still at work inside the allocator, perhaps with an
                # arena's lock held: it runs on (see holds_no_lock).
                self.deadline, self.expired = time.monotonic() + self.timeout, False
                sig = 0
                continue
            if code > 0 and sig in FAULTS:
                return self.ended(tid, (sig, "faulted:"))
            if passed_quietly(sig):
                if sig in delivered or self.now.rip != self.fn:
                    # Blocked now, the signal given back with CONT stays
                    # pending until restore puts the mask back.
                    mask = sigmask(self, tid)
                    if mask is not None:
                        sigmask(self, tid, mask | 1 << (sig - 1))
                        self.held |= 1 << (sig - 1)
                else:
                    delivered.add(sig)
                continue
            if code <= 0 and sender == self.pid:
                return self.ended(tid, (sig, "raised"))
            return self.ended(tid, (sig, "was interrupted by"))

    def ended(self, tid, why):
        """run's result for a call that signal why[0] ended, once the
        SIGSTOP of its deadline, if one was sent, is taken."""
        if self.expired and not self.take_stop(tid):
            return None, "exited"
        return None, why

    def take_stop(self, tid):
        """Takes the SIGSTOP that wait sent at the deadline (self.expired)
        and that the call's end or another signal overtook: the kernel
        reports a fault first, and the call may return in the moment
        between the deadline and the signal. Left pending, it was the
        program's next signal once gdb resumed the thread at the
        breakpoint: gdb stopped the process for it, passed it on, and
        stepping over the breakpoint again it reported the same hit a
        second time, which no signal frame marked as a repeat (no handler
        ran): one stop too many (docs/facts.md, fact 102). The thread
        is resumed at address 0, where it can run nothing of the
        program's, and the kernel hands it its pending signals before it
        gets there: the SIGSTOP ends the loop; any other signal is blocked
        and given back, pending as before until restore puts the thread's
        mask back; a fault at 0 says that nothing was pending. False when
        the process is gone."""
        c, now, info = self.c, self.now, self.info
        at = self.Regs.from_buffer_copy(now)
        at.rip, at.orig_rax = 0, (1 << 64) - 1
        if self.ptrace(self.SETREGS, tid, None, c.byref(at)) != 0:
            return False
        sig = 0
        while True:
            self.stopped = False
            if self.ptrace(self.CONT, tid, None, sig) != 0:
                self.stopped = True
                return False
            sig = self.wait(tid)
            if (sig is None or self.ptrace(self.GETREGS, tid, None, c.byref(now)) != 0
                    or self.ptrace(self.GETSIGINFO, tid, None, info) != 0):
                return False
            (code,), (sender,) = struct.unpack_from("<i", info, 8), struct.unpack_from("<i", info, 16)
            if sig == signal.SIGSTOP and code <= 0 and sender == os.getpid():
                self.expired = False
                return True
            if sig == signal.SIGSEGV and code > 0 and now.rip == 0:
                self.expired = False
                return True
            if sig == signal.SIGSTOP:
                # Someone else's, which cannot be blocked: sent again
                # once the thread is put back (see restore).
                self.restop, sig = True, 0
                continue
            mask = sigmask(self, tid)
            if mask is None:
                return False
            sigmask(self, tid, mask | 1 << (sig - 1))
            self.held |= 1 << (sig - 1)

    # SYS_FUTEX is futex(2)'s number on x86-64.
    SYS_FUTEX = 202

    def holds_no_lock(self, tid, delivered):
        """Whether the call, stopped past its deadline, can be given up
        without leaving a lock held. mallinfo2 and malloc_trim take one
        arena's lock at a time, wait for it in futex(2) and wake its
        waiters with futex(2) once it is released: a thread in futex(2)
        (its registers at the stop, self.now: orig_rax is the system
        call) holds none. A handler of the program's runs in the call only
        when its signal was pending as the call began (delivered; one that
        comes later is held until the call ends, see run): while one
        still runs (its signal blocked in the thread beyond what the call
        began with), the call has taken nothing. A call at work, walking
        the free lists or in malloc_trim's madvise(2), may hold a lock:
        given up there, the lock stayed held for good, every later stop
        found the allocator busy, and a single-threaded program, whose
        malloc takes no lock, ran on until its first thread (docs/facts.md,
        fact 87). It runs on until it holds none."""
        if self.now.orig_rax == self.SYS_FUTEX:
            return True
        if delivered:
            mask = sigmask(self, tid)
            return mask is not None and mask & ~(self.mask | self.held) != 0
        return False

    def finish(self, tid):
        """Runs a call interrupted by an exception to its end, or to where
        it can be given up (holds_no_lock): Ctrl-C must not leave an
        arena's lock held either."""
        while True:
            try:
                if self.ptrace(self.GETREGS, tid, None, self.c.byref(self.now)) != 0 or self.now.rip == 0:
                    return
                if self.now.orig_rax == self.SYS_FUTEX:
                    return
                self.deadline, self.expired = time.monotonic() + self.timeout, False
                self.run(tid)
                return
            except KeyboardInterrupt:
                self.settle(tid)

    def settle(self, tid):
        """Brings the thread to a stop after an exception between two
        steps of run: it may be stopped already, with or without a stop
        to take, or running the call, which then ends by itself."""
        if self.stopped:
            return
        try:
            with open("/proc/%d/task/%d/stat" % (self.pid, tid), "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state == b"t":
            os.waitid(os.P_PID, tid, os.WSTOPPED | os.WNOHANG | self.WALL)
        elif state not in (b"Z", b"X"):
            self.wait(tid)
        self.stopped = True


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


def elf_symbols(path, names, sizes=False):
    """The values of the symbols names in the symbol table (.symtab) of
    the 64-bit little-endian ELF file at path, as a dict, with sizes as
    (value, size) pairs; {} when there is no such file or table. It reads the section headers, the table and
    its strings, not the whole file (a program with its debug
    information can be hundreds of megabytes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:6] != b"\x7fELF\x02\x01":
                return {}
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            f.seek(shoff)
            sections = f.read(shentsize * shnum)
            out = {}
            for i in range(shnum):
                sh = i * shentsize
                if struct.unpack_from("<I", sections, sh + 4)[0] != 2:  # SHT_SYMTAB
                    continue
                off, size, link = struct.unpack_from("<QQI", sections, sh + 0x18)
                entsize = struct.unpack_from("<Q", sections, sh + 0x38)[0] or 24
                stroff, strsize = struct.unpack_from("<QQ", sections, link * shentsize + 0x18)
                f.seek(off)
                table = f.read(size)
                f.seek(stroff)
                strings = f.read(strsize)
                for n in names:
                    sym = last_symbol(table, entsize, strings, n.encode())
                    if sym >= 0:
                        value, size = struct.unpack_from("<QQ", table, sym + 8)
                        out[n] = (value, size) if sizes else value
            return out
    except (OSError, struct.error):
        return {}


def elf_tls_block(path):
    """The size in memory and the alignment of the TLS block (PT_TLS) of
    the 64-bit little-endian ELF file at path."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:6] != b"\x7fELF\x02\x01":
                raise HeapUnreadable("%s is not a 64-bit little-endian ELF file" % path)
            phoff, = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            headers = f.read(phentsize * phnum)
    except OSError as e:
        raise HeapUnreadable("reading %s: %s" % (path, e))
    for i in range(phnum):
        if struct.unpack_from("<I", headers, i * phentsize)[0] == 7:  # PT_TLS
            return struct.unpack_from("<QQ", headers, i * phentsize + 0x28)
    raise HeapUnreadable("%s has no TLS block" % path)


def last_symbol(table, entsize, strings, name):
    """The offset in table, a symbol table, of the last symbol called
    name, -1 when there is none. The searches run in C, not a Python loop
    over every symbol (libc's ten thousand took 1.5 ms more; a static
    program's table can hold ten times as many). A name's text may end a
    longer one's (a linker may share the tail), so every place where it
    ends a string is tried."""
    last = -1
    text = name + b"\0"
    at = strings.find(text)
    while at >= 0:
        key = struct.pack("<I", at)  # st_name, the first field
        pos = table.find(key)
        while pos >= 0:
            if pos % entsize == 0:
                last = max(last, pos)
            pos = table.find(key, pos + 1)
        at = strings.find(text, at + 1)
    return last


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


class scheduler_locked:
    """gdb's scheduler-locking on for a with block: only the selected
    thread runs during gdb's calls."""

    def __enter__(self):
        self.prev = gdb.parameter("scheduler-locking")
        if self.prev != "on":
            gdb.execute("set scheduler-locking on")

    def __exit__(self, *exc):
        if self.prev != "on":
            gdb.execute("set scheduler-locking %s" % self.prev)


class unwound_on_signal:
    """gdb's unwindonsignal on for a with block: a call that a signal
    stops is given up and the thread put back as before it."""

    def __enter__(self):
        self.prev = gdb.parameter("unwindonsignal")
        if not self.prev:
            gdb.execute("set unwindonsignal on")

    def __exit__(self, *exc):
        if not self.prev:
            gdb.execute("set unwindonsignal off")


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
    with open(path, "w") as f:
        json.dump(rec, f)


# SITES cuts heaptrack's stream at every measured stop (native.sites), once
# snapctl says where (record_sites). MARK_WAIT bounds, in seconds, the
# write of a mark into a FIFO that snapctl does not empty.
SITES = None
MARK_WAIT = 10


def record_sites(fifo, lib, lock, data):
    """Cuts heaptrack's stream at every measured stop from now on: its
    library lib (heaptrack.Layout's offsets lock and data) writes into
    fifo, which snapctl reads."""
    global SITES
    SITES = SiteCutter(fifo, lib, lock, data)


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
        ranges = SITES.ranges(gdb.selected_inferior().pid)
        for _ in range(HEAPTRACK_DEPTH):
            if frame is None:
                break
            pc = frame.pc()
            if any(lo <= pc < hi for lo, hi in ranges):
                return True
            frame = frame.older()
    except (gdb.error, OSError):
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

    def __init__(self, fifo, lib, lock, data):
        self.fifo, self.lib, self.lock, self.data = fifo, lib, lock, data
        self.pid = None
        self.mem = None
        self.base = None
        self.checked = False
        self.marks = 0
        self.all_stop = None
        self.lib_ranges = None

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
        except (OSError, struct.error, LookupError):
            return False
        return word == 0

    def ranges(self, pid):
        """The address ranges heaptrack's library is mapped at in process
        pid (/proc/PID/maps), read once it is loaded."""
        if self.lib_ranges is None or self.lib_ranges[0] != pid:
            found = []
            with open("/proc/%d/maps" % pid) as f:
                for line in f:
                    fields = line.split()
                    if len(fields) >= 6 and fields[5] == self.lib:
                        lo, hi = fields[0].split("-")
                        found.append((int(lo, 16), int(hi, 16)))
            if not found:
                return []
            self.lib_ranges = (pid, found)
        return self.lib_ranges[1]

    def lock_state(self, pid):
        """heaptrack's lock in process pid: its lock word and its owner's
        TID (a glibc mutex: int at 0, int at 8)."""
        self.open(pid)
        return struct.unpack("<I4xi", os.pread(self.mem, 12, self.base + self.lock))

    def open(self, pid):
        if self.pid == pid:
            return
        if self.mem is not None:
            os.close(self.mem)
            self.mem = None
        self.base = library_base(pid, self.lib)
        self.mem = os.open("/proc/%d/mem" % pid, os.O_RDONLY | os.O_CLOEXEC)
        self.pid, self.checked = pid, False

    def cut(self):
        """Marks the stream at this stop. Returns {"sites_mark": K}, or
        {"sites_empty": True} while the library has no output yet (it
        opens it at the program's first allocation), {"sites_busy": TID}
        when thread TID holds the lock, {"sites_error": why}."""
        try:
            word, owner = self.lock_state(gdb.selected_inferior().pid)
            if word != 0:
                return {"sites_busy": owner}
            (state,) = struct.unpack("<Q", os.pread(self.mem, 8, self.base + self.data))
            if state == 0:
                return {"sites_empty": True}
            fd, size, buf = struct.unpack("<iIQ", os.pread(self.mem, 16, state))
            if fd < 0:
                return {"sites_empty": True}
            if size > 4096 or buf == 0:
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
        except (OSError, LookupError, struct.error) as e:
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


def library_base(pid, lib):
    """Where lib is loaded in process pid: the start of its mapping at
    file offset 0 (/proc/PID/maps)."""
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == lib and int(fields[2], 16) == 0:
                return int(fields[0].split("-")[0], 16)
    raise LookupError("process %d has not loaded %s" % (pid, lib))
