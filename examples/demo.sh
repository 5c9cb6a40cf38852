#!/bin/sh
# examples/demo.sh: build snapctl and the demo server (examples/server.c),
# then hunt the server's leak with examples/plan.yaml, once with each
# backend: massif (the call sites, under valgrind) and native (resident
# memory and glibc's allocator, no valgrind). `make demo` runs this script;
# it needs only go, gcc, gdb and valgrind (no make). Everything it builds
# and writes goes to examples/build/.
set -eu
cd "$(dirname "$0")/.."
build=examples/build
mkdir -p "$build"
set -x
go build -o "$build/snapctl" ./cmd/snapctl
gcc -g -O0 -pthread -o "$build/server" examples/server.c
rm -rf "$build/run" "$build/run-native"
"$build/snapctl" run --out "$build/run" examples/plan.yaml "$build/server"
# The same plan without valgrind: resident memory and glibc's allocator at
# each stop, and a verdict (leak, allocator retention, outside the heap).
"$build/snapctl" run --backend native --out "$build/run-native" examples/plan.yaml "$build/server"
