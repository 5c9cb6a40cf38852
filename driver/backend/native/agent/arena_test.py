# Unit tests of arena.py under python3 (.ci/run): glibc's arenas read
# from a real process's memory, compiled here, against what the
# process's own mallinfo2() says of them. Four threads allocate and free
# at once, so that the process has arenas besides main_arena, with
# chunks in fastbins, in the regular bins and in its threads' tcaches.
# Where they are and how glibc lays them out is what snapctl hands the
# agent: internal/arenas.Find, printed by internal/arenas/testdata/find
# (go run), from libc's separate debug file (Debian's libc6-dbg). The
# threads' tcaches are read with it too, from five threads of
# internal/arenas/testdata/tls.c whose thread pointers it prints.

import json
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
#include <gnu/libc-version.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_barrier_t all;
static void *kept[4][400];

static void *work(void *arg) {
    long t = (long) arg;
    void *gone[400];
    pthread_barrier_wait(&all);
    for (int i = 0; i < 400; i++) {
        size_t n = (i % 3 == 0) ? 24 + 8 * (i % 7) : 100 + 37 * (i % 50);
        kept[t][i] = malloc(n);
        gone[i] = malloc(n + 16 * (t + 1));
    }
    for (int i = 0; i < 400; i += 2)
        free(gone[i]);
    for (int i = 1; i < 400; i += 2)
        free(gone[i]);
    return NULL;
}

int main(void) {
    pthread_t th[4];
    /* stdout's buffer is allocated before mallinfo2() is called. */
    printf("%s %p\n", gnu_get_libc_version(), (void *) mallinfo2);
    void *big = malloc(1 << 20); /* mmapped */
    pthread_barrier_init(&all, NULL, 4);
    for (long t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, work, (void *) t);
    for (int t = 0; t < 4; t++)
        pthread_join(th[t], NULL);
    struct mallinfo2 m = mallinfo2();
    printf("%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\n", m.arena, m.ordblks, m.smblks, m.hblks, m.hblkhd,
           m.usmblks, m.fsmblks, m.uordblks, m.fordblks, m.keepcost);
    fflush(stdout);
    char c;
    read(0, &c, 1); /* until the test has read the heap */
    free(big);
    return 0;
}
"""


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..")


def find(pid, mallinfo2):
    """internal/arenas.Find's description of process pid's glibc, as the
    agent gets it."""
    out = subprocess.run(["go", "run", "./internal/arenas/testdata/find", str(pid), hex(mallinfo2)],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


@unittest.skipUnless(shutil.which("gcc") and shutil.which("go"), "needs gcc and go")
class Arenas(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.native()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        src, self.bin = os.path.join(self.dir.name, "heap.c"), os.path.join(self.dir.name, "heap")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["gcc", "-O0", "-pthread", "-o", self.bin, src], check=True)

    def start(self):
        p = subprocess.Popen([self.bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def end():
            p.stdin.close()
            p.wait(timeout=30)
            p.stdout.close()
        self.addCleanup(end)
        version, fn = p.stdout.readline().split()
        figures = [int(x) for x in p.stdout.readline().split()]
        return p.pid, tuple(int(x) for x in version.split(".")[:2]), int(fn, 16), dict(zip(self.ns["MALLINFO2"], figures))

    def test_mallinfo_of_a_threaded_process(self):
        pid, version, fn, want = self.start()
        g = find(pid, fn)
        if g.get("why"):
            self.skipTest(g["why"])
        self.assertEqual(g["version"], "%d.%d" % version)
        Heap = self.ns["Heap"]
        h = Heap.__new__(Heap)
        h.pid, h.mem, h.budget = pid, -1, None
        h.glibc(g)
        self.addCleanup(h.close)
        self.assertEqual(h.mangled, version >= (2, 32))
        arenas = h.arenas()
        self.assertGreaterEqual(len(arenas), 2, "the threads' arenas")
        self.assertEqual(h.locked(arenas), 0)
        self.assertEqual(h.count(), len(arenas))
        got = h.mallinfo(arenas)
        self.assertEqual(got, want)
        self.assertGreater(got["smblks"], 0, "chunks in fastbins")
        self.assertEqual(got["hblks"], 1)
        # A budget of chunks walked: exceeded, and not.
        with self.assertRaises(self.ns["WalkTooLong"]):
            h.mallinfo(arenas, 1)
        self.assertEqual(h.mallinfo(arenas, 1 << 20), want)
        # No reader of snapctl's: the walk here.
        self.assertEqual(h.read_all(), (0, len(arenas), want))

    def test_without_symbols(self):
        """What snapctl says without libc's symbol table leaves the heap
        unread and says why, for the arenas and the tcaches."""
        pid = self.start()[0]
        g = find(pid, 0)
        g.update(why="glibc's arenas cannot be found: no symbol table", tcache_why="no tcache")
        h = self.ns["Heap"].__new__(self.ns["Heap"])
        h.pid, h.mem, h.tcache = pid, -1, None
        h.glibc(g)
        self.assertEqual((h.why, h.tcache, h.tcache_why), (g["why"], None, "no tcache"))

    def test_tcaches_of_threads(self):
        """Each of five threads of internal/arenas/testdata/tls.c has
        freed one block of 100 bytes, which waits in its tcache as a
        112-byte chunk: read at the distance below each thread pointer
        snapctl hands the agent, with the struct's layout it hands."""
        exe = os.path.join(self.dir.name, "tls")
        subprocess.run(["gcc", "-O0", "-pthread", "-o", exe, os.path.join(ROOT, "internal", "arenas", "testdata", "tls.c")], check=True)
        p = subprocess.Popen([exe, "4"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

        def end():
            p.stdin.close()
            p.wait(timeout=30)
            p.stdout.close()
        self.addCleanup(end)
        addrs = [int(p.stdout.readline(), 16) for _ in range(6)]
        g = find(p.pid, addrs[0])
        if g.get("tcache_why"):
            self.skipTest(g["tcache_why"])
        h = self.ns["Heap"].__new__(self.ns["Heap"])
        h.pid, h.mem = p.pid, -1
        self.addCleanup(h.close)
        h.glibc(g)

        class Thread:
            def __init__(self, num, tp):
                self.num, self.tp = num, tp

            def handle(self):
                return self.tp.to_bytes(8, "little")
        self.assertEqual(h.tcache_bytes([Thread(i + 1, tp) for i, tp in enumerate(addrs[1:])]), 5 * 112)
        # The struct's chunk size is checked against the sizes handed: one
        # not among them fails the reading.
        g["tcache_struct"]["widths"] = [[w[0] + 16, w[1]] for w in g["tcache_struct"]["widths"]]
        h.glibc(g)
        with self.assertRaises(self.ns["HeapUnreadable"]):
            h.tcache_bytes([Thread(1, addrs[1])])

    def test_unreadable_memory(self):
        pid = self.start()[0]
        h = self.ns["Heap"].__new__(self.ns["Heap"])
        h.pid, h.mem = pid, -1
        self.addCleanup(h.close)
        with self.assertRaisesRegex(self.ns["HeapUnreadable"], "reading 16 bytes at 0x0"):
            h.read(0, 16)


if __name__ == "__main__":
    unittest.main()
