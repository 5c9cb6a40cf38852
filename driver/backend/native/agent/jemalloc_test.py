# Unit tests of jemalloc.py under python3 (.ci/run): the statistics it
# asks mallctl() for (JE_STATS) are jemalloc's, as a program compiled
# here against Debian's libjemalloc reads them the way the agent does
# ("epoch" written, then each read as a uint64_t). The agent's calls run
# only in gdb: the Go tests drive them (driver/backend/native's
# jemalloc runs, truth_test.go).

import errno
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
#include <jemalloc/jemalloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    void *keep = malloc(1 << 20);
    memset(keep, 1, 1 << 20);
    uint64_t epoch = 1;
    size_t len = sizeof epoch;
    printf("epoch %d\n", mallctl("epoch", &epoch, &len, &epoch, len));
    for (int i = 1; i < argc; i++) {
        uint64_t v = 0;
        size_t n = sizeof v;
        int r = mallctl(argv[i], &v, &n, NULL, 0);
        printf("%s %d %llu\n", argv[i], r, (unsigned long long) v);
    }
    free(keep);
    return 0;
}
"""


class Names(unittest.TestCase):
    def test_errno_name(self):
        ns = readagent.native()
        self.assertEqual(ns["errno_name"](errno.ENOENT), "ENOENT")
        self.assertEqual(ns["errno_name"](4242), "4242")

    @unittest.skipUnless(shutil.which("gcc") and os.path.exists("/usr/include/jemalloc/jemalloc.h"),
                         "needs gcc and Debian's libjemalloc-dev")
    def test_statistics_are_jemallocs(self):
        ns = readagent.native()
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        src, bin = os.path.join(d.name, "je.c"), os.path.join(d.name, "je")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.run(["gcc", "-o", bin, src, "-ljemalloc"], check=True)
        stats = [stat for _, stat in ns["JE_STATS"]]
        out = subprocess.run([bin] + stats, check=True, capture_output=True, text=True).stdout.splitlines()
        self.assertEqual(out[0], "epoch 0")
        got = {}
        for line in out[1:]:
            stat, r, v = line.split()
            self.assertEqual(r, "0", "mallctl(%s) returned %s" % (stat, ns["errno_name"](int(r))))
            got[stat] = int(v)
        short = {key: got[stat] for key, stat in ns["JE_STATS"]}
        self.assertGreaterEqual(short["allocated"], 1 << 20)
        self.assertLessEqual(short["allocated"], short["active"])
        self.assertLessEqual(short["active"], short["resident"])
        self.assertLessEqual(short["active"], short["mapped"])


if __name__ == "__main__":
    unittest.main()
