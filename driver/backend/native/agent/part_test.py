# Unit tests of the native backend's part of gdb's agent as one, under
# python3 (.ci/run): read after agent.py in agent.go's order, it
# registers its stops (measure.py's NativeStops) under its kind.

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "gdb"))
sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent  # noqa: E402


class Part(unittest.TestCase):
    def test_registers_its_stops(self):
        self.assertEqual(readagent.core()["BACKENDS"], {})
        ns = readagent.native()
        self.assertEqual(sorted(ns["BACKENDS"]), ["native"])
        self.assertTrue(issubclass(type(ns["BACKENDS"]["native"]), ns["Stops"]))
        self.assertIs(type(ns["BACKENDS"]["native"]), ns["NativeStops"])


if __name__ == "__main__":
    unittest.main()
