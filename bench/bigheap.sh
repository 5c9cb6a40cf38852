#!/usr/bin/env bash
# bench/bigheap.sh: snapctl on a big heap profile. bench/bigheap allocates
# one live block at each of K call sites, each D frames deep (default 1,000
# and 20), then stops S times (default 300) at tick, which adds a block at
# one site, so every snapshot differs. Paired rounds against the
# hand-written gdb script: wall and CPU ratios, snapctl's peak memory
# (VmHWM), its run folder's size and the size of the raw snapshots the
# gdb script wrote (the last round's).
#
# Usage: bench/bigheap.sh [--stops S] [--rounds R] [K [D]]
# Needs go, gcc, gdb, valgrind, and disk: one snapshot is about 1.2 KiB
# per site (12 MiB at 10,000 sites), and each side keeps S of them.
# Figures (issue 10): 1,000 x 20, 300 stops: <= 1.3x; 10,000 x 20: peak
# memory <= 64 MiB, run folder <= a quarter of the raw snapshots.
. "$(dirname "$0")/lib.sh"

stops=300 rounds=3 pos=()
while [ $# -gt 0 ]; do
	case $1 in
	--stops) need_value "$1" "${2:-}"; stops=$2; shift 2 ;;
	--rounds) need_value "$1" "${2:-}"; rounds=$2; shift 2 ;;
	[0-9]*) pos+=("$1"); shift ;;
	*) echo "usage: bench/bigheap.sh [--stops S] [--rounds R] [K [D]]" >&2; exit 2 ;;
	esac
done
sites=${pos[0]:-1000} depth=${pos[1]:-20}
pair -stops "$stops" -rounds "$rounds" -sizes bigheap "$sites" "$depth" "$stops"
