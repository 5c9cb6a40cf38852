# callclib.py: calls keep_item of the C library argv[1] argv[2] times.
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
for i in range(int(sys.argv[2])):
    lib.keep_item(i)
