# Unit tests of calls.py under python3 (.ci/run): the direct call engine,
# _Direct, on a real process compiled here, which this test traces as
# gdb's process does (PTRACE_ATTACH, then the program stops at a
# breakpoint instruction). A call returns the process's own figures
# (mallinfo2 into the scratch area, getpid's result), leaves the
# thread's registers and blocked signals as they were, and a call that
# faults or never returns fails with CallFailed, the thread put back.
# gdb's own calls (func, scheduler_locked...) run only inside gdb: the Go
# tests drive them (native_test.go, in driver/backend/native).

import ctypes
import os
import platform
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "gdb"))
sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent  # noqa: E402

PROGRAM = r"""
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

int crash(long x) { return *(volatile int *) x; }
void wait_held(void) { pthread_mutex_lock(&held); }

int main(void) {
    void *keep[100];
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(16 * i + 8);
    for (int i = 0; i < 100; i += 3)
        free(keep[i]);
    pthread_mutex_lock(&held);
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, NULL);
    printf("%p %p %p %p\n", (void *) mallinfo2, (void *) getpid, (void *) crash, (void *) wait_held);
    struct mallinfo2 m = mallinfo2();
    printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\n", m.arena, m.ordblks, m.smblks, m.hblks, m.hblkhd,
           m.usmblks, m.fsmblks, m.uordblks, m.fordblks, m.keepcost);
    fflush(stdout);
    char c;
    read(0, &c, 1);
    __asm__ volatile("int3");
    printf("after\n");
    fflush(stdout);
    return 0;
}
"""

PTRACE_ATTACH, PTRACE_CONT, PTRACE_DETACH = 16, 7, 17


@unittest.skipUnless(shutil.which("gcc") and platform.machine() == "x86_64" and sys.platform == "linux",
                     "needs gcc on x86-64 Linux")
class Direct(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.native()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        src, bin = os.path.join(self.dir.name, "call.c"), os.path.join(self.dir.name, "call")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["gcc", "-O0", "-pthread", "-o", bin, src], check=True)
        self.p = subprocess.Popen([bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.addCleanup(self.end)
        self.fn = [int(x, 16) for x in self.p.stdout.readline().split()]
        self.want = dict(zip(self.ns["MALLINFO2"], (int(x) for x in self.p.stdout.readline().split())))
        self.d = self.ns["_Direct"]()
        pid = self.p.pid
        if self.d.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
            self.skipTest("cannot trace the program: errno %d" % ctypes.get_errno())
        self.traced = True
        self.assertEqual(self.stop(), signal.SIGSTOP)
        self.assertEqual(self.d.ptrace(PTRACE_CONT, pid, None, 0), 0)
        self.p.stdin.write(b"\n")
        self.p.stdin.flush()
        self.assertEqual(self.stop(), signal.SIGTRAP)  # at the int3, as at a breakpoint

    def stop(self):
        _, status = os.waitpid(self.p.pid, os.__dict__.get("__WALL", 0x40000000))
        self.assertTrue(os.WIFSTOPPED(status), status)
        return os.WSTOPSIG(status)

    def end(self):
        if getattr(self, "traced", False):
            self.d.ptrace(PTRACE_DETACH, self.p.pid, None, 0)
        self.p.stdin.close()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.p.stdout.close()

    def state(self):
        pid = self.p.pid
        return self.d.pc_sp(pid), self.ns["sigmask"](self.d, pid)

    def test_calls(self):
        pid, d = self.p.pid, self.d
        self.assertFalse(d.refuses(pid))
        before = self.state()
        self.assertIsNotNone(before[0])
        self.assertEqual(before[1], 1 << (signal.SIGUSR2 - 1))
        mallinfo2, getpid = self.fn[0], self.fn[1]
        data = d.call(pid, pid, mallinfo2, 0, 80, "mallinfo2", 2.0)
        self.assertEqual(dict(zip(self.ns["MALLINFO2"], struct.unpack("<10Q", data))), self.want)
        self.assertEqual(self.state(), before)
        self.assertEqual(d.call(pid, pid, getpid, 0, 0, "getpid", 2.0), pid)
        self.assertEqual(self.state(), before)
        # The program goes on from its breakpoint as if nothing was called.
        self.traced = False
        self.assertEqual(d.ptrace(PTRACE_DETACH, pid, None, 0), 0)
        self.assertEqual(self.p.stdout.readline(), b"after\n")
        self.assertEqual(self.p.wait(timeout=30), 0)

    def test_fault(self):
        pid, d = self.p.pid, self.d
        d.refuses(pid)
        before = self.state()
        with self.assertRaisesRegex(self.ns["CallFailed"], r"crash\(\) faulted: SIGSEGV"):
            d.call(pid, pid, self.fn[2], 0, 0, "crash", 2.0)
        self.assertEqual(self.state(), before)
        # The fault is sent again, for the tracer to see at the stop.
        self.assertEqual(d.ptrace(PTRACE_CONT, pid, None, 0), 0)
        self.assertEqual(self.stop(), signal.SIGSEGV)
        self.assertEqual(self.state(), before)

    def test_timeout(self):
        pid, d = self.p.pid, self.d
        d.refuses(pid)
        before = self.state()
        # The mutex is the stopped thread's own: the call waits in
        # futex(2) for good, and is given up there.
        with self.assertRaisesRegex(self.ns["CallFailed"], r"wait_held\(\) did not return within 0.3 s"):
            d.call(pid, pid, self.fn[3], 0, 0, "wait_held", 0.3)
        self.assertEqual(self.state(), before)
        self.traced = False
        self.assertEqual(d.ptrace(PTRACE_DETACH, pid, None, 0), 0)
        self.assertEqual(self.p.stdout.readline(), b"after\n")


if __name__ == "__main__":
    unittest.main()
