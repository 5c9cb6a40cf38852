package plan

import (
	"fmt"
	"strings"
)

// ownedOptions are valgrind options snapctl sets itself; a plan may not
// pass them, since they would break the session. Names ending in '*' are
// prefixes.
var ownedOptions = map[string]string{
	"--tool":            "snapctl always runs massif",
	"--vgdb*":           "snapctl runs valgrind's gdbserver itself",
	"--massif-out-file": "snapctl takes its snapshots into the run directory",
	"--log-file":        "snapctl reads valgrind's log to know when its gdbserver is ready",
	"--xtree-memory*":   "snapctl takes its snapshots at the stops itself (valgrind.blocks chooses how)",
	"--log-fd":          "snapctl reads valgrind's log to know when its gdbserver is ready",
	"--log-socket":      "snapctl reads valgrind's log to know when its gdbserver is ready",
	"--help":            "it would make valgrind print its help and exit",
	"--help-debug":      "it would make valgrind print its help and exit",
	"-h":                "it would make valgrind print its help and exit",
	"--version":         "it would make valgrind print its version and exit",
}

// planOptions are valgrind options that have a plan key.
var planOptions = map[string]string{
	"--threshold":     "threshold",
	"--depth":         "depth",
	"--pages-as-heap": "pages_as_heap",
	"--stacks":        "stacks",
	"--alloc-fn":      "alloc_fns",
	"--ignore-fn":     "ignore_fns",
	"--fair-sched":    "fair_sched",
}

// checkValgrindArg explains why a passed-through valgrind option is
// refused, or returns "".
func checkValgrindArg(a string) string {
	if a == "--" || !strings.HasPrefix(a, "-") {
		return fmt.Sprintf("%q is not a valgrind option (they start with \"--\"); the program's arguments go in target.args", a)
	}
	if strings.ContainsAny(a, " \t") && !strings.Contains(a, "=") {
		return fmt.Sprintf("%q: write one option per list item, as --name=value", a)
	}
	name, _, _ := strings.Cut(a, "=")
	if why, ok := ownedOptions[name]; ok {
		return fmt.Sprintf("%s is set by snapctl and cannot be passed: %s", name, why)
	}
	for prefix, why := range ownedOptions {
		if p, ok := strings.CutSuffix(prefix, "*"); ok && strings.HasPrefix(name, p) {
			return fmt.Sprintf("%s is set by snapctl and cannot be passed: %s", name, why)
		}
	}
	if key, ok := planOptions[name]; ok {
		return fmt.Sprintf("%s has a plan key: use valgrind.%s", name, key)
	}
	return ""
}
