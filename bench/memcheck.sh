#!/usr/bin/env bash
# bench/memcheck.sh: what the memcheck backend costs against massif on the
# same plan (issue 32: "its cost is memcheck's: measure it against
# massif").
#
# Both sides are `snapctl run --quiet` of the same plan and program, only
# --backend differs: massif (a snapshot per stop, `monitor xtmemory`)
# against memcheck (the same snapshot, memcheck's leak search of the
# whole heap, and the walk of what holds each reachable record that
# grew). The default target, bench/churn (bench/churn/plan.yaml, a stop
# at each of N calls of handle, default 200), grows a table of records
# that stays reachable through the global `table` and leaks 8 bytes a
# call: every stop has a reachable record that grew, so every stop walks.
# --target threads runs bench/threads (bench/threads/plan.yaml) instead.
#
# The sides alternate, massif first, over R rounds (default 3); a run is
# timed with bash's EPOCHREALTIME, nothing forks inside the timed window
# but snapctl itself. After each run, outside the window, it checks that
# run.json says completed with N stops. It prints each round, then the
# median, min and max wall time of each side and the ratio
# memcheck/massif of the medians, with the lowest and highest ratio of
# one round's pair. No goal: the figure is what memcheck costs.
#
# Usage: bench/memcheck.sh [--stops N] [--rounds R] [--target churn|threads]
# Needs go, gcc, gdb, valgrind, python3.
#
# Measured on the 2-core shared development machine, valgrind 3.19, gdb
# 13.1, 2026-11-28, other developers' test runs beside it:
#   bench/memcheck.sh --stops 100 --rounds 3 (load average about 13)
#   churn, 100 stops: massif 1.02 s (1.01-1.44), memcheck 2.59 s (2.45-2.81)
#   memcheck/massif 2.54 (rounds 1.96-2.54): about 16 ms more a stop
#   bench/memcheck.sh --target threads --stops 100 --rounds 3 (load 13-21)
#   threads, 100 stops: massif 1.44 s (0.97-1.76), memcheck 22.01 s (14.55-31.82)
#   memcheck/massif 15.33 (rounds 14.94-18.11): about 200 ms more a stop,
#   8 threads' stacks scanned by every leak search (fact 108).
#   Before a growing record was walked at its 1st, 2nd, 4th... growing stop
#   only, every stop walked it: threads 14.67 (rounds 14.67-33.71) at load
#   about 30, up to 2.4 s a stop; churn 4.34 (2.48-5.21) at load 22.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
stops=200 rounds=3 target=churn
while [ $# -gt 0 ]; do
	case $1 in
	--stops) stops=${2:?--stops needs a value}; shift 2 ;;
	--rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
	--target) target=${2:?--target needs a value}; shift 2 ;;
	*) echo "usage: bench/memcheck.sh [--stops N] [--rounds R] [--target churn|threads]" >&2; exit 2 ;;
	esac
done
case $target in
churn | threads) ;;
*) echo "memcheck.sh: --target must be churn or threads, got $target" >&2; exit 2 ;;
esac

work=$(mktemp -d /tmp/snapctl-bench-memcheck.XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM HUP
(cd "$root" && go build -o "$work/snapctl" ./cmd/snapctl)
gcc -g -O0 -pthread -o "$work/$target" "$root/bench/$target/$target.c"
plan=$root/bench/$target/plan.yaml
args=("$stops")
[ "$target" = threads ] && args=(8 "$stops") # 8 threads share the calls

# run BACKEND ROUND: one timed run; prints its seconds.
run() {
	local out=$work/run-$1-$2 start end
	start=$EPOCHREALTIME
	"$work/snapctl" run --quiet --backend "$1" --out "$out" "$plan" "$work/$target" "${args[@]}" >/dev/null
	end=$EPOCHREALTIME
	python3 - "$out/run.json" "$stops" <<'PY' || { echo "memcheck.sh: $1 run $2 is not complete" >&2; exit 1; }
import json, sys
m = json.load(open(sys.argv[1]))
assert m["status"] == "completed" and len(m["stops"]) == int(sys.argv[2]), (m["status"], len(m["stops"]))
PY
	rm -rf "$out"
	python3 -c "print('%.3f' % ($end - $start))"
}

massif=() memcheck=()
for r in $(seq 1 "$rounds"); do
	a=$(run massif "$r")
	b=$(run memcheck "$r")
	massif+=("$a") memcheck+=("$b")
	echo "round $r: massif $a s, memcheck $b s, memcheck/massif $(python3 -c "print('%.2f' % ($b / $a))")"
done
python3 - "${massif[*]}" "${memcheck[*]}" "$target" "$stops" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ratios = [y / x for x, y in zip(a, b)]
print("%s, %s stops: massif %.2f s (%.2f-%.2f), memcheck %.2f s (%.2f-%.2f)" % (
    sys.argv[3], sys.argv[4], statistics.median(a), min(a), max(a), statistics.median(b), min(b), max(b)))
print("memcheck/massif %.2f (rounds %.2f-%.2f)" % (statistics.median(b) / statistics.median(a), min(ratios), max(ratios)))
PY
