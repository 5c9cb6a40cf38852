#!/bin/sh
# examples/demo.sh: build snapctl and the demo server (examples/server.c),
# then hunt the server's leak with examples/plan.yaml, once with each
# backend: massif (the call sites, under valgrind), memcheck (the same
# sites, and whether their blocks are lost or what holds them), native
# (resident memory and glibc's allocator, no valgrind), and natively once
# more with --sites (the call sites again, recorded by heaptrack, no
# valgrind).
# `make demo` runs this script; it needs only go, gcc, gdb, valgrind and
# heaptrack (no make). Everything it builds
# and writes goes to examples/build/.
set -eu
cd "$(dirname "$0")/.."
build=examples/build
mkdir -p "$build"
set -x
go build -o "$build/snapctl" ./cmd/snapctl
gcc -g -O0 -pthread -o "$build/server" examples/server.c
rm -rf "$build/run" "$build/run-memcheck" "$build/run-native" "$build/run-sites"
"$build/snapctl" run --out "$build/run" examples/plan.yaml "$build/server"
# The same plan under valgrind's memcheck: the same sites, and for each
# whether its blocks are lost, and what holds the ones still reachable.
"$build/snapctl" run --backend memcheck --out "$build/run-memcheck" examples/plan.yaml "$build/server"
# The same plan without valgrind: resident memory and glibc's allocator at
# each stop, and a verdict (leak, allocator retention, outside the heap).
"$build/snapctl" run --backend native --out "$build/run-native" examples/plan.yaml "$build/server"
# The same plan natively with the call sites: heaptrack records every
# allocation's stack, and the suspects are massif's, at native speed.
"$build/snapctl" run --sites --out "$build/run-sites" examples/plan.yaml "$build/server"
