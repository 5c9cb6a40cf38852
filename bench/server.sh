#!/usr/bin/env bash
# bench/server.sh: what a breakpoint on a threaded server's request path
# costs its throughput, the kernel counting the hits (docs/native.md,
# "Hits counted in the kernel").
#
# The threaded TCP server (driver/testdata/native/tcpserver.c: 4 workers,
# and a housekeeping thread that starts a short-lived thread every 5 ms)
# answers REQUESTS requests (default 20,000) of a 4-connection loopback
# load (bench/hot/load.c, one connection a request), in each round:
#   alone;
#   attached: `snapctl attach` (gdbserver traces it, the default) with a
#     breakpoint on handle_request, every EVERY-th request measured
#     (default 100), gdb taking the stops (SNAPCTL_STOPS=gdb);
#   seized: the same with SNAPCTL_STOPS=snapctl: gdb sets the run up and
#     leaves, and snapctl takes the measured stops as the server's own
#     tracer (docs/design.md, "The stop taken by snapctl");
#   run: `snapctl run --backend native` of the server with the same plan
#     (left out with RUN=no).
# The load is timed once the kernel counts the hits (snapctl holds its
# probe), after 500 requests of warm-up, so that snapctl's start-up is
# not in it. The throughput ratio is alone's seconds over the run's,
# paired round by round (goal: >= 0.80); the script prints the median,
# min and max of each side's seconds and of the ratios, and each mode's
# measured stops and what a stop cost the load (the difference of the
# medians over the stops).
#
# With SNAPCTL_HITS=gdb, gdb counts every hit, for comparison. With
# BASELINE=path/to/snapctl, each round also runs attached and run with
# that build, right after this tree's, and the script prints this tree's
# seconds over the baseline's, paired round by round (below 1: faster).
#
# Usage: bench/server.sh [ROUNDS [REQUESTS [EVERY]]]   (defaults 5, 20000,
# 100; needs go, gcc, gdb, gdbserver; root or CAP_BPF and CAP_PERFMON)
set -euo pipefail
export SNAPCTL_HITS=${SNAPCTL_HITS:-kernel}

rounds=${1:-5}
requests=${2:-20000}
every=${3:-100}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/snapctl-server.XXXXXX)
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
(cd "$root" && go build -o "$tmp/snapctl" ./cmd/snapctl)
printf 'backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n    every: %d\n' "$every" >"$tmp/plan.yaml"
"$tmp/snapctl" doctor 2>/dev/null | grep '  hits  ' || true

stats() { printf '%s\n' "$@" | sort -g | awk -v u="$UNIT" '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "median %.3f%s  min %.3f%s  max %.3f%s", m, u, v[1], u, v[NR], u}'; }
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2}'; }
load() { "$tmp/load" "$(cat "$tmp/port")" "$@"; }

# ready SNAPCTL: waits until snapctl counts the hits in the kernel (it
# holds an eBPF link; under SNAPCTL_HITS=gdb, until the server is traced
# and a second passed), the load's requests driving the breakpoint's
# first hit, then warms up.
ready() {
	until [ -s "$tmp/port" ]; do sleep 0.01; done
	if [ "$SNAPCTL_HITS" = gdb ]; then
		sleep 2
	else
		until ls -l "/proc/$1/fd" 2>/dev/null | grep -q bpf_link; do
			kill -0 "$1" 2>/dev/null || { echo "snapctl ended before counting: $(cat "$tmp/err")" >&2; exit 1; }
			load 1 1 >/dev/null
		done
	fi
	load 4 500 >/dev/null
}
serve() {
	rm -f "$tmp/port"
	"$tmp/server" "$tmp/port" 4 &
	srv=$!
	pids+=("$srv")
	until [ -s "$tmp/port" ]; do sleep 0.01; done
}
unserve() { kill -9 "$srv" 2>/dev/null || true; wait "$srv" 2>/dev/null || true; }
# finish SNAPCTL DIR [BY]: ends snapctl with Ctrl-C's SIGINT and sets
# stops to the breakpoint's measured stops in run.json, which must be
# counted as SNAPCTL_HITS says, and taken by BY (snapctl or gdb) when
# given.
finish() {
	kill -INT "$1"
	wait "$1" || true
	stops=$(python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
b = m['breakpoints'][0]
if b.get('counted') != sys.argv[2]:
    sys.exit('%s: hits counted by %s (%s)' % (sys.argv[1], b.get('counted'), b.get('counted_why')))
by = (m.get('native') or {}).get('stops_by', '')
if sys.argv[3] and by != sys.argv[3]:
    sys.exit('%s: stops taken by %s (%s)' % (sys.argv[1], by, m['native'].get('stops_by_why')))
print(b['snapshots'])" "$2/run.json" "$SNAPCTL_HITS" "${3:-}")
}

# attach_round BIN DIR [BY] and run_round BIN DIR set secs to the load's
# seconds under BIN and stops to its measured stops; BY (gdb, the
# default, or snapctl) takes attach's stops.
attach_round() {
	serve
	SNAPCTL_STOPS=${3:-gdb} "$1" attach -q --force --timeout 10m -o "$2" "$tmp/plan.yaml" "$srv" >/dev/null 2>"$tmp/err" &
	snap=$!
	pids+=("$snap")
	ready "$snap"
	secs=$(load 4 "$requests")
	by=${3:-gdb}
	[ "$SNAPCTL_HITS" = gdb ] && by=
	finish "$snap" "$2" "$by"
	unserve
}
run_round() {
	rm -f "$tmp/port"
	"$1" run -q --force --timeout 10m -o "$2" "$tmp/plan.yaml" "$tmp/server" "$tmp/port" 4 >/dev/null 2>"$tmp/err" &
	snap=$!
	pids+=("$snap")
	ready "$snap"
	secs=$(load 4 "$requests")
	finish "$snap" "$2"
}

alone=() attached=() ran=() ra=() rr=() sa=() sr=() battached=() bran=() pa=() pr=() seized=() rz=() sz=()
for r in $(seq 1 "$rounds"); do
	serve
	load 4 500 >/dev/null
	alone+=("$(load 4 "$requests")")
	unserve

	attach_round "$tmp/snapctl" "$tmp/attach"
	attached+=("$secs") sa+=("$stops")
	if [ -n "${BASELINE:-}" ]; then
		attach_round "$BASELINE" "$tmp/battach"
		battached+=("$secs")
		pa+=("$(echo "${attached[-1]} / $secs" | bc -l)")
	fi

	if [ "$SNAPCTL_HITS" != gdb ]; then
		attach_round "$tmp/snapctl" "$tmp/seized" snapctl
		seized+=("$secs") sz+=("$stops")
		rz+=("$(echo "${alone[-1]} / ${seized[-1]}" | bc -l)")
	fi

	if [ "${RUN:-}" = no ]; then
		ra+=("$(echo "${alone[-1]} / ${attached[-1]}" | bc -l)")
		echo "round $r: alone ${alone[-1]} s, attached ${attached[-1]} s (${sa[-1]} stops), seized ${seized[-1]:-} s (${sz[-1]:-} stops); load$(uptime | sed 's/.*average//')"
		continue
	fi
	run_round "$tmp/snapctl" "$tmp/run"
	ran+=("$secs") sr+=("$stops")
	if [ -n "${BASELINE:-}" ]; then
		run_round "$BASELINE" "$tmp/brun"
		bran+=("$secs")
		pr+=("$(echo "${ran[-1]} / $secs" | bc -l)")
	fi

	ra+=("$(echo "${alone[-1]} / ${attached[-1]}" | bc -l)")
	rr+=("$(echo "${alone[-1]} / ${ran[-1]}" | bc -l)")
	echo "round $r: alone ${alone[-1]} s, attached ${attached[-1]} s (${sa[-1]} stops), seized ${seized[-1]:-} s (${sz[-1]:-} stops), run ${ran[-1]} s (${sr[-1]} stops)${BASELINE:+; baseline attached ${battached[-1]} s, run ${bran[-1]} s}; load$(uptime | sed 's/.*average//')"
done
UNIT=s
a=$(median "${alone[@]}")
echo "server alone, $requests requests, 4 connections: $(stats "${alone[@]}")"
echo "attached, handle_request every $every:         $(stats "${attached[@]}")"
[ ${#seized[@]} -eq 0 ] || echo "seized (snapctl's stops), every $every:      $(stats "${seized[@]}")"
[ ${#ran[@]} -eq 0 ] || echo "snapctl run, handle_request every $every:      $(stats "${ran[@]}")"
UNIT=
echo "throughput attached / alone, by round: $(stats "${ra[@]}")  (goal >= 0.80)"
[ ${#seized[@]} -eq 0 ] || echo "throughput seized / alone, by round:   $(stats "${rz[@]}")  (goal >= 0.80)"
[ ${#ran[@]} -eq 0 ] || echo "throughput run / alone, by round:      $(stats "${rr[@]}")  (goal >= 0.80)"
cost() { echo "($(median "${@:2}") - $a) * 1000 / $1" | bc -l | xargs printf '%.2f'; }
echo "a measured stop cost the load (medians): attached $(cost "$(median "${sa[@]}")" "${attached[@]}") ms${seized:+, seized $(cost "$(median "${sz[@]}")" "${seized[@]}") ms}${ran:+, run $(cost "$(median "${sr[@]}")" "${ran[@]}") ms}"
if [ -n "${BASELINE:-}" ]; then
	UNIT=s
	echo "baseline attached:                             $(stats "${battached[@]}")"
	echo "baseline run:                                  $(stats "${bran[@]}")"
	UNIT=
	echo "seconds attached / baseline's, by round:       $(stats "${pa[@]}")"
	echo "seconds run / baseline's, by round:            $(stats "${pr[@]}")"
fi
