#!/usr/bin/env bash
# bench/native-threads.sh: what a native stop costs as the program's
# threads grow. With one thread the agent measures inside the breakpoint's
# stop() (a direct call to mallinfo2()); with more, gdb stops every thread
# and the agent reads glibc's arenas from memory at snapctl's command
# (docs/design.md, "Backends"). Runs bench/native.sh with 1, 8 and 64
# threads (main computes, the others wait idle, each with an arena of its
# own while there are enough) and prints each one's ratio and cost per
# stop.
#
# Usage: bench/native-threads.sh [STOPS [ROUNDS [WORK]]]   (defaults 100 5 4000000)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
for threads in 1 8 64; do
	echo "== $threads threads"
	"$root/bench/native.sh" "${1:-100}" "${2:-5}" "${3:-4000000}" "$threads" | grep -E 'ratio \(medians\)|per stop'
done
