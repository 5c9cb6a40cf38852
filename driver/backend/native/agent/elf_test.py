# Unit tests of elf.py under python3 (.ci/run): its symbol and TLS
# readers on programs compiled here, checked against binutils' nm and
# readelf, which read the same files their own way.

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "gdb"))
sys.dont_write_bytecode = True  # no compiled Python in the tree
import readagent  # noqa: E402

# The program: globals of known sizes, a name that ends a longer one
# (a linker may share the tail of the string), a static name defined in
# two files (the last symbol of the name is read), and a TLS block.
MAIN = r"""
int counter_value = 3;
char buffer[100];
char big_buffer[300];
__thread long tls_words[5];
__thread char tls_aligned[3] __attribute__((aligned(64)));
static int twice[7];
int *first_twice(void) { return twice; }
int *second_twice(void);
int main(void) { tls_words[0] = 1; tls_aligned[0] = 2; return counter_value + *first_twice() + *second_twice(); }
"""
OTHER = r"""
static int twice[11];
int *second_twice(void) { return twice; }
"""


def have(*tools):
    return all(shutil.which(t) for t in tools)


@unittest.skipUnless(have("gcc", "nm", "readelf"), "needs gcc and binutils")
class ELF(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ns = readagent.native()
        cls.dir = tempfile.TemporaryDirectory()
        src = []
        for name, text in (("main.c", MAIN), ("other.c", OTHER)):
            path = os.path.join(cls.dir.name, name)
            with open(path, "w") as f:
                f.write(text)
            src.append(path)
        cls.bin = os.path.join(cls.dir.name, "prog")
        subprocess.run(["gcc", "-O0", "-o", cls.bin] + src, check=True)
        # nm -S: value, size, type, name; locals too.
        cls.nm = {}
        for line in subprocess.run(["nm", "-S", cls.bin], check=True, capture_output=True, text=True).stdout.splitlines():
            fields = line.split()
            if len(fields) == 4:
                cls.nm.setdefault(fields[3], []).append((int(fields[0], 16), int(fields[1], 16)))

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_symbols_as_nm_reads_them(self):
        names = ("counter_value", "buffer", "big_buffer", "main", "tls_words", "no_such_symbol")
        got = self.ns["elf_symbols"](self.bin, names, sizes=True)
        want = {n: self.nm[n][-1] for n in names if n in self.nm}
        self.assertEqual(got, want)
        self.assertEqual(sorted(got), sorted(names[:-1]))
        self.assertEqual(got["buffer"][1], 100)
        self.assertEqual(got["big_buffer"][1], 300)
        self.assertEqual(self.ns["elf_symbols"](self.bin, ("buffer",)), {"buffer": want["buffer"][0]})

    def test_last_of_a_name_defined_twice(self):
        got = self.ns["elf_symbols"](self.bin, ("twice",), sizes=True)
        self.assertEqual(len(self.nm["twice"]), 2)
        # nm lists by address; the symbol table's last is other.c's (the
        # link order), of 11 ints.
        self.assertEqual(got["twice"][1], 11 * 4)
        self.assertIn(got["twice"], self.nm["twice"])

    def test_tls_block_as_readelf_reads_it(self):
        out = subprocess.run(["readelf", "-lW", self.bin], check=True, capture_output=True, text=True).stdout
        tls = next(l.split() for l in out.splitlines() if l.split()[:1] == ["TLS"])
        # Type Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align
        memsz, align = int(tls[5], 16), int(tls[-1], 16)
        self.assertEqual(self.ns["elf_tls_block"](self.bin), (memsz, align))
        self.assertEqual(align, 64)
        self.assertGreaterEqual(memsz, 64 + 3)

    def test_not_an_elf_file(self):
        text = os.path.join(self.dir.name, "main.c")
        self.assertEqual(self.ns["elf_symbols"](text, ("main",)), {})
        self.assertEqual(self.ns["elf_symbols"](os.path.join(self.dir.name, "missing"), ("main",)), {})
        with self.assertRaises(self.ns["HeapUnreadable"]):
            self.ns["elf_tls_block"](text)
        # A program without TLS.
        plain = os.path.join(self.dir.name, "plain")
        src = os.path.join(self.dir.name, "plain.c")
        with open(src, "w") as f:
            f.write("int main(void) { return 0; }\n")
        subprocess.run(["gcc", "-o", plain, src], check=True)
        with self.assertRaisesRegex(self.ns["HeapUnreadable"], "no TLS block"):
            self.ns["elf_tls_block"](plain)

    def test_cut_file(self):
        # A file cut inside its section headers reads as no table.
        cut = os.path.join(self.dir.name, "cut")
        with open(self.bin, "rb") as f:
            data = f.read()
        with open(cut, "wb") as f:
            f.write(data[: len(data) - 100])
        self.assertEqual(self.ns["elf_symbols"](cut, ("main",)), {})


if __name__ == "__main__":
    unittest.main()
