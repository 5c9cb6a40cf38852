#!/usr/bin/env bash
# bench/large.sh: snapctl on large runs. Memory must stay flat as the number
# of stops grows, and disk use follow what is kept.
#
# For each N (default 1000, 10000 and 100000) it runs `snapctl run` on
# bench/stops/stops.c, which calls f N times without touching the heap,
# with the plan bench/stops/plan.yaml (a stop at every call of f): under
# massif once with --keep-snapshots all and once with --keep-snapshots
# changed, and with the native backend. It prints for each: wall time,
# snapctl's own peak resident memory (the VmHWM of snapctl's
# /proc/PID/status, read every 10 ms by bench/peakmem, which starts
# snapctl itself and does not fork, so valgrind and gdb do not count), the
# run directory's size, the number of snapshot files kept and of stops in
# run.json. It fails when run.json does not hold all N stops or the files
# kept are not N (all), 1 (changed) and 0 (native), and prints, per
# backend and keep, the peak at each N less the peak at the smallest: the
# docs/run.md promises it within 2 MiB. With --leak, f leaks 16 bytes at
# every call: one call site grows at every stop, and snapctl's analysis
# follows it over every stop (a suspect's figures and history), where the
# target that allocates nothing leaves the analysis nothing to keep.
#
# Usage: bench/large.sh [--leak] [N...]   (from anywhere; needs go, gcc, gdb, valgrind)
# Under massif a stop takes about 2 ms (valgrind and gdb): 100,000 stops
# take about 4 minutes each; natively about a tenth of that.
set -euo pipefail

leak=
if [ "${1:-}" = --leak ]; then
	leak=leak
	shift
fi
sizes=("$@")
if [ ${#sizes[@]} -eq 0 ]; then
	sizes=(1000 10000 100000)
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

printf '%-8s %-15s %9s %13s %12s %7s %7s\n' stops "backend/keep" "wall s" "peak RSS MiB" "run dir KiB" files "in json"
declare -A peak
variants=("massif all" "massif changed" "native all")
for n in "${sizes[@]}"; do
	for v in "${variants[@]}"; do
		read -r backend keep <<<"$v"
		out="$work/run-$n-$backend-$keep"
		t0=$(date +%s%N)
		"$work/peakmem" -o "$work/peak" "$work/snapctl" run --quiet --backend "$backend" --keep-snapshots "$keep" --out "$out" \
			"$root/bench/stops/plan.yaml" "$work/stops" "$n" $leak >"$work/snapctl.out" 2>&1 &
		snappid=$!
		if ! wait "$snappid"; then
			snappid=
			echo "large.sh: snapctl run failed ($n stops, $backend, keep $keep):" >&2
			tail -20 "$work/snapctl.out" >&2
			exit 1
		fi
		hwm_kib=$(cut -d' ' -f2 "$work/peak")
		snappid=
		t1=$(date +%s%N)
		files=$(find "$out/snapshots" -type f | wc -l)
		stops=$(grep -c '^      "seq": ' "$out/run.json" || true)
		dir_kib=$(du -sk "$out" | cut -f1)
		printf '%-8d %-15s %9.1f %13.1f %12d %7d %7d\n' "$n" "$backend/$keep" "$(awk -v d=$((t1 - t0)) 'BEGIN{print d/1e9}')" \
			"$(awk -v k="$hwm_kib" 'BEGIN{print k/1024}')" "$dir_kib" "$files" "$stops"
		want=$n
		# A leak changes every snapshot: all are kept.
		[ "$keep" = changed ] && [ -z "$leak" ] && want=1
		[ "$backend" = native ] && want=0
		if [ "$stops" -ne "$n" ] || [ "$files" -ne "$want" ]; then
			echo "large.sh: run.json holds $stops stops (want $n), $files files kept (want $want)" >&2
			exit 1
		fi
		peak[$n-$backend-$keep]=$hwm_kib
		rm -rf "$out"
	done
done

lo=${sizes[0]}
for v in "${variants[@]}"; do
	read -r backend keep <<<"$v"
	for n in "${sizes[@]:1}"; do
		awk -v a="${peak[$lo-$backend-$keep]}" -v b="${peak[$n-$backend-$keep]}" -v lo="$lo" -v n="$n" -v v="$backend/$keep" \
			'BEGIN { printf "peak RSS %d stops - %d stops (%s): %+.1f MiB\n", n, lo, v, (b - a) / 1024 }'
	done
done
