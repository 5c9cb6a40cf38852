#!/usr/bin/env bash
# bench/seize.sh: what a measured stop would cost the threaded server if
# snapctl itself traced the process instead of gdb or gdbserver
# (bench/seize: PTRACE_SEIZE of every thread, the hits counted in the
# kernel, every other thread stopped with PTRACE_INTERRUPT at a measured
# hit, the measurement taken, every thread resumed; docs/facts.md, fact
# 134). The same server and load as bench/server.sh (4 workers and a
# helper thread every 5 ms, 4 connections, handle_request with every
# EVERY-th request measured), in each round, alternated:
#   alone;
#   seized: bench/seize traces the server;
#   attached: `snapctl attach` as today (gdbserver traces it), the control.
# The load is timed after 500 requests of warm-up once the kernel counts.
# Prints each round's seconds, ratios and the tracer's own summary (a
# stop's hold of the process and its parts, its processor time), then the
# median, min and max of the throughput ratios (goal >= 0.80). With
# SEIZE_MEASURE=no the seized stops take no measurement (every thread
# stopped and resumed only). With ATTACH=no the control is left out (more
# rounds in the same minutes).
#
# Usage: bench/seize.sh [ROUNDS [REQUESTS [EVERY]]]   (defaults 9, 20000,
# 100; needs go, gcc, gdb, gdbserver, libc's symbols (Debian's
# libc6-dbg); root or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE)
set -euo pipefail

rounds=${1:-9}
requests=${2:-20000}
every=${3:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/snapctl-seize.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

gcc -g -O0 -pthread -o "$tmp/server" "$root/driver/testdata/native/tcpserver.c"
gcc -O2 -pthread -o "$tmp/load" "$root/bench/hot/load.c"
(cd "$root" && go build -o "$tmp/snapctl" ./cmd/snapctl && go build -o "$tmp/seize" ./bench/seize)
printf 'backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n    every: %d\n' "$every" >"$tmp/plan.yaml"

stats() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "median %.3f  min %.3f  max %.3f", m, v[1], v[NR]}'; }
load() { "$tmp/load" "$(cat "$tmp/port")" "$@"; }
serve() {
	rm -f "$tmp/port"
	"$tmp/server" "$tmp/port" 4 &
	srv=$!
	pids+=("$srv")
	until [ -s "$tmp/port" ]; do sleep 0.01; done
}
unserve() { kill -9 "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; }

alone=() seized=() attached=() rs=() ra=()
for r in $(seq 1 "$rounds"); do
	serve
	load 4 500 >/dev/null
	a=$(load 4 "$requests")
	unserve

	serve
	rm -f "$tmp/recs.ready"
	"$tmp/seize" "$srv" handle_request "$every" "$tmp/recs" >/dev/null 2>"$tmp/err" &
	p=$!
	pids+=("$p")
	until [ -e "$tmp/recs.ready" ]; do
		kill -0 "$p" 2>/dev/null || { echo "seize ended: $(cat "$tmp/err")" >&2; exit 1; }
		sleep 0.01
	done
	load 4 500 >/dev/null
	s=$(load 4 "$requests")
	kill -INT "$p"
	wait "$p" || true
	[ -n "$(load 1 10)" ] || { echo "the server does not answer once seize detached" >&2; exit 1; }
	unserve

	if [ "${ATTACH:-}" = no ]; then
		alone+=("$a") seized+=("$s") rs+=("$(echo "$a / $s" | bc -l)")
		echo "round $r: alone $a s, seized $s s ($(printf %.3f "${rs[-1]}")); load$(uptime | sed 's/.*average//')"
		grep -v counting "$tmp/err" | sed 's/^seize: /  /'
		continue
	fi
	serve
	SNAPCTL_HITS=kernel "$tmp/snapctl" attach -q --force --timeout 10m -o "$tmp/attach" "$tmp/plan.yaml" "$srv" >/dev/null 2>"$tmp/serr" &
	p=$!
	pids+=("$p")
	until ls -l "/proc/$p/fd" 2>/dev/null | grep -q bpf_link; do
		kill -0 "$p" 2>/dev/null || { echo "snapctl ended before counting: $(cat "$tmp/serr")" >&2; exit 1; }
		load 1 1 >/dev/null
	done
	load 4 500 >/dev/null
	t=$(load 4 "$requests")
	kill -INT "$p"
	wait "$p" || true
	unserve

	alone+=("$a") seized+=("$s") attached+=("$t")
	rs+=("$(echo "$a / $s" | bc -l)") ra+=("$(echo "$a / $t" | bc -l)")
	echo "round $r: alone $a s, seized $s s ($(printf %.3f "${rs[-1]}")), attached $t s ($(printf %.3f "${ra[-1]}")); load$(uptime | sed 's/.*average//')"
	grep -v counting "$tmp/err" | sed 's/^seize: /  /'
done
echo "server alone, $requests requests:  $(stats "${alone[@]}")"
echo "seized, every $every:               $(stats "${seized[@]}")"
[ "${ATTACH:-}" = no ] || echo "attached, every $every:             $(stats "${attached[@]}")"
echo "throughput seized / alone, by round:   $(stats "${rs[@]}")  (goal >= 0.80)"
[ "${ATTACH:-}" = no ] || echo "throughput attached / alone, by round: $(stats "${ra[@]}")"
