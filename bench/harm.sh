#!/usr/bin/env bash
# bench/harm.sh: whatever dies, the attached program runs on. Runs the
# fault matrix's server rows (snapctl attach, with and without --sites, on
# the 4-thread TCP server under a loopback load of 4 clients; kill -9 or
# SIGSTOP of snapctl, gdb, gdbserver or heaptrack_interpret mid-run)
# CYCLES times each (default 10) on one server per row, and prints the
# table: per row, how many cycles held every promise (the server answers,
# untraced, not stopped, no signal pending, its code the files', 300
# allocating requests go through, heaptrack's FIFO closed, no process
# left). The rows are harmCases in cmd/snapctl/harm_test.go.
#
# Usage: bench/harm.sh [PATTERN]   (a Go regexp of row names, default all)
# SNAPCTL_HARM_GUARDIAN_LOGS=FILE appends to FILE the guardian's log of
# each cycle that leaves it (those that kill snapctl): what the guardian
# found and mended as the tracer died. SNAPCTL_HARM_CORES=DIR copies into
# DIR the core file of a server that died, with its binary.
# Needs go, gcc, gdb, gdbserver, heaptrack.
set -euo pipefail
cd "$(dirname "$0")/.."
export SNAPCTL_HARM_CYCLES="${CYCLES:-10}"
export SNAPCTL_FAULTS="server, attach${1:+.*$1}"
set +e
go test -count=1 -trimpath -v -run 'TestFaultMatrix$' -parallel "${PARALLEL:-2}" -timeout 60m ./cmd/snapctl/ |
	grep -v -E '^(=== (RUN|PAUSE|CONT|NAME)| *--- PASS|PASS$|ok )'
exit "${PIPESTATUS[0]}"
