#!/bin/sh
# record.sh regenerates the recorded massif files in this folder from the C
# and C++ fixtures next to it, with the valgrind, gdb and heaptrack on PATH.
# Every command that made a file is below, run from a scratch directory so
# that cmd: lines read "./leak" and not a temporary path.
#
#   cd testdata/massif && ./record.sh
#
# Recorded with valgrind-3.19.0, GNU gdb 13.1, heaptrack 1.4.0, gcc 12.2.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

cc="gcc -g -O0 -pthread"
cxx="g++ -g -O0 -pthread"
$cc -o leak "$here/leak.c"
$cc -o threads "$here/threads.c"
$cc -o threshold "$here/threshold.c"
$cc -o ticker "$here/ticker.c"
gcc -g -O2 -o inline "$here/inline.c"
$cxx -o taskpool "$here/taskpool.cpp"

vg="valgrind -q --tool=massif"

# A normal massif run: many snapshots, every one detailed, a peak.
$vg --threshold=0 --detailed-freq=1 --massif-out-file=leak.massif ./leak
# Massif's defaults: mostly empty snapshots, a few detailed, a peak.
$vg --massif-out-file=leak.default.massif ./leak
# --pages-as-heap: the root reads "(page allocation syscalls) ...".
$vg --pages-as-heap=yes --threshold=0 --detailed-freq=1 --massif-out-file=leak.pages.massif ./leak
# The xtmemory report in massif format: one snapshot per event.
$vg --xtree-memory=full --xtree-memory-file=leak.xt.ms --massif-out-file=/dev/null ./leak
# Threads, C++ through the standard library, an inlined frame.
$vg --threshold=0 --detailed-freq=1 --massif-out-file=threads.massif ./threads
$vg --threshold=0 --detailed-freq=1 --massif-out-file=taskpool.massif ./taskpool
$vg --threshold=0 --detailed-freq=1 --massif-out-file=inline.massif ./inline
# Default --threshold=1.0: small sites fold into below-threshold lines.
$vg --detailed-freq=1 --massif-out-file=threshold.massif ./threshold

# Files written on demand through gdb and vgdb, as snapctl does, at
# leak.c:28 (after the ten requests).
valgrind -q --tool=massif --vgdb=yes --vgdb-error=0 --vgdb-prefix=./vgdb \
	--threshold=0 --massif-out-file=/dev/null --xtree-memory=allocs ./leak \
	>valgrind.log 2>&1 &
vgpid=$!
while ! grep -q 'TO DEBUG THIS PROCESS' valgrind.log 2>/dev/null; do sleep 0.1; done
gdb -nx -batch -q ./leak \
	-ex "target remote | vgdb --vgdb-prefix=./vgdb --pid=$vgpid" \
	-ex 'break leak.c:28' -ex continue \
	-ex "monitor detailed_snapshot $work/leak.detailed.massif" \
	-ex "monitor all_snapshots $work/leak.all_snapshots.massif" \
	-ex "monitor xtmemory $work/leak.monitor.ms" \
	-ex continue >gdb.log 2>&1
wait $vgpid

# heaptrack's massif exporter: the header comes last, time is in seconds
# with a fraction, and the threshold has no '%'. (With --massif-threshold 0
# it writes child counts it does not honour, so the default is kept.)
heaptrack -o ticker ./ticker >/dev/null 2>&1
heaptrack_print -f ticker.zst -M ticker.heaptrack.massif >/dev/null

# Compressed, as snapctl run keeps its snapshots: read by their magic bytes.
gzip -n -k leak.monitor.ms leak.xt.ms

for f in *.massif *.ms *.ms.gz; do
	cp "$f" "$here/$f"
done
ls -l "$here"/*.massif "$here"/*.ms "$here"/*.ms.gz
