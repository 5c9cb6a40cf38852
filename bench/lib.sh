# bench/lib.sh: sourced by the bench scripts. It builds bench/pair, the
# program that runs and times both sides and cleans up after them, into a
# private folder removed on exit, and defines `pair ARGS...` to run it.
# pair kills every process it started on Ctrl-C, on SIGTERM and on errors;
# the scripts run it in the foreground, so Ctrl-C reaches it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pairdir=$(mktemp -d /tmp/snapctl-pair.XXXXXX)
trap 'rm -rf "$pairdir"' EXIT
trap 'exit 130' INT TERM HUP
(cd "$root" && go build -o "$pairdir/pair" ./bench/pair)

pair() { "$pairdir/pair" -root "$root" "$@"; }

# need_value FLAG VALUE: a flag's value must be there.
need_value() { [ -n "${2:-}" ] || { echo "$(basename "$0"): $1 needs a value" >&2; exit 2; }; }
