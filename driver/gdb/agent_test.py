# Unit tests of the agent's core, agent.py, under python3 (.ci/run).
# Its stops run only in gdb (the Go tests drive them: agent_test.go,
# agent_contract_test.go); here the logic that needs no gdb: the hit
# selection, the records and busy files on a real file system, the
# choice of a backend's Stops, and each backend's part read whole.

import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent


class HitSelection(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.core()

    def test_every_and_max_hits(self):
        should, done = self.ns["should_snapshot"], self.ns["done"]
        # every 3, max 7: hits 1, 4, 7 are taken, and 7 is the last.
        self.assertEqual([h for h in range(0, 12) if should(h, 3, 7)], [1, 4, 7])
        self.assertEqual([h for h in range(1, 12) if done(h, 3, 7)], list(range(7, 12)))
        # every 0 counts as 1; max 0 never ends.
        self.assertEqual([h for h in range(0, 5) if should(h, 0, 0)], [1, 2, 3, 4])
        self.assertFalse(any(done(h, 1, 0) for h in range(1, 100)))
        # every 4, max 6: the hit after 5 would be 9, past 6.
        self.assertEqual([h for h in range(1, 10) if done(h, 4, 6)], list(range(5, 10)))


class Files(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.core()
        self.dir = tempfile.TemporaryDirectory()
        self.records = os.path.join(self.dir.name, "records")
        self.busy = os.path.join(self.dir.name, "busy")

    def tearDown(self):
        self.dir.cleanup()

    def agent(self, kind="massif", records=None):
        measure = {"kind": kind, "ext": ".out", "monitor": "monitor snapshot", "report": "x"}
        return self.ns["Agent"](records or self.records, self.dir.name, self.busy, measure)

    def test_records_appended_whole(self):
        a = self.agent()
        a.write({"bp": "1", "hit": 1})
        a.write({"bp": "2", "error": "a\nb"})
        with open(self.records) as f:
            lines = f.read().splitlines()
        self.assertEqual([json.loads(l) for l in lines], [{"bp": "1", "hit": 1}, {"bp": "2", "error": "a\nb"}])
        self.assertIsNone(a.lost)

    def test_busy_file_overwritten_whole(self):
        a = self.agent()

        class B:
            number = 12
        with open(self.busy, "rb") as f:
            self.assertEqual(f.read(), b"-".ljust(31) + b"\n")
        a.begin(B)
        a.begin(B)
        with open(self.busy, "rb") as f:
            self.assertEqual(f.read(), b"2 12".ljust(31) + b"\n")
        a.mark("-")
        with open(self.busy, "rb") as f:
            data = f.read()
        self.assertEqual(len(data), self.ns["BUSY_WIDTH"])
        self.assertEqual(data.split(), [b"-"])

    def test_halted_hit_stops_unmeasured(self):
        # Once snapctl has created the halt file (the run is ending), a
        # hit stops the program for snapctl's interrupt, and is not
        # measured: no record, no stop begun.
        a = self.agent()
        bp = object.__new__(self.ns["SnapBreakpoint"])  # gdb.Breakpoint needs gdb
        bp.agent = a
        open(a.halt, "w").close()
        self.assertIs(bp.stop(), True)
        self.assertEqual(os.path.getsize(self.records), 0)
        with open(self.busy, "rb") as f:
            self.assertEqual(f.read().split(), [b"-"])

    def test_full_file_system_loses_the_record_loudly(self):
        if not os.path.exists("/dev/full"):
            self.skipTest("no /dev/full")
        a = self.agent(records="/dev/full")
        with self.assertRaises(self.ns["RecordLost"]):
            a.write({"bp": "1"})
        self.assertIn("No space left on device", a.lost)


class BackendStops(unittest.TestCase):
    def test_valgrind_kinds_take_the_defaults(self):
        ns = readagent.core()
        d = tempfile.mkdtemp()
        try:
            a = ns["Agent"](os.path.join(d, "r"), d, os.path.join(d, "b"), {"kind": "massif", "ext": ".out"})
            self.assertIs(type(a.stops), ns["Stops"])
            self.assertFalse(a.defers() or a.stops.repeated() or a.stops.calling())
            self.assertIsNone(a.stops.memory(a.measure, True))
        finally:
            for name in os.listdir(d):
                os.remove(os.path.join(d, name))
            os.rmdir(d)

    def test_every_part_read_whole(self):
        # Each backend's part of gdb's Python is the list of a Go file of
        # its folder (a []gdb.Script of embedded files), which gdb reads
        # and readagent.py with it: every Python file of the folder but
        # its tests is in that list.
        backends = os.path.join(readagent.ROOT, "driver", "backend")
        parts = 0
        for folder in sorted(os.listdir(backends)):
            top = os.path.join(backends, folder)
            if not os.path.isdir(top):
                continue
            listed = []
            for go in sorted(os.listdir(top)):
                if go.endswith(".go") and not go.endswith("_test.go"):
                    listed += readagent.part_files(os.path.join(top, go))
            files = sorted(os.path.join(d, f) for d, _, names in os.walk(top) for f in names
                           if f.endswith(".py") and not f.endswith("_test.py"))
            self.assertEqual(sorted(listed), files, folder)
            parts += bool(files)
        self.assertGreaterEqual(parts, 2)


if __name__ == "__main__":
    unittest.main()
