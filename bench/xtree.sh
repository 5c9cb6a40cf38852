#!/usr/bin/env bash
# bench/xtree.sh: what the live blocks per site cost.
#
# snapctl runs massif with --xtree-memory=allocs and snapshots with
# `monitor xtmemory` (curB and curBk trees) instead of `monitor
# detailed_snapshot`. This measures, as CPU seconds (user+sys of valgrind,
# vgdb and gdb, steadier than wall time on a shared machine):
#   (a) an allocation-heavy program (bench/xtree/churn.c, M malloc/free
#       pairs) under massif with --xtree-memory=none, allocs and full;
#   (b) N stops of bench/stops/stops.c under a hand-written gdb -batch
#       session, snapshotting with detailed_snapshot (xtree none) and with
#       xtmemory (xtree allocs and full);
# and prints each against the first of its group.
#
# Usage: bench/xtree.sh [M [N [ROUNDS]]]   (defaults 2000000, 1000, 3)
set -euo pipefail

m=${1:-2000000}
n=${2:-1000}
rounds=${3:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/snapctl-xtree.XXXXXX)
vgpid=
cleanup() {
	if [ -n "$vgpid" ] && kill -0 "$vgpid" 2>/dev/null; then
		kill -KILL "$vgpid" 2>/dev/null || true
		wait "$vgpid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

gcc -g -O0 -o "$work/churn" "$root/bench/xtree/churn.c"
gcc -g -O0 -o "$work/stops" "$root/bench/stops/stops.c"

# cpu CMD...: runs CMD and prints its children's user+sys CPU seconds.
cpu() {
	local before after self=$BASHPID
	before=$(awk '{print $16+$17}' "/proc/$self/stat")
	"$@"
	after=$(awk '{print $16+$17}' "/proc/$self/stat")
	echo "scale=2; ($after - $before) / $(getconf CLK_TCK)" | bc
}

churn() {
	valgrind --tool=massif --threshold=0 "--xtree-memory=$1" --xtree-memory-file="$work/xt.kcg" \
		--massif-out-file="$work/churn.out" -q "$work/churn" "$m"
}

# stops XTREE COMMAND: N stops, each running COMMAND FILE.
stops() {
	rm -rf "$work/s" && mkdir "$work/s"
	cat >"$work/s.gdb" <<GDB
set pagination off
set confirm off
set \$n = 0
break f
commands
silent
set \$n = \$n + 1
eval "monitor $2 $work/s/%d.ms", \$n
continue
end
continue
GDB
	valgrind --tool=massif --threshold=0 --fair-sched=yes "--xtree-memory=$1" --xtree-memory-file="$work/xt.kcg" \
		--vgdb=yes --vgdb-error=0 --vgdb-prefix="$work/vgdb" --massif-out-file="$work/stops.out" \
		--log-file="$work/valgrind.log" "$work/stops" "$n" &
	vgpid=$!
	for _ in $(seq 400); do
		grep -q 'TO DEBUG THIS PROCESS' "$work/valgrind.log" 2>/dev/null && break
		sleep 0.025
	done
	gdb -batch -nx -ex "target remote | vgdb --vgdb-prefix=$work/vgdb --pid=$vgpid" -x "$work/s.gdb" "$work/stops" >/dev/null 2>&1
	wait "$vgpid"
	vgpid=
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A t
for r in $(seq "$rounds"); do
	for x in none allocs full; do t[churn-$x]+="$(cpu churn $x) "; done
	t[stops-none]+="$(cpu stops none detailed_snapshot) "
	t[stops-allocs]+="$(cpu stops allocs xtmemory) "
	t[stops-full]+="$(cpu stops full xtmemory) "
done
for g in churn stops; do
	base=$(echo ${t[$g-none]} | tr ' ' '\n' | median)
	for x in none allocs full; do
		v=$(echo ${t[$g-$x]} | tr ' ' '\n' | median)
		printf '%-6s --xtree-memory=%-6s median %6.2f s CPU  (%s x none; rounds: %s)\n' "$g" "$x" "$v" \
			"$(echo "scale=2; $v / $base" | bc)" "${t[$g-$x]% }"
	done
done
echo "(churn: $m malloc/free pairs; stops: $n stops, none = detailed_snapshot, allocs and full = xtmemory)"
