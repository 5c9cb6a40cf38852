# Unit tests of stepover.py under python3 (.ci/run): telling a repeated
# report of a hit from a new one by the thread's registers (same_state),
# and the signals a hold may block. Reading the registers (calls.py's
# _Direct: calls_test.py) and gdb's step run only in gdb: the Go tests
# drive them (driver/backend/native: native_test.go, directmask_test.go).

import os
import signal
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "gdb"))
sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent  # noqa: E402


class SameState(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.native()
        self.same = self.ns["same_state"]
        self.gprs = self.ns["GPRS"]
        pc, sp = 0x401136, 0x7FFC0000
        self.last = (pc, sp) + tuple(range(100, 100 + len(self.gprs)))

    def at(self, **regs):
        at = list(self.last)
        for r, v in regs.items():
            at[2 + self.gprs.index(r)] = v
        return tuple(at)

    def test_same(self):
        self.assertTrue(self.same(self.last, self.last))
        self.assertFalse(self.same(None, self.last))
        self.assertFalse(self.same(self.last, (self.last[0] + 1,) + self.last[1:]))
        self.assertFalse(self.same(self.last, (self.last[0], self.last[1] - 8) + self.last[2:]))
        # Without the general registers (no x86-64), pc and sp alone.
        self.assertFalse(self.same(self.last[:2], self.last))

    def test_gdbs_scratch_register(self):
        pc = self.last[0]
        # gdb's displaced step leaves one of TEMPS at an address just
        # after pc (docs/facts.md, fact 79).
        self.assertTrue(self.same(self.last, self.at(rax=pc + 7)))
        self.assertTrue(self.same(self.last, self.at(rdi=pc + 15)))
        self.assertFalse(self.same(self.last, self.at(rax=pc + 16)))
        self.assertFalse(self.same(self.last, self.at(rax=pc)))
        # Not one of TEMPS, or two registers: the thread ran.
        self.assertFalse(self.same(self.last, self.at(r12=pc + 7)))
        self.assertFalse(self.same(self.last, self.at(rax=pc + 7, rbx=pc + 7)))
        self.assertFalse(self.same(self.last, self.at(rbp=pc + 7)))


class HoldMask(unittest.TestCase):
    def test_faults_never_held(self):
        mask = readagent.native()["HOLD_MASK"]
        bit = lambda s: mask >> (s - 1) & 1
        for s in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGTRAP, signal.SIGSYS):
            self.assertEqual(bit(s), 0, signal.Signals(s).name)
        for s in (signal.SIGALRM, signal.SIGCHLD, signal.SIGPROF, signal.SIGUSR1, signal.SIGRTMIN):
            self.assertEqual(bit(s), 1, signal.Signals(s).name)
        self.assertLess(mask, 1 << 64)


if __name__ == "__main__":
    unittest.main()
