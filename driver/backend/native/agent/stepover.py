# The native backend's part of snapctl's agent: hits counted once, and a
# thread's signals held across gdb's step over a breakpoint.
#
# Natively gdb steps a thread over a breakpoint, and a signal that comes
# during the step has the thread report the same breakpoint again
# (docs/facts.md, facts 42, 66 and 79): repeated_hit tells such a report
# from a new hit, $_snapctl_hit() gives its answer to the conditions of
# the breakpoints snapctl drives over GDB/MI, and hold blocks the
# thread's signals for the next step so that it gets through.
#
# Like every file of the agent, this one is read into the namespace of
# driver/gdb/agent.py (gdb.Conn's LoadScripts, native's Python list in
# native/agent.go): the names of the other files are its own.

import os
import signal
import struct

import gdb


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
