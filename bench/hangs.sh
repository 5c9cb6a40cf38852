#!/usr/bin/env bash
# bench/hangs.sh: does every run end? N consecutive runs (default 15) of
# snapctl on a 2-thread target whose threads both call f, 100 stops in all
# (a plain breakpoint on f: gdb's agent takes the stops), each run under a
# hang guard of GUARD seconds (default 120). It prints each run's outcome
# and how many completed; a run the guard had to kill counts as hung.
#
# Usage: bench/hangs.sh [N [GUARD]]   (from anywhere; needs go, gcc, gdb, valgrind)
#
# Exits 0 when every run completed.
set -uo pipefail

n=${1:-15}
guard=${2:-120}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/snapctl-hangs.XXXXXX)
pid=

cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		sleep 3
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

echo "building snapctl and the target..." >&2
(cd "$root" && go build -o "$work/snapctl" ./cmd/snapctl) || exit 1
cat >"$work/threads2.c" <<'C'
/* Two threads call f() argv[1] times each (default 50). */
#include <pthread.h>
#include <stdlib.h>

volatile int sink;

void f(int i)
{
	sink = i;
}

static void *run(void *arg)
{
	int n = *(int *)arg;
	for (int i = 0; i < n; i++)
		f(i);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 50;
	pthread_t a, b;
	pthread_create(&a, NULL, run, &n);
	pthread_create(&b, NULL, run, &n);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
C
gcc -g -O0 -pthread -o "$work/threads2" "$work/threads2.c" || exit 1
cat >"$work/plan.yaml" <<'YAML'
breakpoints:
  - name: f
    location: f
YAML

completed=0
for i in $(seq "$n"); do
	out="$work/run-$i"
	start=$(date +%s)
	"$work/snapctl" run --quiet --out "$out" "$work/plan.yaml" "$work/threads2" 50 >/dev/null 2>"$out.err" &
	pid=$!
	hung=
	while kill -0 "$pid" 2>/dev/null; do
		if [ $(($(date +%s) - start)) -ge "$guard" ]; then
			# SIGTERM lets snapctl tear its children down; SIGKILL
			# if even that hangs (the next run sweeps what is left).
			hung=1
			kill -TERM "$pid" 2>/dev/null
			for _ in $(seq 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
			kill -KILL "$pid" 2>/dev/null
			break
		fi
		sleep 0.2
	done
	wait "$pid" 2>/dev/null
	rc=$?
	pid=
	secs=$(($(date +%s) - start))
	stops=$(grep -c '"seq":' "$out/run.json" 2>/dev/null)
	status=$(sed -n 's/^  "status": "\(.*\)",$/\1/p' "$out/run.json" 2>/dev/null)
	if [ -n "$hung" ]; then
		echo "run $i: HUNG after ${secs}s (stopped by the guard)"
	elif [ "$rc" = 0 ] && [ "$status" = completed ] && [ "$stops" = 100 ]; then
		completed=$((completed + 1))
		echo "run $i: completed, $stops stops, ${secs}s"
	else
		echo "run $i: exit $rc, status ${status:-none}, ${stops:-0} stops, ${secs}s: $(grep -m1 '^snapctl:' "$out.err")"
	fi
	rm -rf "$out" "$out.err"
done
echo "completed $completed/$n runs (100 stops each, 2 threads)"
[ "$completed" = "$n" ]
