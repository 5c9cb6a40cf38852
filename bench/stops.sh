#!/usr/bin/env bash
# bench/stops.sh: snapctl's own cost per stop, against the manual way.
#
# Over N stops (default 1500) of a trivial breakpoint, it times
#   (a) a hand-written `gdb -batch` session on valgrind massif through vgdb
#       whose breakpoint `commands` only take the snapshot and continue, and
#   (b) `snapctl run` with the equivalent plan (bench/stops/plan.yaml),
# both started the same way (valgrind --vgdb=yes --vgdb-error=0, massif
# --threshold=0 --fair-sched=yes --xtree-memory=allocs), and prints both
# wall times and the ratio b/a. The target is a ratio of at most 1.3.
#
# Usage: bench/stops.sh [N [ROUNDS]]   (from anywhere; needs go, gcc, gdb, valgrind)
#
# With ROUNDS > 1 (default 1) the two alternate; it prints each one's best
# and median time and the median of the rounds' ratios, which evens out a
# machine whose load changes during the measurement.
set -euo pipefail

n=${1:-1500}
rounds=${2:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
# A private directory without spaces: monitor commands split on spaces.
work=$(mktemp -d /tmp/snapctl-bench.XXXXXX)
vgpid=
snappid=
peak_kib=0

cleanup() {
	if [ -n "$snappid" ] && kill -0 "$snappid" 2>/dev/null; then
		kill -TERM "$snappid" 2>/dev/null || true
		wait "$snappid" 2>/dev/null || true
	fi
	if [ -n "$vgpid" ] && kill -0 "$vgpid" 2>/dev/null; then
		kill -KILL "$vgpid" 2>/dev/null || true
		wait "$vgpid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

now() { date +%s%N; }

echo "building snapctl and the target..." >&2
(cd "$root" && go build -o "$work/snapctl" ./cmd/snapctl)
gcc -g -O0 -o "$work/stops" "$root/bench/stops/stops.c"

# (a) The manual way, scripted, taking the snapshots snapctl takes
# (xtmemory under --xtree-memory=allocs: bytes and live blocks per site).
cat >"$work/stops.gdb" <<GDB
set pagination off
set confirm off
set \$n = 0
break f
commands
silent
set \$n = \$n + 1
eval "monitor xtmemory $work/gdb/s%d.ms", \$n
continue
end
continue
GDB

# run_gdb times the hand-written session into $ta (nanoseconds).
run_gdb() {
	rm -rf "$work/gdb" && mkdir "$work/gdb"
	rm -f "$work/valgrind.log"
	local t0 t1 got
	t0=$(now)
	valgrind --tool=massif --threshold=0 --fair-sched=yes --xtree-memory=allocs --xtree-memory-file="$work/xt.kcg" --vgdb=yes --vgdb-error=0 \
		--vgdb-prefix="$work/vgdb" --massif-out-file="$work/massif.out" \
		--log-file="$work/valgrind.log" "$work/stops" "$n" &
	vgpid=$!
	for _ in $(seq 400); do
		grep -q 'TO DEBUG THIS PROCESS' "$work/valgrind.log" 2>/dev/null && break
		sleep 0.025
	done
	gdb -batch -nx -ex "target remote | vgdb --vgdb-prefix=$work/vgdb --pid=$vgpid" \
		-x "$work/stops.gdb" "$work/stops" >"$work/gdb.out" 2>&1
	wait "$vgpid"
	vgpid=
	t1=$(now)
	got=$(find "$work/gdb" -name '*.massif' | wc -l)
	if [ "$got" -ne "$n" ]; then
		echo "stops.sh: the gdb script took $got snapshots, want $n" >&2
		cat "$work/gdb.out" >&2
		exit 1
	fi
	ta=$((t1 - t0))
}

# run_snapctl times snapctl run into $tb (nanoseconds).
run_snapctl() {
	rm -rf "$work/run"
	local t0 t1 got
	t0=$(now)
	"$work/snapctl" run --quiet --out "$work/run" "$root/bench/stops/plan.yaml" "$work/stops" "$n" >"$work/snapctl.out" 2>&1 &
	snappid=$!
	# snapctl's peak resident memory (VmHWM), read until it exits: it
	# must stay flat as the number of stops grows.
	local hwm
	while hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$snappid/status" 2>/dev/null) && [ -n "$hwm" ]; do
		peak_kib=$hwm
		sleep 0.1
	done
	if ! wait "$snappid"; then
		snappid=
		echo "stops.sh: snapctl run failed:" >&2
		cat "$work/snapctl.out" >&2
		exit 1
	fi
	snappid=
	t1=$(now)
	got=$(find "$work/run/snapshots" -type f | wc -l)
	if [ "$got" -ne "$n" ]; then
		echo "stops.sh: snapctl kept $got snapshots, want $n" >&2
		exit 1
	fi
	tb=$((t1 - t0))
}

# Alternate the two so that a change in the machine's load hits both. Each
# round's pair gives a ratio; the summary shows the best and the median
# time of each and the median of the rounds' ratios, which a machine whose
# load changes between rounds disturbs least.
tas=() tbs=() ratios=() peak=0
for round in $(seq "$rounds"); do
	echo "round $round/$rounds: hand-written gdb script, $n stops..." >&2
	run_gdb
	echo "round $round/$rounds: snapctl run, $n stops..." >&2
	run_snapctl
	tas+=("$ta") tbs+=("$tb")
	ratios+=("$(awk -v a="$ta" -v b="$tb" 'BEGIN { printf "%.3f", b / a }')")
	if [ "$peak_kib" -gt "$peak" ]; then peak=$peak_kib; fi
	echo "round $round/$rounds: gdb $((ta / 1000000)) ms, snapctl $((tb / 1000000)) ms, ratio ${ratios[-1]}" >&2
done

# best and median of a list of numbers.
best() { printf '%s\n' "$@" | sort -g | head -1; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

awk -v a="$(best "${tas[@]}")" -v b="$(best "${tbs[@]}")" \
	-v ma="$(median "${tas[@]}")" -v mb="$(median "${tbs[@]}")" -v mr="$(median "${ratios[@]}")" \
	-v n="$n" -v r="$rounds" -v m="$peak" 'BEGIN {
	printf "stops:              %d, %d round(s); startup included\n", n, r
	printf "hand-written gdb:   best %.2f s (%.2f ms/stop), median %.2f s (%.2f ms/stop)\n", a / 1e9, a / 1e6 / n, ma / 1e9, ma / 1e6 / n
	printf "snapctl run:        best %.2f s (%.2f ms/stop), median %.2f s (%.2f ms/stop)\n", b / 1e9, b / 1e6 / n, mb / 1e9, mb / 1e6 / n
	printf "ratio snapctl/gdb:  %.2f of the best times, %.2f median of the rounds (target <= 1.30)\n", b / a, mr
	printf "snapctl peak RSS:   %.1f MiB (the highest of the rounds)\n", m / 1024
}'
