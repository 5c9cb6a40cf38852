# Reads agent.py's code for gdb's Python (see gdb.go's agentCache): compiled by
# an earlier run when the user's cache holds it for this agent and this
# Python, else compiled from the script and kept there for the next run.


def snapctl_agent_code(script, prefix):
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
                return marshal.load(f)
        except (OSError, EOFError, ValueError, TypeError):
            pass
    with open(script) as f:
        code = compile(f.read(), "agent.py", "exec")
    if path:
        # Written whole under a name of its own, then renamed: runs that
        # start together each write theirs, and a reader sees one whole
        # file. Other agents' code (other snapctl versions) goes, and
        # what a gdb killed while writing left.
        tmp = "%s.%d.tmp" % (path, os.getpid())
        try:
            with open(tmp, "wb") as f:
                marshal.dump(code, f)
            os.replace(tmp, path)
            folder, mine = os.path.split(prefix)
            for name in os.listdir(folder):
                if name.startswith("agent-") and (name.endswith(".tmp") or name.endswith(".bin") and not name.startswith(mine + "-")):
                    os.remove(os.path.join(folder, name))
        except OSError:
            try:
                os.remove(tmp)
            except OSError:
                pass
    return code
