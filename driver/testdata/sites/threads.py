# threads.py: loads the C library argv[1] (ctlib.c) with ctypes and runs
# argv[2] rounds: in each, four threads call keep_record and use_scratch
# once, then wait while the main thread calls round_done(round).
import ctypes
import sys
import threading

THREADS = 4

lib = ctypes.CDLL(sys.argv[1])
rounds = int(sys.argv[2])
ended = threading.Barrier(THREADS + 1)
go = threading.Barrier(THREADS + 1)


def worker(t):
    for _ in range(rounds):
        lib.keep_record(t)
        lib.use_scratch(t)
        ended.wait()
        go.wait()


threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
for th in threads:
    th.start()
for r in range(rounds):
    ended.wait()
    lib.round_done(r)
    go.wait()
for th in threads:
    th.join()
