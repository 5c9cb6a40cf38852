# Unit tests of the agent's core, agent.py, under python3 (.ci/run).
# Its stops run only in gdb (the Go tests drive them: agent_test.go,
# agent_contract_test.go); here the logic that needs no gdb: the hit
# selection, the records and busy files on a real file system, and the
# choice of a backend's Stops.

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

    def test_native_files_all_read(self):
        # Every file of native's folder but its tests is in agent.go's
        # list, which gdb reads (and readagent.py with it).
        folder = os.path.join(readagent.ROOT, "driver", "backend", "native", "agent")
        files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py") and not f.endswith("_test.py"))
        self.assertEqual(sorted(readagent.native_files()), files)
        self.assertEqual(len(files), 6)

    def test_native_registers_its_stops(self):
        ns = readagent.core()
        self.assertEqual(ns["BACKENDS"], {})
        ns = readagent.native()
        self.assertEqual(sorted(ns["BACKENDS"]), ["native"])
        self.assertTrue(issubclass(type(ns["BACKENDS"]["native"]), ns["Stops"]))


if __name__ == "__main__":
    unittest.main()
