# Unit tests of memcheck.py under python3 (.ci/run): its reading of
# memcheck's leak search, on the report valgrind writes for
# testdata/reach.c compiled here (the same loss records as `monitor
# leak_check full reachable any` prints at a stop). The gdb command
# itself runs only in gdb: memcheck_test.go drives it.

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "gdb"))
sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent  # noqa: E402


def source_line(marker):
    with open(os.path.join(HERE, "testdata", "reach.c")) as f:
        return next(i for i, l in enumerate(f, 1) if marker in l)


@unittest.skipUnless(shutil.which("gcc") and shutil.which("valgrind"), "needs gcc and valgrind")
class LeakRecords(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ns = readagent.read(os.path.join(HERE, "memcheck.py"))
        cls.dir = tempfile.TemporaryDirectory()
        bin, log = os.path.join(cls.dir.name, "reach"), os.path.join(cls.dir.name, "log")
        subprocess.run(["gcc", "-g", "-O0", "-pthread", "-o", bin, os.path.join(HERE, "testdata", "reach.c")], check=True)
        # Two rounds: 40 blocks of 32 bytes at each site.
        subprocess.run(["valgrind", "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=all",
                        "--log-file=" + log, bin, "2"], check=True, timeout=300)
        with open(log) as f:
            cls.log = f.read()

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_records(self):
        records = self.ns["parse_records"](self.log)
        self.assertEqual([r["record"] for r in records], list(range(1, len(records) + 1)))
        by_site = {}
        for r in records:
            site = self.ns["site_of"](r["stack"])
            by_site[(r["kind"], site.get("function"), site.get("file"), site.get("line"))] = (r["bytes"], r["blocks"])
        self.assertEqual(by_site[("definitely lost", "lose", "reach.c", source_line("/* lost */"))], (40 * 32, 40))
        # The list's head is in registry: one block directly reachable,
        # the others through it, all still reachable.
        self.assertEqual(by_site[("still reachable", "keep", "reach.c", source_line("/* kept */"))], (40 * 32, 40))
        # The site is the first frame past valgrind's malloc.
        lost = next(r for r in records if r["kind"] == "definitely lost")
        self.assertEqual(lost["stack"][0]["function"], "malloc")
        self.assertIn("vgpreload_memcheck", lost["stack"][0]["object"])
        self.assertEqual(lost["stack"][1]["function"], "lose")

    def test_frames(self):
        frame_of = self.ns["frame_of"]
        self.assertEqual(frame_of("keep (reach.c:21)", "10919B"),
                         {"function": "keep", "addr": "0x10919b", "file": "reach.c", "line": 21})
        self.assertEqual(frame_of("malloc (in /usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so)", "48407B4"),
                         {"function": "malloc", "addr": "0x48407b4", "object": "/usr/libexec/valgrind/vgpreload_memcheck-amd64-linux.so"})
        self.assertEqual(frame_of("???", "1"), {"function": "???", "addr": "0x1"})


if __name__ == "__main__":
    unittest.main()
