#!/usr/bin/env bash
# bench/msprint.sh: `snapctl show` against ms_print on a big massif file.
#
# It generates a deterministic massif file of about 100 MB with about one
# million tree lines (bench/msprintgen), builds snapctl, then times in the
# same run, best of R runs each:
#   (a) ms_print FILE                  vs  snapctl show FILE
#   (b) ms_print --threshold=0 FILE    vs  snapctl show FILE
#       (both print every tree line; ms_print's default 1% threshold prints
#       only the lines above it but still reads them all)
# and prints the wall times, the ratios ms_print/snapctl and snapctl's peak
# memory. The target is a ratio of at least 10 for (a); the script exits 1
# below it.
#
# Usage: bench/msprint.sh [LINES [R]]   (defaults 1000000 and 3; needs go and ms_print)
set -euo pipefail

lines=${1:-1000000}
runs=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/snapctl-msprint.XXXXXX)
trap 'rm -rf "$work"' EXIT

command -v ms_print >/dev/null || { echo "msprint.sh: ms_print not found (apt install valgrind)" >&2; exit 4; }

(cd "$root" && go build -o "$work/snapctl" ./cmd/snapctl && go run ./bench/msprintgen -lines "$lines" -o "$work/big.massif")
file="$work/big.massif"
size=$(stat -c %s "$file")
treelines=$(grep -c '^ *n[0-9]' "$file")
printf 'file: %s bytes (%.1f MB), %s tree lines\n' "$size" "$(echo "$size/1000000" | bc -l)" "$treelines"

# best SECONDS of $runs runs of "$@" with stdout to /dev/null
best() {
	local min= t0 t1 d
	for _ in $(seq "$runs"); do
		t0=$(date +%s%N)
		"$@" >/dev/null
		t1=$(date +%s%N)
		d=$(( (t1 - t0) / 1000 ))
		if [ -z "$min" ] || [ "$d" -lt "$min" ]; then min=$d; fi
	done
	echo "$min" | awk '{printf "%.3f", $1 / 1e6}'
}

ms=$(best ms_print "$file")
ms0=$(best ms_print --threshold=0 "$file")
sc=$(best "$work/snapctl" show "$file")
rss=$( { /usr/bin/time -f %M "$work/snapctl" show "$file" >/dev/null; } 2>&1 | tail -1)

ratio=$(echo "$ms / $sc" | bc -l)
ratio0=$(echo "$ms0 / $sc" | bc -l)
printf 'ms_print FILE                 %8.3f s\n' "$ms"
printf 'ms_print --threshold=0 FILE   %8.3f s\n' "$ms0"
printf 'snapctl show FILE             %8.3f s   (peak RSS %s KiB)\n' "$sc" "$rss"
printf 'ratio ms_print / snapctl show: %.1fx (default threshold), %.1fx (--threshold=0)\n' "$ratio" "$ratio0"
if [ "$(echo "$ratio < 10" | bc)" = 1 ]; then
	echo "FAIL: snapctl show is less than 10x faster than ms_print"
	exit 1
fi
echo "ok: target >= 10x"
