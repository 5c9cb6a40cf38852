#!/usr/bin/env bash
# bench/hangs.sh: does snapctl finish? It runs `snapctl run` RUNS times in a
# row (default 15) on bench/threads with T threads (default 2) sharing S
# stops (default 100), each under a deadline (default 120s): a run still
# going at its deadline is killed with everything it started and reported
# as a hang, with the number of snapshots it had taken. Prints how many
# runs completed and exits 1 unless all did.
#
# Usage: bench/hangs.sh [--runs RUNS] [--stops S] [--threads T] [--timeout D]
# Needs go, gcc, gdb, valgrind. Figure: 15 of 15 (issue 10).
. "$(dirname "$0")/lib.sh"

runs=15 stops=100 threads=2 timeout=120s
while [ $# -gt 0 ]; do
	case $1 in
	--runs) need_value "$1" "${2:-}"; runs=$2; shift 2 ;;
	--stops) need_value "$1" "${2:-}"; stops=$2; shift 2 ;;
	--threads) need_value "$1" "${2:-}"; threads=$2; shift 2 ;;
	--timeout) need_value "$1" "${2:-}"; timeout=$2; shift 2 ;;
	*) echo "usage: bench/hangs.sh [--runs RUNS] [--stops S] [--threads T] [--timeout D]" >&2; exit 2 ;;
	esac
done
pair -stops "$stops" -hangs "$runs" -timeout "$timeout" threads "$threads" "$stops"
