# A stand-in for gdb's Python module, for the unit tests of the agent's
# files (readagent.py) under python3 outside gdb. It defines only what
# the files use as they are read: the classes they subclass, the events
# they connect to, the errors they catch, and the host charset that
# agent.py asks for. Anything else is missing (AttributeError), and every
# command but that one raises gdb.error: no test takes a result from gdb
# here. Inside gdb (gdb -batch -ex 'python ...') the real module is used.


class error(RuntimeError):
    pass


class MemoryError(error):
    pass


class GdbError(Exception):
    pass


COMMAND_DATA = 1


class Breakpoint:
    def __init__(self, *args, **kwargs):
        raise error("no gdb: a breakpoint needs gdb")


class Function:
    def __init__(self, name):
        self.name = name


class Command:
    def __init__(self, name, command_class):
        self.name = name


class _Registry:
    def connect(self, handler):
        pass


class events:
    stop = _Registry()
    exited = _Registry()
    inferior_call = _Registry()


def execute(command, from_tty=False, to_string=False):
    if command == "show host-charset":
        return 'The host character set is "auto; currently UTF-8".\n'
    raise error("no gdb: %s" % command)
