#!/bin/sh
# record.sh regenerates the recorded massif files in this folder from the C
# and C++ fixtures next to it, with the exact commands the tests document.
# valgrind 3.19, gcc 12 (Debian 12). Run from this folder: sh record.sh
set -eu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
here=$(pwd)

gcc -g -O0 -pthread -o "$out/growth" growth.c
mkdir -p growth
valgrind --tool=massif --threshold=0 --massif-out-file="$out/growth.out" \
	"$out/growth" "$here/growth" 6

gcc -g -O0 -pthread -o "$out/threshold" threshold.c
mkdir -p threshold
valgrind --tool=massif --massif-out-file="$out/threshold.out" \
	"$out/threshold" "$here/threshold"

g++ -g -O0 -pthread -o "$out/taskpool" taskpool.cpp
mkdir -p taskpool
valgrind --tool=massif --threshold=0 --massif-out-file="$out/taskpool.out" \
	"$out/taskpool" "$here/taskpool"
