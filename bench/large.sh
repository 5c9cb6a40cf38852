#!/usr/bin/env bash
# bench/large.sh: snapctl on large runs. Memory must stay flat as the number
# of stops grows, on every backend and stop path, and disk use follow what
# is kept.
#
# For each N (default 1000, 20000 and 100000) it runs snapctl on
# bench/stops/stops.c, which calls f without touching the heap, with a stop
# at every call of f (bench/stops/plan.yaml) or at every other call
# (`every: 2`, so that the kernel counts the hits between), along each
# path (all by default, --paths picks some, comma-separated):
#
#   massif/all       run, massif, --keep-snapshots all
#   massif/changed   run, massif, --keep-snapshots changed
#   memcheck         run, memcheck
#   native/gdb       run, native, a stop at every hit: gdb counts
#   native/kernel    run, native, every: 2: the kernel counts (root)
#   native/forced    native/kernel with SNAPCTL_HITS=gdb: gdb counts
#   sites            run --sites (heaptrack)
#   attach/gdb       attach (gdbserver) to stops.c running, every hit
#   attach/kernel    attach, every: 2: the kernel counts (root)
#   attach/sites     attach --sites
#
# The attach paths start stops.c calling f until it is killed (a call every
# 50 us), attach with max_hits ending the run after N stops, and kill it.
# It prints for each: wall time, snapctl's own peak resident memory (the
# VmHWM of snapctl's /proc/PID/status, read every 10 ms by bench/peakmem,
# which starts snapctl itself and does not fork, so valgrind, gdb,
# gdbserver and heaptrack do not count), the run directory's size, the
# number of snapshot files kept and of stops in run.json, and which way
# the hits were counted (run.json's `counted`). It fails when run.json does
# not hold all N stops, a path counted another way than it names, or the
# files kept are not N (massif all), 1 (massif changed, no leak) and 0
# (native without --sites); then it prints, per path, the peak at each N
# less the peak at the smallest: docs/run.md promises it within 2 MiB.
# With --leak, f leaks 16 bytes at every call: one call site grows at
# every stop, and snapctl's analysis follows it over every stop (a
# suspect's figures and history), where the target that allocates nothing
# leaves the analysis nothing to keep. --snapctl measures a snapctl built
# before (e.g. the one before a change) instead of building this tree's.
# --log DIR keeps bench/peakmem's sampling of each run in DIR/N-PATH.log
# (every 10 s and at each rise of the peak: seconds, VmHWM and VmRSS in
# KiB, the stops spooled so far), so that a run cut short still tells its
# peak at the stops it reached.
#
# Usage: bench/large.sh [--leak] [--paths P,...] [--snapctl BIN] [--log DIR] [N...]
#        (from anywhere; needs go, gcc, gdb, gdbserver, valgrind, heaptrack)
# A stop takes about 0.7 ms natively, 1.7 ms with --sites, 4 ms attached
# (gdbserver), 7 ms attached with --sites and 6 ms under memcheck or
# massif (2-core machine, shared): 100,000 stops take 1 to 12 minutes a path.
set -euo pipefail

leak= paths= snapctl= logdir=
all=(massif/all massif/changed memcheck native/gdb native/kernel native/forced sites attach/gdb attach/kernel attach/sites)
usage() { echo "usage: bench/large.sh [--leak] [--paths P,...] [--snapctl BIN] [--log DIR] [N...]; paths: ${all[*]}" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--leak) leak=leak; shift ;;
	--paths) [ -n "${2:-}" ] || usage; paths=$2; shift 2 ;;
	--snapctl) [ -n "${2:-}" ] || usage; snapctl=$(realpath "$2"); shift 2 ;;
	--log) [ -n "${2:-}" ] || usage; mkdir -p "$2"; logdir=$(realpath "$2"); shift 2 ;;
	-*) usage ;;
	*) break ;;
	esac
done
sizes=("$@")
if [ ${#sizes[@]} -eq 0 ]; then
	sizes=(1000 20000 100000)
fi
variants=("${all[@]}")
if [ -n "$paths" ]; then
	IFS=, read -r -a variants <<<"$paths"
	for v in "${variants[@]}"; do
		[[ " ${all[*]} " == *" $v "* ]] || usage
	done
fi
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/snapctl-large.XXXXXX)
snappid= targetpid=

cleanup() {
	if [ -n "$snappid" ] && kill -0 "$snappid" 2>/dev/null; then
		kill -TERM "$snappid" 2>/dev/null || true
		wait "$snappid" 2>/dev/null || true
	fi
	if [ -n "$targetpid" ]; then
		kill -KILL "$targetpid" 2>/dev/null || true
		wait "$targetpid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "building snapctl and the target..." >&2
if [ -n "$snapctl" ]; then
	cp "$snapctl" "$work/snapctl"
else
	(cd "$root" && go build -o "$work/snapctl" ./cmd/snapctl)
fi
(cd "$root" && go build -o "$work/peakmem" ./bench/peakmem)
gcc -g -O0 -o "$work/stops" "$root/bench/stops/stops.c"

# plan FILE EVERY [MAX_HITS]: a stop at every EVERY-th call of f.
plan() {
	printf 'breakpoints:\n  - name: f\n    location: f\n' >"$1"
	[ "$2" -gt 1 ] && printf '    every: %d\n' "$2" >>"$1"
	[ -n "${3:-}" ] && printf '    max_hits: %d\n' "$3" >>"$1"
	return 0
}

printf '%-8s %-15s %9s %13s %12s %7s %7s %8s\n' stops path "wall s" "peak RSS MiB" "run dir KiB" files "in json" counted
declare -A peak
for n in "${sizes[@]}"; do
	for v in "${variants[@]}"; do
		out="$work/run-$n-${v//\//-}"
		every=1 env=() args=() attach= counted=gdb
		case $v in
		massif/*) args=(--backend massif --keep-snapshots "${v#massif/}") ;;
		memcheck) args=(--backend memcheck) ;;
		native/gdb) args=(--backend native) ;;
		native/kernel) args=(--backend native) every=2 counted=kernel ;;
		native/forced) args=(--backend native) every=2 env=(SNAPCTL_HITS=gdb) ;;
		sites) args=(--sites) ;;
		attach/gdb) attach=1 ;;
		attach/kernel) attach=1 every=2 counted=kernel ;;
		attach/sites) attach=1 args=(--sites) ;;
		esac
		pm=("$work/peakmem" -o "$work/peak")
		if [ -n "$logdir" ]; then
			pm+=(-log "$logdir/$n-${v//\//-}.log" -lines "$out/.stops-*.jsonl")
		fi
		t0=$(date +%s%N)
		# An attach that could not start is tried again, up to three
		# times, saying why: on a loaded machine gdb can lose its
		# handshake with gdbserver, which measures nothing of snapctl's
		# memory.
		for try in 1 2 3; do
			if [ -n "$attach" ]; then
				# max_hits counts every hit: the N-th stop is hit EVERY*(N-1)+1.
				plan "$work/plan.yaml" "$every" $((every * (n - 1) + 1))
				"$work/stops" -1 $leak >/dev/null 2>&1 &
				targetpid=$!
				env "${env[@]}" "${pm[@]}" "$work/snapctl" attach --quiet --force "${args[@]}" --out "$out" \
					"$work/plan.yaml" "$targetpid" >"$work/snapctl.out" 2>&1 &
			else
				plan "$work/plan.yaml" "$every"
				env "${env[@]}" "${pm[@]}" "$work/snapctl" run --quiet --force "${args[@]}" --out "$out" \
					"$work/plan.yaml" "$work/stops" $((every * n)) $leak >"$work/snapctl.out" 2>&1 &
			fi
			snappid=$!
			ok=1
			wait "$snappid" || ok=
			snappid=
			if [ -n "$attach" ]; then
				if [ -n "$ok" ] && ! kill -0 "$targetpid" 2>/dev/null; then
					echo "large.sh: the attached process died ($n stops, $v)" >&2
					exit 1
				fi
				kill -KILL "$targetpid" 2>/dev/null || true
				wait "$targetpid" 2>/dev/null || true
				targetpid=
				if [ -z "$ok" ] && [ "$try" -lt 3 ] && grep -q '"stops": \[\]' "$out/run.json" 2>/dev/null; then
					echo "large.sh: the attach failed before its first stop ($n stops, $v), trying again: $(tail -1 "$work/snapctl.out" | cut -c1-200)" >&2
					continue
				fi
			fi
			break
		done
		if [ -z "$ok" ]; then
			echo "large.sh: snapctl failed ($n stops, $v):" >&2
			tail -20 "$work/snapctl.out" >&2
			exit 1
		fi
		hwm_kib=$(cut -d' ' -f2 "$work/peak")
		t1=$(date +%s%N)
		files=$(find "$out/snapshots" -type f 2>/dev/null | wc -l)
		stops=$(grep -c '^      "seq": ' "$out/run.json" || true)
		how=$(sed -n 's/^ *"counted": "\([a-z]*\)".*/\1/p' "$out/run.json" | head -1)
		dir_kib=$(du -sk "$out" | cut -f1)
		printf '%-8d %-15s %9.1f %13.1f %12d %7d %7d %8s\n' "$n" "$v" "$(awk -v d=$((t1 - t0)) 'BEGIN{print d/1e9}')" \
			"$(awk -v k="$hwm_kib" 'BEGIN{print k/1024}')" "$dir_kib" "$files" "$stops" "${how:--}"
		want=
		case $v in
		massif/all) want=$n ;;
		# A leak changes every snapshot: all are kept.
		massif/changed) want=1; [ -n "$leak" ] && want=$n ;;
		native/* | attach/gdb | attach/kernel) want=0 ;;
		esac
		if [ "$stops" -ne "$n" ] || { [ -n "$want" ] && [ "$files" -ne "$want" ]; }; then
			echo "large.sh: run.json holds $stops stops (want $n), $files files kept (want ${want:-any}) ($v)" >&2
			exit 1
		fi
		if [[ $v != massif/* && $v != memcheck && "$how" != "$counted" ]]; then
			echo "large.sh: the hits were counted by ${how:-nothing}, not $counted ($v)" >&2
			exit 1
		fi
		peak[$n-$v]=$hwm_kib
		rm -rf "$out"
	done
done

lo=${sizes[0]}
for v in "${variants[@]}"; do
	for n in "${sizes[@]:1}"; do
		awk -v a="${peak[$lo-$v]}" -v b="${peak[$n-$v]}" -v lo="$lo" -v n="$n" -v v="$v" \
			'BEGIN { printf "peak RSS %d stops - %d stops (%s): %+.1f MiB\n", n, lo, v, (b - a) / 1024 }'
	done
done
