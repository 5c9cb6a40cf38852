#!/usr/bin/env bash
# bench/bigheap.sh: snapctl on a big heap profile. bench/bigheap allocates
# one live block at each of K call sites, each D frames deep (default 1,000
# and 20), then stops S times (default 300) at tick, which adds a block at
# one site, so every snapshot differs. Paired rounds against hand-written
# gdb scripts: wall and CPU ratios, snapctl's peak memory (VmHWM), its run
# folder's size and the size of the raw snapshots the gdb script wrote
# (the last round's). Two pairings, each of the same snapshot on both
# sides:
#
#   detailed: snapctl with valgrind.blocks: false (plan-bytes.yaml)
#             against the manual hunt, `monitor detailed_snapshot`
#             (stops-detailed.gdb): live bytes per stack;
#   xtmemory: snapctl's default plan (plan.yaml) against `monitor
#             xtmemory` (stops.gdb): live bytes and blocks per stack.
#
# Usage: bench/bigheap.sh [--stops S] [--rounds R]
#                         [--baseline detailed|xtmemory|both] [--plan FILE] [K [D]]
# --plan replaces the plan of every pairing (a file in bench/bigheap), to
# put e.g. the default plan against the detailed_snapshot script.
# Needs go, gcc, gdb, valgrind, and disk: one snapshot is about 1.1 KiB
# per site and frame chain (2.1 KiB with blocks), and each side keeps S.
# Goals: issue 22: detailed, 1,000 x 20, 300 stops: <= 1.2x; issue 10:
# 10,000 x 20: peak memory <= 64 MiB, run folder <= a quarter of the raw
# snapshots.
. "$(dirname "$0")/lib.sh"

stops=300 rounds=3 baseline=both plan= pos=()
usage="usage: bench/bigheap.sh [--stops S] [--rounds R] [--baseline detailed|xtmemory|both] [--plan FILE] [K [D]]"
while [ $# -gt 0 ]; do
	case $1 in
	--stops) need_value "$1" "${2:-}"; stops=$2; shift 2 ;;
	--rounds) need_value "$1" "${2:-}"; rounds=$2; shift 2 ;;
	--baseline) need_value "$1" "${2:-}"; baseline=$2; shift 2 ;;
	--plan) need_value "$1" "${2:-}"; plan=$2; shift 2 ;;
	[0-9]*) pos+=("$1"); shift ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
case $baseline in
detailed) pairings=(detailed) ;;
xtmemory) pairings=(xtmemory) ;;
both) pairings=(detailed xtmemory) ;;
*) echo "$usage" >&2; exit 2 ;;
esac
sites=${pos[0]:-1000} depth=${pos[1]:-20}
for b in "${pairings[@]}"; do
	p=$plan
	if [ -z "$p" ]; then
		if [ "$b" = detailed ]; then p=plan-bytes.yaml; else p=plan.yaml; fi
	fi
	echo "== $b script against snapctl with $p"
	pair -stops "$stops" -rounds "$rounds" -sizes -baseline "$b" -plan "$p" bigheap "$sites" "$depth" "$stops"
done
