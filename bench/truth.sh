#!/usr/bin/env bash
# bench/truth.sh: the native verdicts that must hold in every run, run
# RUNS times each (default 5): TestFSTServiceLeak's native leak on the
# 4-thread OpenFST service and TestNativeNoisyLeak's leak under four
# workers' scratch (driver/backend/native/truth_test.go). Their threads'
# timing differs run to run; CI runs each once or twice, and this script
# repeats them to find the rare run that misjudges. It prints each run's
# result and, per test, how many runs held.
#
# Usage: bench/truth.sh [PATTERN]   (a Go regexp of the tests, default both)
# RUNS=N sets the runs (SNAPCTL_TRUTH_RUNS). Needs go, g++, gdb, libfst-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
export SNAPCTL_TRUTH_RUNS="${RUNS:-5}"
pattern="${1:-TestFSTServiceLeak|TestNativeNoisyLeak}"
set +e
go test -count=1 -trimpath -v -run "^($pattern)\$" -parallel "${PARALLEL:-2}" -timeout 60m ./driver/backend/native/ |
	grep -E '^ *--- (PASS|FAIL|SKIP): Test[^/]+/(native-)?[0-9]+ |^ *--- FAIL|^ +[a-z_]+_test\.go:|^(FAIL|ok)([[:space:]]|$)' |
	awk '{ print }
		/--- (PASS|FAIL): / && $3 ~ /\/(native-)?[0-9]+$/ { split($3, p, "/"); runs[p[1]]++; if ($2 == "PASS:") held[p[1]]++ }
		END { for (t in runs) printf "%s: %d of %d runs held\n", t, held[t], runs[t] }'
exit "${PIPESTATUS[0]}"
