#!/usr/bin/env bash
# bench/stops.sh: snapctl's cost per stop on a single-threaded program,
# against the hand-written gdb script that only breaks, snapshots and
# continues, both on valgrind massif through vgdb.
#
# The default target, bench/churn, is shaped like a real program: each of
# the N calls of handle (default 1,500) allocates and frees short-lived
# buffers, files a record in a table that grows, evicts old records and
# leaks 8 bytes. --target stops times the trivial target instead (f
# allocates nothing). The two sides alternate, gdb script then snapctl,
# over R rounds (default 3); it prints each round and the median, min and
# max of the ratio snapctl/gdb for wall time and for CPU time (user+sys of
# each side's whole process tree), and snapctl's peak memory.
#
# Usage: bench/stops.sh [--stops N] [--rounds R] [--target churn|stops]
# Needs go, gcc, gdb, valgrind. Figure: <= 1.2x (issue 10).
. "$(dirname "$0")/lib.sh"

stops=1500 rounds=3 target=churn
while [ $# -gt 0 ]; do
	case $1 in
	--stops) need_value "$1" "${2:-}"; stops=$2; shift 2 ;;
	--rounds) need_value "$1" "${2:-}"; rounds=$2; shift 2 ;;
	--target) need_value "$1" "${2:-}"; target=$2; shift 2 ;;
	*) echo "usage: bench/stops.sh [--stops N] [--rounds R] [--target churn|stops]" >&2; exit 2 ;;
	esac
done
case $target in
churn | stops) ;;
*) echo "stops.sh: --target must be churn or stops, got $target" >&2; exit 2 ;;
esac
pair -stops "$stops" -rounds "$rounds" "$target" "$stops"
