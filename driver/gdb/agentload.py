# Reads the code of the agent's scripts for gdb's Python (see gdb.go's
# readScripts): compiled by an earlier run when the user's cache holds it
# for these scripts and this Python, else compiled from the scripts and
# kept there for the next run.


def snapctl_agent_code(scripts, prefix):
    """The code of each file of scripts, in order. prefix names the
    bundle's files in the cache, agent-BUNDLE-HASH."""
    import marshal
    import os
    import sys

    # Bytecode changes between Python versions, and once in a while
    # between releases of one: the release is in the name too.
    tag = sys.implementation.cache_tag
    path = "%s-%s-%x.bin" % (prefix, tag, sys.hexversion) if tag else None
    if path:
        try:
            with open(path, "rb") as f:
                code = marshal.load(f)
            if isinstance(code, list) and len(code) == len(scripts):
                return code
        except (OSError, EOFError, ValueError, TypeError):
            pass
    code = []
    for script in scripts:
        with open(script) as f:
            code.append(compile(f.read(), os.path.basename(script), "exec"))
    if path:
        # Written whole under a name of its own, then renamed: runs that
        # start together each write theirs, and a reader sees one whole
        # file. The bundle's code of other versions (other snapctl
        # versions) goes, and what a gdb killed while writing left, and
        # the single agent of snapctl before its bundles (agent-HASH-).
        tmp = "%s.%d.tmp" % (path, os.getpid())
        try:
            with open(tmp, "wb") as f:
                marshal.dump(code, f)
            os.replace(tmp, path)
            folder, mine = os.path.split(prefix)
            bundle = mine.rsplit("-", 1)[0] + "-"
            for name in os.listdir(folder):
                if not name.startswith("agent-"):
                    continue
                if name.endswith(".tmp") or name.endswith(".bin") and (
                        name.startswith(bundle) and not name.startswith(mine + "-") or single_agent(name)):
                    os.remove(os.path.join(folder, name))
        except OSError:
            try:
                os.remove(tmp)
            except OSError:
                pass
    return code


def single_agent(name):
    """Whether name is the compiled agent of a snapctl whose agent was
    one file: agent-HASH-TAG-VERSION-RELEASE.bin (agent-0123456789abcdef-
    cpython-311-30b04f0.bin), HASH 16 hex digits."""
    fields = name.split("-")
    return len(fields) == 5 and len(fields[1]) == 16 and all(c in "0123456789abcdef" for c in fields[1])
