# Reads the agent's files into one namespace as gdb does (gdb.go's
# readScripts), for their unit tests (*_test.py) under python3: agent.py,
# then a backend's part in the order its Go file lists it (part: the
# []gdb.Script of files it embeds, such as native's agent.go). Outside
# gdb, the stand-in of standin/gdb.py takes the place of gdb's module.

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CORE = os.path.join(HERE, "agent.py")
NATIVE = os.path.join(ROOT, "driver", "backend", "native", "agent.go")

try:
    import gdb  # noqa: F401 (inside gdb)
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "standin"))
    import gdb  # noqa: F401


def part_files(go_file):
    """A backend's part in the order gdb reads it: the files go_file
    embeds (//go:embed FILE, var NAME string), as its list of
    gdb.Script ({Name: ..., Source: NAME}) orders them."""
    folder = os.path.dirname(go_file)
    with open(go_file) as f:
        text = f.read()
    files = dict((var, name) for name, var in re.findall(r"//go:embed ([\w/]+\.py)\nvar (\w+) string", text))
    return [os.path.join(folder, files[var]) for var in re.findall(r"Source: (\w+)\}", text)]


def read(*paths):
    """The namespace of paths read in order."""
    ns = {"__name__": "snapctl_agent"}
    for path in paths:
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), ns)
    return ns


def core():
    return read(CORE)


def part(go_file):
    """The namespace of agent.py and the backend's part that go_file
    lists, read in order."""
    return read(CORE, *part_files(go_file))


def native():
    return part(NATIVE)
