# Unit tests of measure.py under python3 (.ci/run): resident memory read
# from /proc of a real process, compiled here, that has touched 64 MiB of
# anonymous memory, checked against the kernel's other account of it
# (/proc/PID/statm); the native backend's Stops as the agent finds them.

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "gdb"))
sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent  # noqa: E402

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    size_t n = 64 << 20;
    char *p = malloc(n);
    memset(p, 1, n);
    printf("ready\n");
    fflush(stdout);
    char c;
    read(0, &c, 1);
    return p[n - 1] == 1 ? 0 : 1;
}
"""

MiB = 1 << 20


class Status(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.native()

    def test_status_kib(self):
        kib = self.ns["status_kib"]
        text = b"Name:\tx\nVmRSS:\t    1452 kB\nRssAnon:\t  12 kB\n"
        self.assertEqual(kib(text, b"\nVmRSS:"), 1452)
        self.assertEqual(kib(text, b"\nRssAnon:"), 12)
        self.assertEqual(kib(text, b"\nRssShmem:"), 0)

    @unittest.skipUnless(shutil.which("gcc"), "needs gcc")
    def test_resident_memory_of_a_process(self):
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        src, bin = os.path.join(d.name, "rss.c"), os.path.join(d.name, "rss")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["gcc", "-O0", "-o", bin, src], check=True)
        p = subprocess.Popen([bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

        def end():
            p.stdin.close()
            self.assertEqual(p.wait(timeout=30), 0)
            p.stdout.close()
        self.addCleanup(end)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        rss, anon = self.ns["proc_status"](p.pid)
        # statm: size resident shared..., in pages; shared is file-backed
        # and shmem pages, so resident - shared is the anonymous ones.
        with open("/proc/%d/statm" % p.pid) as f:
            fields = [int(x) for x in f.read().split()]
        page = os.sysconf("SC_PAGE_SIZE")
        self.assertEqual(rss, fields[1] * page)
        self.assertEqual(anon, (fields[1] - fields[2]) * page)
        self.assertGreaterEqual(anon, 64 * MiB)
        self.assertLess(anon, 80 * MiB)
        with self.assertRaises(OSError):
            self.ns["proc_status"](1 << 30)


class Stops(unittest.TestCase):
    def test_native_stops(self):
        ns = readagent.native()
        stops = ns["BACKENDS"]["native"]
        self.assertIsInstance(stops, ns["NativeStops"])
        stops.start({"kind": "native", "heap_reader": "snapctl-heap-1"})
        self.assertEqual(ns["HEAP_READER"], "snapctl-heap-1")
        stops.start({"kind": "native"})
        self.assertIsNone(ns["HEAP_READER"])
        self.assertFalse(stops.calling())
        # With native.sites, a stop waits for gdb's stop of every thread
        # until snapctl has said where heaptrack's stream goes.
        self.assertTrue(stops.defers({"sites": True}))


if __name__ == "__main__":
    unittest.main()
