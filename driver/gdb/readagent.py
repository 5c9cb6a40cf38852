# Reads the agent's files into one namespace as gdb does (gdb.go's
# readScripts), for their unit tests (*_test.py) under python3: agent.py,
# then a backend's part in the order its Go file lists it (native's
# agent.go). Outside gdb, the stand-in of standin/gdb.py takes the place
# of gdb's module.

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CORE = os.path.join(HERE, "agent.py")

try:
    import gdb  # noqa: F401 (inside gdb)
except ImportError:
    sys.path.insert(0, os.path.join(HERE, "standin"))
    import gdb  # noqa: F401


def native_files():
    """The native backend's files in the order gdb reads them, as
    native/agent.go lists them."""
    folder = os.path.join(ROOT, "driver", "backend", "native")
    with open(os.path.join(folder, "agent.go")) as f:
        text = f.read()
    files = dict((var, name) for name, var in re.findall(r"//go:embed (agent/\w+\.py)\nvar (\w+) string", text))
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


def native():
    return read(CORE, *native_files())
