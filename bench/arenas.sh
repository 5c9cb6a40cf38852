#!/usr/bin/env bash
# bench/arenas.sh: what reading glibc's arenas costs a native stop on a
# fragmented heap (driver/testdata/native/frag.c: BLOCKS small blocks,
# every other one freed, so that half of them wait in the tcaches and the
# fastbins).
#
# 1. The reading alone (bench/arenas, internal/arenas as at a stop), at
#    1,000,000 and 10,000,000 free chunks, paired round by round against
#    mallinfo2() called by the program itself on the same heap: wall and
#    CPU time, median, min and max of each and of their wall ratio; the
#    figures must be equal field for field. The CPU times hold up better
#    than wall times on a loaded machine.
# 2. A whole run: `snapctl run --backend native` with a stop in each of
#    STOPS rounds on a heap of 1,600,000 blocks (1,000,000 free chunks),
#    with 1, 8 and 64 threads (each round a thread more starts,
#    fragments an arena and exits), paired against the program alone:
#    the ratio of the medians, the lowest and highest ratio of one round,
#    and what a stop cost (the difference over the stops), with the
#    median of the stops' own heap_read_seconds.
#
# Usage: bench/arenas.sh [--rounds R] [--stops S] [--skip-10m]
#                        (defaults 5 and 5; needs go, gcc, gdb, libc6-dbg)
. "$(dirname "$0")/lib.sh"

rounds=5 stops=5 big=1
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) need_value "$1" "${2:-}"; rounds=$2; shift 2 ;;
	--stops) need_value "$1" "${2:-}"; stops=$2; shift 2 ;;
	--skip-10m) big=0; shift ;;
	*) echo "usage: bench/arenas.sh [--rounds R] [--stops S] [--skip-10m]" >&2; exit 2 ;;
	esac
done
tmp=$(mktemp -d /tmp/snapctl-arenas.XXXXXX)
trap 'rm -rf "$tmp" "$pairdir"' EXIT
gcc -g -O0 -pthread -o "$tmp/frag" "$root/driver/testdata/native/frag.c"
(cd "$root" && go build -o "$tmp/arenas" ./bench/arenas && go build -o "$tmp/snapctl" ./cmd/snapctl)

echo "== the reading alone against mallinfo2() in the program, one thread"
# The fixture's main thread and the thread that passes in each round
# share BLOCKS: 2,000,000 give 1,000,000 free chunks and a quarter more.
"$tmp/arenas" -rounds "$rounds" "$tmp/frag" 1600000 1
[ "$big" = 1 ] && "$tmp/arenas" -rounds 3 "$tmp/frag" 16000000 1

now() { echo "$EPOCHREALTIME"; }
stats() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "median %.3fs  min %.3fs  max %.3fs", m, v[1], v[NR]}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
printf 'backend: native\nbreakpoints:\n  - name: checkpoint\n    location: checkpoint\n' >"$tmp/plan.yaml"

for threads in 1 8 64; do
	echo "== a run with $stops stops, $threads threads, 1,000,000 free chunks"
	alone=() native=() reads=()
	for r in $(seq 1 "$rounds"); do
		t0=$(now)
		"$tmp/frag" 1600000 "$threads" "$stops" - - small >/dev/null
		t1=$(now)
		"$tmp/snapctl" run -q --force -o "$tmp/run" "$tmp/plan.yaml" "$tmp/frag" 1600000 "$threads" "$stops" - - small >/dev/null
		t2=$(now)
		alone+=("$(echo "$t1 - $t0" | bc -l)")
		native+=("$(echo "$t2 - $t1" | bc -l)")
		reads+=($(python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
s = [x['memory'] for x in m['stops']]
bad = [x for x in s if 'mallinfo2' not in x]
if len(s) != int(sys.argv[2]) or bad:
    sys.exit('%d stops, %d without the allocator figures' % (len(s), len(bad)))
print(sorted(x['heap_read_seconds'] for x in s)[len(s) // 2])" "$tmp/run/run.json" "$stops"))
	done
	ratios=()
	for i in "${!alone[@]}"; do ratios+=("$(echo "${native[$i]} / ${alone[$i]}" | bc -l)"); done
	echo "program alone:           $(stats "${alone[@]}")"
	echo "snapctl native:          $(stats "${native[@]}")"
	echo "ratio (medians): $(echo "$(median "${native[@]}") / $(median "${alone[@]}")" | bc -l | xargs printf '%.3f')  per round: $(printf '%s\n' "${ratios[@]}" | sort -g | awk '{v[NR]=$1} END {printf "min %.3f  max %.3f", v[1], v[NR]}')"
	echo "per stop: $(echo "($(median "${native[@]}") - $(median "${alone[@]}")) * 1000 / $stops" | bc -l | xargs printf '%.1f') ms, startup included; the reading at a stop (heap_read_seconds): median $(echo "$(median "${reads[@]}") * 1000" | bc -l | xargs printf '%.1f') ms, $(printf '%s\n' "${reads[@]}" | sort -g | awk '{printf "%s%.1f", (NR>1 ? " " : ""), $1*1000}') ms by round"
done
