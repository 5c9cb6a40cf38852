# Unit tests of heaptrack.py under python3 (.ci/run): SiteCutter's
# reading of a library's lock in a real process, compiled here with a
# library of its own whose global mutex one of four threads holds (the
# lock word and owner that heaptrack's lock has), at the offsets a layout
# gives (heaptrack.AgentLayout, here from nm), the library's extent in the
# process, and the writing of a mark into a real FIFO: whole, failing at
# once without a reader, and failing past MARK_WAIT when the reader stops
# reading. The cut itself, and where gdb finds the library
# (library_base), run only in gdb with heaptrack: the Go tests drive them
# (native/sites_test.go, letout_test.go).

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "gdb"))
sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent  # noqa: E402

LIBRARY = r"""
#include <pthread.h>
pthread_mutex_t biglock = PTHREAD_MUTEX_INITIALIZER;
void hold(void) { pthread_mutex_lock(&biglock); }
void *lock_address(void) { return &biglock; }
"""

PROGRAM = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
void hold(void);
void *lock_address(void);
static pthread_barrier_t ready;
static void *worker(void *arg) {
    if (arg) {
        hold();
        printf("%d %p %p\n", gettid(), (void *) hold, lock_address());
        fflush(stdout);
    }
    pthread_barrier_wait(&ready);
    pause();
    return NULL;
}
int main(void) {
    pthread_t t[4];
    pthread_barrier_init(&ready, NULL, 5);
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *) (long) (i == 2));
    pthread_barrier_wait(&ready);
    char c;
    read(0, &c, 1);
    return 0;
}
"""


@unittest.skipUnless(shutil.which("gcc") and shutil.which("nm"), "needs gcc and nm")
class Lock(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.native()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        d = self.dir.name
        for name, text in (("lib.c", LIBRARY), ("main.c", PROGRAM)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        self.lib = os.path.join(d, "libhold.so")
        subprocess.run(["gcc", "-shared", "-fPIC", "-pthread", "-o", self.lib, os.path.join(d, "lib.c")], check=True)
        bin = os.path.join(d, "main")
        subprocess.run(["gcc", "-pthread", "-o", bin, os.path.join(d, "main.c"), self.lib, "-Wl,-rpath," + d], check=True)
        self.p = subprocess.Popen([bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

        def end():
            self.p.stdin.close()
            self.p.wait(timeout=30)
            self.p.stdout.close()
        self.addCleanup(end)
        tid, fn, lock = self.p.stdout.readline().split()
        self.owner, self.fn, self.lock = int(tid), int(fn, 16), int(lock, 16)

    def test_lock_state_and_extent(self):
        out = subprocess.run(["nm", "-D", "--defined-only", self.lib], check=True, capture_output=True, text=True).stdout
        syms = {f[2]: int(f[0], 16) for f in (l.split() for l in out.splitlines()) if len(f) == 3}
        layout = {"lib": self.lib, "anchor": "hold", "anchor_value": syms["hold"], "span": 1 << 16,
                  "lock": syms["biglock"], "lock_owner": 8, "data": 0, "fd": 0, "size": 4, "buffer": 8, "capacity": 4096}
        # gdb finds the anchor where the program says it is.
        self.ns["library_base"] = lambda l: self.fn - l["anchor_value"]
        cutter = self.ns["SiteCutter"](os.path.join(self.dir.name, "fifo"), layout)
        self.addCleanup(lambda: cutter.mem is not None and os.close(cutter.mem))
        word, owner = cutter.lock_state(self.p.pid)
        self.assertEqual(cutter.base + layout["lock"], self.lock)
        self.assertEqual(word, 1)  # locked, no waiter
        self.assertEqual(owner, self.owner)
        self.assertNotEqual(owner, self.p.pid)
        inside = cutter.contains(self.p.pid)
        self.assertTrue(inside(self.fn))
        self.assertTrue(inside(cutter.base))
        self.assertFalse(inside(cutter.base + layout["span"]))
        self.assertFalse(inside(cutter.base - 1))


class Marks(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.native()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.fifo = os.path.join(self.dir.name, "fifo")
        os.mkfifo(self.fifo)
        self.cutter = self.ns["SiteCutter"](self.fifo, {"lib": "libheaptrack_preload.so"})

    def test_mark_written_whole(self):
        got = []
        data = bytes(range(256)) * 1024  # more than the FIFO holds
        rd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)

        def read():
            chunks = []
            while sum(map(len, chunks)) < len(data):
                try:
                    chunk = os.read(rd, 65536)
                except BlockingIOError:
                    threading.Event().wait(0.001)
                    continue
                chunks.append(chunk)
            got.append(b"".join(chunks))
        t = threading.Thread(target=read)
        t.start()
        try:
            self.cutter.write(data)
        finally:
            t.join(timeout=60)
            os.close(rd)
        self.assertEqual(got, [data])

    def test_no_reader(self):
        with self.assertRaises(OSError) as e:
            self.cutter.write(b"mark")
        self.assertEqual(e.exception.errno, 6)  # ENXIO

    def test_reader_stops_reading(self):
        self.ns["MARK_WAIT"] = 0.2
        rd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.addCleanup(os.close, rd)
        with self.assertRaisesRegex(OSError, "stayed full for 0.2 s"):
            self.cutter.write(bytes(1 << 20))


if __name__ == "__main__":
    unittest.main()
