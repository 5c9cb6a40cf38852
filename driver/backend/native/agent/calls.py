# The native backend's part of snapctl's agent: calls into the stopped
# program. gdb's inferior call, typed so that its register restore is
# cheap (CALL_TYPE); the direct call through ptrace from gdb's own process
# where the process has one thread (direct_call), whose engine is
# _Direct, ptrace through ctypes (loaded at the first direct call: nothing
# here runs while gdb reads the file); gdb's scheduler-locking and
# unwindonsignal around a call; and, where gdb cannot write a thread's
# vector registers, their restore after each of gdb's calls (_Vectors).
#
# Read into the namespace of driver/gdb/agent.py with the other files of
# native/agent.go's list.

import os
import re
import signal
import struct
import time

import gdb


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


# SCRATCH is how far below the stack pointer a call's result is written.
SCRATCH = 16384

# CALL_GAP is how far below the stack pointer (or the scratch area) a
# direct call's stack begins: past the 128-byte red zone. snapctl's own
# engine, for when gdb is gone (native/rescue.go, callFunc), follows the
# same description of the call (docs/design.md, "The call into a stopped
# thread").
CALL_GAP = 256


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
        sp = ((top - CALL_GAP) & ~15) - 8
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


# gdb before 14 reads and writes a thread's XSAVE area (x87, SSE, AVX,
# AVX-512) through a buffer of GDB13_XSAVE bytes, and the kernel takes a
# write of that area only whole: on a CPU with AMX, whose area is 11008
# bytes, every write fails ("Couldn't write extended state status: Bad
# address"). After each of its calls gdb restores the thread's registers
# one by one and stops at the first of the XSAVE area: the call's value is
# lost, the vector registers stay as the function left them, orig_rax
# and fs_base are not put back (a thread stopped in a system call does
# not restart it) and the call's dummy frame stays listed; the restore of
# a call gdb abandoned fails inside the stop that ends it, which MI never
# reports (docs/facts.md, fact 149). So on such a machine the agent puts
# the area back itself, whole: it keeps it as each call begins (gdb's
# inferior_call event, the thread's registers set for the call, its
# vector registers not yet touched), writes it back as the call ends,
# and has gdb read it again, so that gdb's own restore finds every
# register of the area as it saved it and writes none of them. A call
# ends either before gdb's post event, stopped at its dummy frame's
# return address, or later: gdb unwinds a call that a signal stopped
# when unwindonsignal is on (right after the event); a call it abandoned
# returns to that address while the process runs on (an internal
# breakpoint there, whose stop() puts the area back before gdb pops the
# frame), or is taken back by snapctl's `return` (vectors_unwinding).
GDB13_XSAVE = 2696


class _Vectors:
    """The XSAVE areas of the threads in gdb's calls, kept while gdb
    cannot write them (see GDB13_XSAVE)."""

    def __init__(self):
        self.needed = None  # decided at the first call
        # lwp: its calls in progress, innermost last, each [area, the
        # breakpoint at its return address while gdb has abandoned it]
        self.calls = {}
        self.spent = []  # return breakpoints to delete at the stop

    def tracer(self):
        if DIRECT is None:
            direct_tracer()
        return DIRECT or None

    def read(self, lwp):
        d = self.tracer()
        if d is None:
            return None
        d.iov.len = d.XSAVE
        if d.ptrace(d.GETREGSET, lwp, d.NT_X86_XSTATE, d.c.byref(d.iov)) != 0:
            return None
        return d.xstate.raw[:d.iov.len]

    def begin(self, lwp):
        if self.needed is None:
            self.needed = False
            if x86_64() and int(gdb.VERSION.split(".")[0]) < 14:
                area = self.read(lwp)
                self.needed = area is not None and len(area) > GDB13_XSAVE
        if self.needed:
            self.calls.setdefault(lwp, []).append([self.read(lwp), None])

    def end(self, lwp):
        """gdb's post event: thread lwp's call returned, or stopped inside
        the function, or goes on while gdb reports another thread's stop
        (then gdb abandons it)."""
        calls = self.calls.get(lwp)
        if not calls:
            return
        d = self.tracer()
        if d.ptrace(d.GETREGS, lwp, None, d.c.byref(d.now)) != 0 or d.ptrace(d.GETSIGINFO, lwp, None, d.info) != 0:
            calls.pop()
            return
        (signo,) = struct.unpack_from("<i", d.info, 0)
        ret = self.return_address(lwp)
        returned = ret is not None and d.now.rip == ret
        if gdb.selected_thread().ptid[1] == lwp:
            # gdb pops the dummy frame now, or else leaves the thread
            # inside the function, stopped at a breakpoint there.
            if returned or (gdb.parameter("unwindonsignal") and signo not in (signal.SIGTRAP, signal.SIGSTOP)):
                self.put_back(lwp, calls.pop()[0])
                return
        elif returned:
            # Returned as another thread stopped: gdb abandons the call
            # and pops its frame at the thread's pending stop.
            self.put_back(lwp, calls[-1][0])
        if ret is None:
            calls.pop()
            return
        bp = _CallReturn("*%#x" % ret, internal=True)
        bp.lwp = lwp
        calls[-1][1] = bp

    def return_address(self, lwp):
        """Where thread lwp's innermost call of gdb's returns to (its
        dummy frame's code address), or None."""
        out = gdb.execute("maint print dummy-frames", to_string=True)
        for m in re.finditer(r"code=(0x[0-9a-fA-F]+).*?ptid=\d+\.(\d+)\.", out):
            if int(m.group(2)) == lwp:
                return int(m.group(1), 16)
        return None

    def put_back(self, lwp, area):
        """Writes area back into thread lwp and has gdb read the thread's
        registers again."""
        d = self.tracer()
        if area is None:
            return
        buf = d.c.create_string_buffer(area, len(area))
        iov = type(d.iov)(d.c.addressof(buf), len(area))
        if d.ptrace(d.SETREGSET, lwp, d.NT_X86_XSTATE, d.c.byref(iov)) != 0:
            return
        gdb.execute("maint flush register-cache", to_string=True)
        selected = gdb.selected_thread()
        thread = next((t for t in gdb.selected_inferior().threads() if t.ptid[1] == lwp), None)
        if thread is None:
            return
        if thread != selected:
            thread.switch()
        try:
            gdb.parse_and_eval("$xmm0").fetch_lazy()
        finally:
            if thread != selected:
                selected.switch()

    def returned(self, bp):
        """An abandoned call of bp.lwp's returned to bp's address, where
        gdb pops its dummy frame."""
        calls = self.calls.get(bp.lwp, [])
        for i, call in enumerate(calls):
            if call[1] is bp:
                self.put_back(bp.lwp, call[0])
                del calls[i]
                # Not from its own stop(), which may not delete a
                # breakpoint: at the stop event, before the process runs
                # on (the address is the thread's stack's again).
                self.spent.append(bp)
                return

    def stopped(self, event):
        """gdb's stop event: the breakpoints of calls that have returned
        go."""
        while self.spent:
            bp = self.spent.pop()
            if bp.is_valid():
                bp.delete()

    def unwinding(self, lwp):
        """snapctl takes thread lwp's innermost call back (gdb's `return`
        from the function pops its dummy frame): its area goes back
        first."""
        calls = self.calls.get(lwp)
        if not calls:
            return
        area, bp = calls.pop()
        self.put_back(lwp, area)
        if bp is not None and bp.is_valid():
            bp.delete()

    def left(self):
        """How many calls' areas are kept, and how many breakpoints of
        the calls' return addresses are in (both 0 between two calls)."""
        kept = sum(len(calls) for calls in self.calls.values())
        return kept, sum(1 for bp in self.spent if bp.is_valid()) + sum(
            1 for calls in self.calls.values() for _, bp in calls if bp is not None and bp.is_valid())


VECTORS = _Vectors()


class _CallReturn(gdb.Breakpoint):
    """An abandoned call's return address (see _Vectors)."""

    def stop(self):
        if gdb.selected_thread().ptid[1] == self.lwp:
            VECTORS.returned(self)
        return False


def _on_inferior_call(event):
    lwp = event.ptid[1] or event.ptid[0]
    if isinstance(event, gdb.InferiorCallPreEvent):
        VECTORS.begin(lwp)
    else:
        VECTORS.end(lwp)


def vectors_unwinding(lwp):
    VECTORS.unwinding(lwp)


gdb.events.inferior_call.connect(_on_inferior_call)
gdb.events.stop.connect(VECTORS.stopped)
