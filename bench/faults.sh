#!/usr/bin/env bash
# bench/faults.sh: the fault matrix. Every fault the docs make a promise
# about (kill -9 of gdb, valgrind, vgdb, the target and snapctl at start-up,
# mid-run and the target's exit; SIGSTOP of each; SIGINT, SIGTERM, SIGHUP
# and a double Ctrl-C; a full run directory and a full TMPDIR; odd paths;
# a read-only run directory; a daemonizing target; snapctl attach ended
# each way, in each attach mode; odd files for every reader) against
# massif, memcheck, native and native --sites (gdb, heaptrack_interpret
# and snapctl killed or stopped; the program's own files), each row
# judged on the same promises: the exit code README documents, run.json
# valid and accounting for every snapshot file, no process left, no core
# file, the attached process alive, running and untraced. It prints one table of held and broken and
# exits 1 when a row is broken. The rows are TestFaultMatrix in
# cmd/snapctl/faultmatrix_test.go, where they reuse the end-to-end tests'
# fixtures and process checks.
#
# The rows named "server, attach..." attach to the 4-thread TCP server
# under load and judge the server after each fault (harmCases in
# cmd/snapctl/harm_test.go); bench/harm.sh runs them 10 times each.
#
# Usage: bench/faults.sh [quick|all|PATTERN]   (default: all)
#   quick    the rows .ci/run runs: fast, and held
#   PATTERN  a Go regexp of row names: 'kill -9 snapctl', 'SIGSTOP.*native'
# Needs go, gcc, gdb, valgrind; root for the rows that mount a small tmpfs
# (full disk, read-only run directory), which are skipped otherwise.
# PARALLEL (default 4) rows run at once; no -race, so the timings a row
# depends on stay close to a real run's; -trimpath, as the suite's, so that
# a fresh clone's packages come from the go command's cache.
set -euo pipefail
cd "$(dirname "$0")/.."
export SNAPCTL_FAULTS="${1:-all}"
set +e
go test -count=1 -trimpath -v -run 'TestFaultMatrix$' -parallel "${PARALLEL:-4}" -timeout 60m ./cmd/snapctl/ |
	grep -v -E '^(=== (RUN|PAUSE|CONT|NAME)| *--- PASS|PASS$|ok )'
status=${PIPESTATUS[0]}
exit "$status"
