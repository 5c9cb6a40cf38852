#!/usr/bin/env bash
# bench/hot.sh: what a hit that no snapshot takes costs a native run, the
# kernel counting the hits (docs/native.md, "Hits counted in the kernel").
#
# 1. A 4-thread program calling a tiny function (hot(), in
#    driver/testdata/native/hot.c) CALLS times in all (default 2,000,000),
#    with a breakpoint on it measured every 1,000,000th hit: the program
#    alone, `snapctl run --backend native` and `snapctl run --sites`, in
#    alternating rounds. A hit costs (run - alone) / CALLS, snapctl's
#    start and teardown included (goal: <= 3 us), in wall time and in the
#    CPU time of every process of the run (snapctl, gdb, the program,
#    heaptrack), which a loaded machine does not inflate.
# 2. `snapctl attach` to the hot program running 4 threads, taking
#    1,000,000 hits and two stops, then detaching: seconds (goal: <= 20).
#
# Each prints the median, min and max of its rounds and the ratio of the
# medians. The kernel counts the hits (snapctl's default where the
# kernel allows; the runs here set SNAPCTL_HITS=kernel unless the
# environment says otherwise); with SNAPCTL_HITS=gdb gdb counts every
# hit, for comparison. A threaded server's throughput with a breakpoint
# on its request path is bench/server.sh's.
#
# Usage: bench/hot.sh [ROUNDS [CALLS]]   (needs go, gcc, gdb, gdbserver,
# heaptrack, bc, /usr/bin/time; root or CAP_BPF and CAP_PERFMON)
set -euo pipefail
export SNAPCTL_HITS=${SNAPCTL_HITS:-kernel}

rounds=${1:-3}
calls=${2:-2000000}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/snapctl-hot.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

gcc -g -O0 -pthread -o "$tmp/hot" "$root/driver/testdata/native/hot.c"
(cd "$root" && go build -o "$tmp/snapctl" ./cmd/snapctl)

now() { echo "$EPOCHREALTIME"; }
stats() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "median %.3fs  min %.3fs  max %.3fs", m, v[1], v[NR]}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
"$tmp/snapctl" doctor 2>/dev/null | grep '  hits  ' || true

# 1. hits of hot(), natively and with --sites.
per=$((calls / 4))
# cpu FILE: the user and system seconds /usr/bin/time wrote to FILE.
cpu() { awk '{print $1 + $2}' "$1"; }
alone=() native=() sites=() calone=() cnative=() csites=()
for r in $(seq 1 "$rounds"); do
	t0=$(now)
	/usr/bin/time -f '%U %S' -o "$tmp/t0" "$tmp/hot" 4 "$per" >/dev/null
	t1=$(now)
	/usr/bin/time -f '%U %S' -o "$tmp/t1" "$tmp/snapctl" run -q --force --backend native -o "$tmp/run" "$root/bench/hot/plan.yaml" "$tmp/hot" 4 "$per" >/dev/null
	t2=$(now)
	/usr/bin/time -f '%U %S' -o "$tmp/t2" "$tmp/snapctl" run -q --force --sites -o "$tmp/sites" "$root/bench/hot/plan.yaml" "$tmp/hot" 4 "$per" >/dev/null
	t3=$(now)
	alone+=("$(echo "$t1 - $t0" | bc -l)")
	native+=("$(echo "$t2 - $t1" | bc -l)")
	sites+=("$(echo "$t3 - $t2" | bc -l)")
	calone+=("$(cpu "$tmp/t0")") cnative+=("$(cpu "$tmp/t1")") csites+=("$(cpu "$tmp/t2")")
done
for run in run sites; do
	python3 - "$tmp/$run/run.json" "$calls" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
b = m["breakpoints"][0]
if b["hits"] != int(sys.argv[2]) or len(m["stops"]) != (int(sys.argv[2]) + 999999) // 1000000:
    sys.exit(f"{sys.argv[1]}: {b['hits']} hits, {len(m['stops'])} stops")
print(f"  {sys.argv[1].split('/')[-2]}: {b['hits']} hits counted by {b.get('counted')}, {len(m['stops'])} stops")
PY
done
a=$(median "${alone[@]}")
echo "hot() alone, $calls calls in 4 threads:  $(stats "${alone[@]}")"
echo "snapctl run native:                     $(stats "${native[@]}")"
echo "snapctl run --sites:                    $(stats "${sites[@]}")"
echo "CPU seconds, all processes: alone $(median "${calone[@]}"), native $(median "${cnative[@]}"), --sites $(median "${csites[@]}")"
echo "a hit's CPU (medians, start-up included): native $(echo "($(median "${cnative[@]}") - $(median "${calone[@]}")) * 1000000 / $calls" | bc -l | xargs printf '%.2f') us, --sites $(echo "($(median "${csites[@]}") - $(median "${calone[@]}")) * 1000000 / $calls" | bc -l | xargs printf '%.2f') us"
echo "a hit (medians, start-up included): native $(echo "($(median "${native[@]}") - $a) * 1000000 / $calls" | bc -l | xargs printf '%.2f') us, --sites $(echo "($(median "${sites[@]}") - $a) * 1000000 / $calls" | bc -l | xargs printf '%.2f') us  (goal <= 3 us)"

# 2. attach to the running hot program for 1,000,000 hits.
took=()
for r in $(seq 1 "$rounds"); do
	"$tmp/hot" 4 1000000000000 >/dev/null &
	hot=$!
	pids+=("$hot")
	sleep 0.2
	t0=$(now)
	"$tmp/snapctl" attach -q --force --timeout 5m -o "$tmp/hotattach" "$root/bench/hot/attach.yaml" "$hot" >/dev/null
	t1=$(now)
	grep -q '^State:[[:space:]]*[RS]' "/proc/$hot/status" || { echo "the hot program does not run on after the attach" >&2; exit 1; }
	kill -9 "$hot"
	wait "$hot" 2>/dev/null || true
	took+=("$(echo "$t1 - $t0" | bc -l)")
done
python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['breakpoints'][0]; print(f\"  attach: {b['hits']} hits counted by {b.get('counted')}, {b['snapshots']} stops\")" "$tmp/hotattach/run.json"
echo "snapctl attach, 1,000,000 hits of a running hot(): $(stats "${took[@]}")  (goal <= 20 s)"
