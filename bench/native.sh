#!/usr/bin/env bash
# bench/native.sh: what the native backend costs a compute-bound program.
#
# Times (a) the program alone and (b) `snapctl run --backend native` with
# a breakpoint that stops STOPS times (default 100), startup included
# (gdb's start, reading the binary, the agent, the teardown). The rounds
# alternate a and b; it prints each one's median, min and max wall time,
# the ratio of the medians b/a, and the lowest and highest ratio of one
# round's b to its a. The target is at most 1.25 (moonshot 1.05).
#
# Usage: bench/native.sh [STOPS [ROUNDS [WORK [THREADS]]]]   (needs go, gcc, gdb, bc)
# WORK is the loop iterations between stops (default 4000000: the program
# alone runs about 1.4 s). THREADS (default 1) is the program's threads,
# main included; the others wait idle (bench/native-threads.sh).
#
# Measured on the 2-core shared development machine, load average below 1:
#   bench/native.sh 100 15           alone 1.54 s, native 1.88 s: 1.222 (rounds 1.147-1.300)
#                                    (2026-11-26, load 0.6; 1.225 earlier at 1.38 s alone)
#   bench/native.sh 100 5 12000000   alone 4.12 s, native 4.45 s: 1.080 (rounds 1.072-1.084)
# (before the agent called mallinfo2() itself and read its code from the
# cache: 1.28 and 1.12; a run while the shared host was busier: 1.261.)
# A native run costs about 0.18 s more than the program alone before its
# first stop, half of it gdb's own start, and each stop 1.3-1.4 ms: the
# agent's direct call to mallinfo2() and gdb stepping over the breakpoint
# (docs/design.md, "Backends"). Since then snapctl reads the arenas from
# memory where libc6-dbg is installed (0.15-0.3 ms a stop on this heap;
# bench/arenas.sh); not measured again on a quiet machine.
set -euo pipefail

stops=${1:-100}
rounds=${2:-5}
work=${3:-4000000}
threads=${4:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/snapctl-native.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

gcc -g -O0 -pthread -o "$tmp/compute" "$root/bench/native/compute.c"
(cd "$root" && go build -o "$tmp/snapctl" ./cmd/snapctl)

# now prints a monotonic clock in seconds: bash's EPOCHREALTIME needs no fork.
now() { echo "$EPOCHREALTIME"; }

alone=() native=()
for r in $(seq 1 "$rounds"); do
	t0=$(now)
	"$tmp/compute" "$stops" "$work" "$threads" >/dev/null
	t1=$(now)
	"$tmp/snapctl" run -q --force -o "$tmp/run" "$root/bench/native/plan.yaml" "$tmp/compute" "$stops" "$work" "$threads" >/dev/null
	t2=$(now)
	alone+=("$(echo "$t1 - $t0" | bc -l)")
	native+=("$(echo "$t2 - $t1" | bc -l)")
done
got=$(python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print(sum(1 for s in m['stops'] if 'heap_in_use_bytes' in s['memory']))" "$tmp/run/run.json")
if [ "$got" != "$stops" ]; then
	echo "native run took $got stops with the allocator's figures, want $stops" >&2
	exit 1
fi

stats() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "median %.3fs  min %.3fs  max %.3fs", m, v[1], v[NR]}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }

echo "program alone:          $(stats "${alone[@]}")"
echo "snapctl native, $stops stops: $(stats "${native[@]}")"
ratios=()
for i in "${!alone[@]}"; do ratios+=("$(echo "${native[$i]} / ${alone[$i]}" | bc -l)"); done
echo "ratio (medians): $(echo "$(median "${native[@]}") / $(median "${alone[@]}")" | bc -l | xargs printf '%.3f')  (target <= 1.25)"
echo "ratio per round: $(printf '%s\n' "${ratios[@]}" | sort -g | awk '{v[NR]=$1} END {printf "min %.3f  max %.3f", v[1], v[NR]}')"
echo "per stop ($threads threads): $(echo "($(median "${native[@]}") - $(median "${alone[@]}")) * 1000 / $stops" | bc -l | xargs printf '%.2f') ms, startup included"
