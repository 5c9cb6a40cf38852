# The memcheck backend's measurement at a stop, as a gdb command:
#
#   snapctl-memcheck PATH
#
# writes the heap per allocation stack into PATH (`monitor xtmemory`,
# massif's format, as under massif) and what memcheck's leak search says
# of it into PATH.leak, as JSON: every loss record (`monitor leak_check
# full reachable any`: bytes and blocks per allocation stack and kind,
# definitely, indirectly, possibly lost or still reachable), and, for each
# still reachable record that grew since the previous stop, what holds a
# block of it: the chain of blocks that point at it (`who_points_at`),
# walked up to a root (a global variable, a thread's stack, a register).
# Success prints nothing; a failure raises gdb.GdbError with what
# valgrind said. docs/design.md, "The memcheck backend"; facts
# 106 to 110.

import json
import re
import time

import gdb

# How much a stop walks (every step is a scan of the program's memory
# through vgdb, fact 109): the reachable records walked (those
# that grew most), the blocks listed to pick samples from, the blocks
# followed from a sample to a root, and the time all walks of a stop may
# take.
WALK_RECORDS = 8
WALK_LISTED = 1000
# A record that keeps growing is walked at its 1st, 2nd, 4th, 8th...
# growing stop (at least every WALK_EVERY_MAX-th): its holder rarely
# changes, and a walk along a long list costs up to WALK_SECONDS a stop.
WALK_EVERY_MAX = 64
WALK_DEPTH = 64
WALK_SECONDS = 5.0

XTREE_REPORT = "xtree memory report: "

_PREFIX = re.compile(r"^==\d+== ?")
_NUM = r"([\d,]+)(?: \([+-]?[\d,]+\))?"
_RECORD = re.compile(
    r"^" + _NUM + r" (?:\(([\d,]+) direct, ([\d,]+) indirect\) )?bytes in " + _NUM +
    r" blocks are (definitely lost|indirectly lost|possibly lost|still reachable)" +
    r"(?: \(via heuristic [^)]*\))? in (?:loss record )?(\d+) of (\d+)")
_FRAME = re.compile(r"^\s*(?:at|by) 0x([0-9A-Fa-f]+): (.*)$")
_BLOCK = re.compile(r"^0x([0-9A-Fa-f]+)\[(\d+)\]")
_POINTS = re.compile(r"^(?:\*0x([0-9A-Fa-f]+)|(.*?)) points at 0x([0-9A-Fa-f]+)")
_INSIDE = re.compile(r"^\s*Address 0x([0-9A-Fa-f]+) is (\d+) bytes inside a block of size (\d+)")
_DATASYM = re.compile(r'inside data symbol "([^"]+)"')


def _int(s):
    return int(s.replace(",", ""))


def _lines(out):
    return [_PREFIX.sub("", line) for line in out.splitlines()]


def frame_of(text, addr):
    """A frame of valgrind's stack as run.json's sites have it: `fn
    (file:line)`, `fn (in /lib/x.so)`, `???`."""
    f = {"function": text, "addr": "0x" + addr.lower()}
    i = text.rfind(" (")
    if i > 0 and text.endswith(")"):
        f["function"], where = text[:i], text[i + 2:-1]
        if where.startswith("in "):
            f["object"] = where[3:]
        else:
            j = where.rfind(":")
            if j > 0 and where[j + 1:].isdigit():
                f["file"], f["line"] = where[:j], int(where[j + 1:])
    return f


def parse_records(out):
    """The loss records of a leak search's output, in its order."""
    records, cur = [], None
    for line in _lines(out):
        m = _RECORD.match(line)
        if m:
            total, direct = _int(m.group(1)), m.group(2)
            cur = {"kind": m.group(5), "bytes": _int(direct) if direct else total,
                   "blocks": _int(m.group(4)), "record": int(m.group(6)), "stack": []}
            records.append(cur)
            continue
        f = _FRAME.match(line)
        if f and cur is not None:
            cur["stack"].append(frame_of(f.group(2), f.group(1)))
        elif not line.strip():
            cur = None
    return records


def site_of(stack):
    """The first frame of an allocation stack that is not valgrind's own
    replacement of the allocator."""
    for f in stack:
        if "vgpreload" not in f.get("object", ""):
            return f
    return stack[0] if stack else {"function": "???"}


def key_of(rec):
    return (rec["kind"], tuple((f.get("function"), f.get("file"), f.get("line")) for f in rec["stack"]))


def monitor(cmd):
    return gdb.execute("monitor " + cmd, to_string=True)


def pointers(addr, size):
    """Who points into the block at addr: [(pointer address or None,
    description lines)], a pointer address of None for a register."""
    found, cur = [], None
    for line in _lines(monitor("who_points_at 0x%x %d" % (addr, size))):
        m = _POINTS.match(line.strip())
        if m and not line.startswith("Searching"):
            cur = (int(m.group(1), 16) if m.group(1) else None, [line.strip() if m.group(2) else ""])
            found.append(cur)
            continue
        if cur is not None and line.strip():
            cur[1].append(line.strip())
    return found


def root_of(ptr, text):
    """A root as run.json's holder has it: a global variable by name
    (with its declaration's file and line, as gdb knows it), a thread's
    stack, a register, or what valgrind said."""
    joined = " ".join(t for t in text if t)
    m = _DATASYM.search(joined)
    if m:
        root = {"kind": "global", "name": m.group(1)}
        try:
            sym = gdb.lookup_global_symbol(m.group(1)) or gdb.lookup_static_symbol(m.group(1))
            if sym is not None and sym.symtab is not None:
                root["file"], root["line"] = sym.symtab.filename.rsplit("/", 1)[-1], sym.line
        except gdb.error:
            pass
        return root
    if ptr is None:
        return {"kind": "register", "name": text[0].split(" points at")[0] if text else "a register", "text": joined}
    if "stack" in joined:
        # "Address 0x5240eb8 is on thread 2's stack in frame #1, created
        # by worker (stackroot.c:6)" (fact 110).
        m = re.search(r"created by (.+?)(?: \(([^()]*):(\d+)\))?$", joined)
        thread = re.search(r"on thread (\d+)'s stack", joined)
        root = {"kind": "stack", "name": "a stack", "text": joined}
        if m:
            root["name"] = "a local of %s" % m.group(1)
            if m.group(2):
                root["name"] += " (%s:%s)" % (m.group(2), m.group(3))
                root["file"], root["line"] = m.group(2), int(m.group(3))
        if thread:
            root["name"] += " on thread %s's stack" % thread.group(1)
        return root
    return {"kind": "other", "name": joined or "0x%x" % ptr, "text": joined}


def walk(addr, size, depth, deadline):
    """Follows the pointers to the block at addr up to a root: the root
    (None when none was reached within depth blocks or by deadline) and
    the chain of blocks from the root down to the sample, grouped by
    their site."""
    chain, seen = [], {addr}
    for _ in range(depth):
        if time.monotonic() > deadline:
            break
        found = pointers(addr, size)
        holder = None
        for ptr, text in found:
            inside = next((m for m in map(_INSIDE.match, text) if m), None)
            if inside is None:
                return root_of(ptr, text), chain
            if holder is None:
                start = int(inside.group(1), 16) - int(inside.group(2))
                stack = [frame_of(f.group(2), f.group(1)) for f in map(_FRAME.match, text) if f]
                holder = (start, int(inside.group(3)), stack)
        if holder is None or holder[0] in seen:
            return None, chain
        seen.add(holder[0])
        addr, size, stack = holder
        site = site_of(stack)
        if chain and chain[0]["site"] == site:
            chain[0]["blocks"] += 1
        else:
            chain.insert(0, {"site": site, "blocks": 1, "stack": stack})
    return None, chain


class Memcheck(gdb.Command):
    """snapctl-memcheck PATH: the stop's heap per allocation stack into
    PATH and memcheck's leak search of it into PATH.leak."""

    def __init__(self):
        super().__init__("snapctl-memcheck", gdb.COMMAND_DATA)
        self.before = {}
        # By record key: (growing stops to skip before the next walk,
        # the interval after it).
        self.due = {}

    def invoke(self, arg, from_tty):
        path = arg.strip()
        out = monitor("xtmemory " + path)
        bad = [line.strip() for line in out.splitlines() if line.strip() and XTREE_REPORT not in line]
        if bad:
            raise gdb.GdbError("\n".join(bad))
        out = monitor("leak_check full reachable any")
        records = parse_records(out)
        if not records and "LEAK SUMMARY" not in out and "All heap blocks were freed" not in out:
            raise gdb.GdbError(out.strip() or "leak_check printed nothing")
        now = {key_of(r): r["bytes"] for r in records}
        grown = [r for r in records if r["kind"] == "still reachable" and r["bytes"] > self.before.get(key_of(r), 0)]
        grown.sort(key=lambda r: r["bytes"] - self.before.get(key_of(r), 0), reverse=True)
        holders = []
        deadline = time.monotonic() + WALK_SECONDS
        for r in grown[:WALK_RECORDS]:
            skip, every = self.due.get(key_of(r), (0, 1))
            if skip > 0:
                self.due[key_of(r)] = (skip - 1, every)
                continue
            self.due[key_of(r)] = (every - 1, min(2 * every, WALK_EVERY_MAX))
            h = self.held(r, deadline)
            if h is not None:
                holders.append(h)
        self.before = now
        with open(path + ".leak", "w") as f:
            json.dump({"records": records, "holders": holders}, f)

    def held(self, r, deadline):
        """What holds record r: walked from its first and its last listed
        block (a list that grows at its head or at its tail has one of
        them next to its root), a few blocks from each first, then as far
        as WALK_DEPTH; the first walk that reaches a root, else the
        longest."""
        listed = [m for m in map(_BLOCK.match, _lines(monitor("block_list %d limited %d" % (r["record"], WALK_LISTED)))) if m]
        if not listed:
            return None
        samples = [listed[-1], listed[0]] if len(listed) > 1 else [listed[0]]
        site = site_of(r["stack"])
        best = None
        for depth in (8, WALK_DEPTH):
            for m in samples:
                sample, size = int(m.group(1), 16), int(m.group(2))
                root, chain = walk(sample, size, depth, deadline)
                # The sample itself ends the chain.
                if chain and chain[-1]["site"] == site:
                    chain[-1]["blocks"] += 1
                else:
                    chain.append({"site": site, "blocks": 1, "stack": r["stack"]})
                h = {"record": r["record"], "sample": "0x%x" % sample, "root": root, "chain": chain}
                if root is not None:
                    return h
                if best is None or sum(c["blocks"] for c in chain) > sum(c["blocks"] for c in best["chain"]):
                    best = h
        return best

Memcheck()
