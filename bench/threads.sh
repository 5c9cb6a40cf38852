#!/usr/bin/env bash
# bench/threads.sh: snapctl's cost per stop as the number of threads grows.
# For each T given (default 8), T threads share N calls of f (default 320;
# bench/threads: each thread takes the next number from a shared counter
# until it reaches N), so each side stops exactly N times. Paired rounds
# against the hand-written gdb script; prints the wall and CPU ratios for
# each T. bench/threads.sh 1 8 64 shows how the cost grows with T.
#
# Usage: bench/threads.sh [--stops N] [--rounds R] [T...]
# Needs go, gcc, gdb, valgrind. Figure: 8 threads <= 1.5x (issue 10).
. "$(dirname "$0")/lib.sh"

stops=320 rounds=3 threads=()
while [ $# -gt 0 ]; do
	case $1 in
	--stops) need_value "$1" "${2:-}"; stops=$2; shift 2 ;;
	--rounds) need_value "$1" "${2:-}"; rounds=$2; shift 2 ;;
	[0-9]*) threads+=("$1"); shift ;;
	*) echo "usage: bench/threads.sh [--stops N] [--rounds R] [T...]" >&2; exit 2 ;;
	esac
done
[ ${#threads[@]} -gt 0 ] || threads=(8)
for t in "${threads[@]}"; do
	echo "== $t threads sharing $stops stops"
	pair -stops "$stops" -rounds "$rounds" threads "$t" "$stops"
done
