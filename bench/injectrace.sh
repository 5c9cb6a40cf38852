#!/usr/bin/env bash
# bench/injectrace.sh: how often heaptrack's own injection kills a process
# whose threads allocate, and how often once libunwind is set up first as
# snapctl does (docs/facts.md, fact 151). No gdb: each try is a child that
# dlopens libheaptrack_inject.so and calls heaptrack_inject itself while
# four threads allocate (bench/injectrace/injectrace.c). The two ways
# alternate in ROUNDS rounds (default 4) of TRIES tries each (default 500).
#
# Usage: bench/injectrace.sh        Needs gcc and heaptrack (x86-64).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(mktemp -d)/injectrace
trap 'rm -rf "$(dirname "$bin")"' EXIT
gcc -O1 -pthread -o "$bin" bench/injectrace/injectrace.c -ldl
for _ in $(seq "${ROUNDS:-4}"); do
	"$bin" "${TRIES:-500}"
	"$bin" "${TRIES:-500}" preset
done
