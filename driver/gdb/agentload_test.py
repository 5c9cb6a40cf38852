# Unit tests of agentload.py under python3 (.ci/run): the compiled code
# of a bundle of the agent's scripts kept in a cache directory, as gdb's
# Python keeps it in the user's ($XDG_CACHE_HOME/snapctl). gdb's read of
# it in a run is agentcache_test.go's.

import marshal
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent

LOADER = os.path.join(readagent.HERE, "agentload.py")


class CodeCache(unittest.TestCase):
    def setUp(self):
        self.ns = readagent.read(LOADER)
        self.code = self.ns["snapctl_agent_code"]
        self.dir = tempfile.TemporaryDirectory()
        self.cache = os.path.join(self.dir.name, "cache")
        os.mkdir(self.cache)
        self.scripts = []
        for name, text in (("a.py", "A = 1\n"), ("b.py", "B = A + 1\n")):
            path = os.path.join(self.dir.name, name)
            with open(path, "w") as f:
                f.write(text)
            self.scripts.append(path)
        self.prefix = os.path.join(self.cache, "agent-core-0123456789abcdef")
        self.file = "%s-%s-%x.bin" % (self.prefix, sys.implementation.cache_tag, sys.hexversion)

    def tearDown(self):
        self.dir.cleanup()

    def run_code(self, code):
        ns = {}
        for c in code:
            exec(c, ns)
        return ns

    def test_compiled_then_kept(self):
        ns = self.run_code(self.code(self.scripts, self.prefix))
        self.assertEqual((ns["A"], ns["B"]), (1, 2))
        self.assertEqual(os.listdir(self.cache), [os.path.basename(self.file)])
        # The next read takes the kept code, not the scripts: a planted
        # code object shows it.
        planted = [compile("A = 10\n", "a.py", "exec"), compile("B = 20\n", "b.py", "exec")]
        with open(self.file, "wb") as f:
            marshal.dump(planted, f)
        ns = self.run_code(self.code(self.scripts, self.prefix))
        self.assertEqual((ns["A"], ns["B"]), (10, 20))

    def test_damaged_compiled_again(self):
        for damage in (b"", b"not marshal data", marshal.dumps([compile("A = 5\n", "a.py", "exec")]), marshal.dumps("text")):
            with open(self.file, "wb") as f:
                f.write(damage)
            ns = self.run_code(self.code(self.scripts, self.prefix))
            self.assertEqual((ns["A"], ns["B"]), (1, 2), damage)
            with open(self.file, "rb") as f:
                self.assertEqual(len(marshal.load(f)), 2, damage)

    def test_other_versions_removed(self):
        tag = "%s-%x.bin" % (sys.implementation.cache_tag, sys.hexversion)
        kept = [
            "agent-core-0123456789abcdef-cpython-39-30900f0.bin",  # this bundle, another Python
            "agent-native-fedcba9876543210-" + tag,  # another bundle
            "notes.txt",
        ]
        removed = [
            "agent-core-fedcba9876543210-" + tag,  # this bundle, another snapctl
            "agent-0123456789abcdef-cpython-311-30b04f0.bin",  # the one-file agent of older versions
            "agent-core-0123456789abcdef-" + tag + ".123.tmp",  # an interrupted write
        ]
        for name in kept + removed:
            open(os.path.join(self.cache, name), "w").close()
        self.code(self.scripts, self.prefix)
        self.assertEqual(sorted(os.listdir(self.cache)), sorted(kept + [os.path.basename(self.file)]))

    def test_cache_unwritable(self):
        # A cache directory gone (or not writable): the code still comes,
        # compiled from the scripts, and nothing is left behind.
        prefix = os.path.join(self.dir.name, "gone", "agent-core-0123456789abcdef")
        ns = self.run_code(self.code(self.scripts, prefix))
        self.assertEqual((ns["A"], ns["B"]), (1, 2))
        self.assertFalse(os.path.exists(os.path.dirname(prefix)))

    def test_single_agent(self):
        single = self.ns["single_agent"]
        self.assertTrue(single("agent-0123456789abcdef-cpython-311-30b04f0.bin"))
        self.assertFalse(single("agent-core-0123456789abcdef-cpython-311-30b04f0.bin"))
        self.assertFalse(single("agent-0123456789ABCDEF-cpython-311-30b04f0.bin"))
        self.assertFalse(single("agent-0123456789abcde-cpython-311-30b04f0.bin"))


if __name__ == "__main__":
    unittest.main()
