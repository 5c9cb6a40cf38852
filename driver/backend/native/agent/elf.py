# The native backend's part of snapctl's agent: the ELF reading it needs
# to find glibc's allocator without debug information (arena.py): a
# symbol table's values and sizes, and a file's TLS block. Pure Python,
# no gdb: elf_test.py reads real compiled programs with it.
#
# Read into the namespace of driver/gdb/agent.py with the other files of
# native/agent.go's list.

import struct

import gdb


def elf_symbols(path, names, sizes=False):
    """The values of the symbols names in the symbol table (.symtab) of
    the 64-bit little-endian ELF file at path, as a dict, with sizes as
    (value, size) pairs; {} when there is no such file or table. It reads the section headers, the table and
    its strings, not the whole file (a program with its debug
    information can be hundreds of megabytes)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:6] != b"\x7fELF\x02\x01":
                return {}
            shoff, = struct.unpack_from("<Q", head, 0x28)
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            f.seek(shoff)
            sections = f.read(shentsize * shnum)
            out = {}
            for i in range(shnum):
                sh = i * shentsize
                if struct.unpack_from("<I", sections, sh + 4)[0] != 2:  # SHT_SYMTAB
                    continue
                off, size, link = struct.unpack_from("<QQI", sections, sh + 0x18)
                entsize = struct.unpack_from("<Q", sections, sh + 0x38)[0] or 24
                stroff, strsize = struct.unpack_from("<QQ", sections, link * shentsize + 0x18)
                f.seek(off)
                table = f.read(size)
                f.seek(stroff)
                strings = f.read(strsize)
                for n in names:
                    sym = last_symbol(table, entsize, strings, n.encode())
                    if sym >= 0:
                        value, size = struct.unpack_from("<QQ", table, sym + 8)
                        out[n] = (value, size) if sizes else value
            return out
    except (OSError, struct.error):
        return {}


def elf_tls_block(path):
    """The size in memory and the alignment of the TLS block (PT_TLS) of
    the 64-bit little-endian ELF file at path."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:6] != b"\x7fELF\x02\x01":
                raise HeapUnreadable("%s is not a 64-bit little-endian ELF file" % path)
            phoff, = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            f.seek(phoff)
            headers = f.read(phentsize * phnum)
    except OSError as e:
        raise HeapUnreadable("reading %s: %s" % (path, e))
    for i in range(phnum):
        if struct.unpack_from("<I", headers, i * phentsize)[0] == 7:  # PT_TLS
            return struct.unpack_from("<QQ", headers, i * phentsize + 0x28)
    raise HeapUnreadable("%s has no TLS block" % path)


def last_symbol(table, entsize, strings, name):
    """The offset in table, a symbol table, of the last symbol called
    name, -1 when there is none. The searches run in C, not a Python loop
    over every symbol (libc's ten thousand took 1.5 ms more; a static
    program's table can hold ten times as many). A name's text may end a
    longer one's (a linker may share the tail), so every place where it
    ends a string is tried."""
    last = -1
    text = name + b"\0"
    at = strings.find(text)
    while at >= 0:
        key = struct.pack("<I", at)  # st_name, the first field
        pos = table.find(key)
        while pos >= 0:
            if pos % entsize == 0:
                last = max(last, pos)
            pos = table.find(key, pos + 1)
        at = strings.find(text, at + 1)
    return last
