#!/usr/bin/env bash
# bench/pair.sh: any target, any arguments: `snapctl run` against the
# hand-written gdb script (bench/TARGET/stops.gdb), paired rounds, wall and
# CPU ratios. The figure scripts (stops.sh, threads.sh, bigheap.sh,
# hangs.sh) are this with their targets' arguments.
#
# Usage: bench/pair.sh -stops N [-rounds R] [-sizes] [-timeout D] [-baseline xtmemory|detailed] [-plan FILE] TARGET [ARGS...]
#        bench/pair.sh -h    (all flags)
# TARGET is a folder under bench/: stops, churn, threads or bigheap.
. "$(dirname "$0")/lib.sh"
pair "$@"
