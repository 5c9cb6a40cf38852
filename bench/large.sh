#!/usr/bin/env bash
# bench/large.sh: snapctl on large runs. Memory must stay flat as the number
# of stops grows, and disk use follow what is kept.
#
# For each N (default 1000 and 10000) it runs `snapctl run` on
# bench/stops/stops.c, which calls f N times without touching the heap,
# with the plan bench/stops/plan.yaml (a snapshot at every call of f),
# once with --keep-snapshots all and once with --keep-snapshots changed,
# and prints for each: wall time, snapctl's peak resident memory (VmHWM,
# read from /proc every 10 ms by bench/peakmem, which does not fork), the
# run directory's size, the number
# of snapshot files kept and of stops in run.json. It fails when run.json
# does not hold all N stops or the files kept are not N (all) and 1
# (changed), and prints the ratio of peak memory at the largest N to the
# smallest.
#
# Usage: bench/large.sh [N...]   (from anywhere; needs go, gcc, gdb, valgrind)
# 10,000 stops take about 20 s each (valgrind and gdb, about 2 ms a stop).
set -euo pipefail

sizes=("$@")
if [ ${#sizes[@]} -eq 0 ]; then
	sizes=(1000 10000)
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/snapctl-large.XXXXXX)
snappid=

cleanup() {
	if [ -n "$snappid" ] && kill -0 "$snappid" 2>/dev/null; then
		kill -TERM "$snappid" 2>/dev/null || true
		wait "$snappid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "building snapctl and the target..." >&2
(cd "$root" && go build -o "$work/snapctl" ./cmd/snapctl)
(cd "$root" && go build -o "$work/peakmem" ./bench/peakmem)
gcc -g -O0 -o "$work/stops" "$root/bench/stops/stops.c"

printf '%-8s %-8s %9s %13s %12s %7s %7s\n' stops keep "wall s" "peak RSS MiB" "run dir KiB" files "in json"
declare -A peak
for n in "${sizes[@]}"; do
	for keep in all changed; do
		out="$work/run-$n-$keep"
		t0=$(date +%s%N)
		"$work/peakmem" -o "$work/peak" "$work/snapctl" run --quiet --keep-snapshots "$keep" --out "$out" \
			"$root/bench/stops/plan.yaml" "$work/stops" "$n" >"$work/snapctl.out" 2>&1 &
		snappid=$!
		if ! wait "$snappid"; then
			snappid=
			echo "large.sh: snapctl run failed ($n stops, keep $keep):" >&2
			tail -20 "$work/snapctl.out" >&2
			exit 1
		fi
		hwm_kib=$(cut -d' ' -f2 "$work/peak")
		snappid=
		t1=$(date +%s%N)
		files=$(find "$out/snapshots" -type f | wc -l)
		stops=$(grep -c '^      "seq": ' "$out/run.json" || true)
		dir_kib=$(du -sk "$out" | cut -f1)
		printf '%-8d %-8s %9.1f %13.1f %12d %7d %7d\n' "$n" "$keep" "$(awk -v d=$((t1 - t0)) 'BEGIN{print d/1e9}')" \
			"$(awk -v k="$hwm_kib" 'BEGIN{print k/1024}')" "$dir_kib" "$files" "$stops"
		want=$n
		[ "$keep" = changed ] && want=1
		if [ "$stops" -ne "$n" ] || [ "$files" -ne "$want" ]; then
			echo "large.sh: run.json holds $stops stops (want $n), $files files kept (want $want)" >&2
			exit 1
		fi
		peak[$n-$keep]=$hwm_kib
		rm -rf "$out"
	done
done

lo=${sizes[0]} hi=${sizes[${#sizes[@]}-1]}
for keep in all changed; do
	awk -v a="${peak[$lo-$keep]}" -v b="${peak[$hi-$keep]}" -v lo="$lo" -v hi="$hi" -v k="$keep" \
		'BEGIN { printf "peak RSS %d stops / %d stops (keep %s): %.2f\n", hi, lo, k, b / a }'
done
