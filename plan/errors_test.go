package plan

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bp is a valid breakpoints section to append to plans that test other keys.
const bp = "breakpoints:\n  - location: main\n"

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		plan string
		want []string
	}{
		{"empty file", "", []string{
			`plan.yaml:1:1: the plan is empty; it needs at least a "breakpoints" list`}},
		{"only a comment", "# nothing\n", []string{
			`plan.yaml:1:1: the plan is empty; it needs at least a "breakpoints" list`}},
		{"null document", "~\n", []string{
			`plan.yaml:1:1: the plan is empty; it needs at least a "breakpoints" list`}},
		{"not a mapping", "- location: main\n", []string{
			`plan.yaml:1:1: expected a mapping of plan keys (target, valgrind, breakpoints, ...), got a list`}},
		{"no breakpoints key", "scheduler_locking: on\n", []string{
			`plan.yaml:1:1: breakpoints: missing; a plan needs at least one breakpoint`}},
		{"null breakpoints", "breakpoints:\n", []string{
			`plan.yaml:1:13: breakpoints: empty; a plan needs at least one breakpoint`}},
		{"empty breakpoint list", "breakpoints: []\n", []string{
			`plan.yaml:1:14: breakpoints: empty; a plan needs at least one breakpoint`}},
		{"breakpoints a mapping", "breakpoints:\n  location: main\n", []string{
			`plan.yaml:2:3: breakpoints: expected a list of breakpoints, got a mapping`}},
		{"breakpoint a string", "breakpoints: [main]\n", []string{
			`plan.yaml:1:15: breakpoints[0]: expected a mapping with at least a "location", got "main" (write: - location: main)`}},
		{"unknown key with suggestion", bp + "    skp: 5\n", []string{
			`plan.yaml:3:5: breakpoints[0].skp: unknown key (did you mean "skip"?)`}},
		{"unknown key transposed", bp + "    sikp: 5\n", []string{
			`plan.yaml:3:5: breakpoints[0].sikp: unknown key (did you mean "skip"?)`}},
		{"unknown key wrong case", bp + "    Condition: x\n", []string{
			`plan.yaml:3:5: breakpoints[0].Condition: unknown key (did you mean "condition"?)`}},
		{"unknown key far from any", bp + "    colour: red\n", []string{
			`plan.yaml:3:5: breakpoints[0].colour: unknown key`}},
		{"unknown top-level key", bp + "valgrnd: {}\n", []string{
			`plan.yaml:3:1: valgrnd: unknown key (did you mean "valgrind"?)`}},
		{"unknown nested key", bp + "report:\n  fail_on:\n    growth: 1KiB\n", []string{
			`plan.yaml:5:5: report.fail_on.growth: unknown key`}},
		{"duplicate key", bp + "    skip: 1\n    skip: 2\n", []string{
			`plan.yaml:4:5: breakpoints[0].skip: duplicate key (first at line 3)`}},
		{"duplicate top-level key", bp + "breakpoints:\n  - location: f\n", []string{
			`plan.yaml:3:1: breakpoints: duplicate key (first at line 1)`}},
		{"merge key", "breakpoints:\n  - <<: {skip: 1}\n    location: main\n", []string{
			`plan.yaml:2:5: breakpoints[0].<<: merge keys (<<) are not supported in a plan`}},
		{"anchors and aliases", "breakpoints:\n  - location: &l main\n  - location: *l\n", []string{
			`plan.yaml:3:5: breakpoints[1]: the name "main" derived from the location is already used by breakpoints[0] (plan.yaml:2:5); give each a "name"`}},
		{"string for int", bp + "    skip: \"5\"\n", []string{
			`plan.yaml:3:11: breakpoints[0].skip: expected an integer, got "5"`}},
		{"float for int", bp + "    every: 1.5\n", []string{
			`plan.yaml:3:12: breakpoints[0].every: expected an integer, got 1.5`}},
		{"list for int", bp + "    thread: [1]\n", []string{
			`plan.yaml:3:13: breakpoints[0].thread: expected an integer, got a list`}},
		{"huge int", bp + "    skip: 99999999999999999999\n", []string{
			`plan.yaml:3:11: breakpoints[0].skip: expected an integer, got 99999999999999999999`}},
		{"negative skip", bp + "    skip: -1\n", []string{
			`plan.yaml:3:11: breakpoints[0].skip: must not be negative, got -1`}},
		{"zero every", bp + "    every: 0\n", []string{
			`plan.yaml:3:12: breakpoints[0].every: must be at least 1, got 0`}},
		{"zero max_hits", bp + "    max_hits: 0\n", []string{
			`plan.yaml:3:15: breakpoints[0].max_hits: must be at least 1, got 0`}},
		{"zero thread", bp + "    thread: 0\n", []string{
			`plan.yaml:3:13: breakpoints[0].thread: must be at least 1, got 0`}},
		{"list where a map is", "target: [a]\n" + bp, []string{
			`plan.yaml:1:9: target: expected a mapping, got a list`}},
		{"map where a list is", "valgrind:\n  alloc_fns: {a: b}\n" + bp, []string{
			`plan.yaml:2:14: valgrind.alloc_fns: expected a list of strings, got a mapping`}},
		{"string where a list is", "valgrind:\n  alloc_fns: xmalloc\n" + bp, []string{
			`plan.yaml:2:14: valgrind.alloc_fns: expected a list of strings, got "xmalloc" (write [xmalloc])`}},
		{"bad bool", bp + "    around_call: maybe\n", []string{
			`plan.yaml:3:18: breakpoints[0].around_call: expected true or false, got "maybe"`}},
		{"missing location", "breakpoints:\n  - name: a\n", []string{
			`plan.yaml:2:5: breakpoints[0]: missing "location" (a function, file:line or *address)`}},
		{"empty location", "breakpoints:\n  - location: \"\"\n", []string{
			`plan.yaml:2:15: breakpoints[0].location: must not be empty`}},
		{"multi-line location", "breakpoints:\n  - location: |\n      a\n      b\n", []string{
			`plan.yaml:2:15: breakpoints[0].location: must be a single line, got "a\nb\n"`}},
		{"unknown explicit option", "breakpoints:\n  - location: -file a.c -line 3\n", []string{
			`plan.yaml:2:15: breakpoints[0].location: unknown explicit location option -file (gdb knows -source, -function, -label, -line and -qualified)`}},
		{"ambiguous explicit option", "breakpoints:\n  - location: -l 3\n", []string{
			`plan.yaml:2:15: breakpoints[0].location: explicit location option -l is ambiguous: -label or -line`}},
		{"explicit option without value", "breakpoints:\n  - location: -source a.c -line\n", []string{
			`plan.yaml:2:15: breakpoints[0].location: -line needs a value`}},
		{"empty name", "breakpoints:\n  - name: \"\"\n    location: main\n", []string{
			`plan.yaml:2:11: breakpoints[0].name: must not be empty`}},
		{"bad name", "breakpoints:\n  - name: my bp\n    location: main\n", []string{
			`plan.yaml:2:11: breakpoints[0].name: name "my bp" may only contain letters, digits, '_', '.' and '-' (it is used in file names)`}},
		{"dot name", "breakpoints:\n  - name: ..\n    location: main\n", []string{
			`plan.yaml:2:11: breakpoints[0].name: ".." is not a usable name`}},
		{"long name", "breakpoints:\n  - name: " + strings.Repeat("a", 65) + "\n    location: main\n", []string{
			`plan.yaml:2:11: breakpoints[0].name: name is 65 characters long; at most 64 are allowed`}},
		{"duplicate names", "breakpoints:\n  - name: a\n    location: f\n  - name: a\n    location: g\n", []string{
			`plan.yaml:4:11: breakpoints[1].name: duplicate name "a" (already used by breakpoints[0] at plan.yaml:2:5)`}},
		{"duplicate derived names", "breakpoints:\n  - location: f\n  - location: f\n", []string{
			`plan.yaml:3:5: breakpoints[1]: the name "f" derived from the location is already used by breakpoints[0] (plan.yaml:2:5); give each a "name"`}},
		{"underivable name", "breakpoints:\n  - location: \"::\"\n", []string{
			`plan.yaml:2:5: breakpoints[0]: cannot derive a name from location "::"; add a "name"`}},
		{"resuming command", bp + "    commands: [\"print x\", continue]\n", []string{
			`plan.yaml:3:27: breakpoints[0].commands[1]: command "continue" would resume or end the target; snapctl resumes it itself`}},
		{"empty command", bp + "    commands: [\"\"]\n", []string{
			`plan.yaml:3:16: breakpoints[0].commands[0]: must not be empty`}},
		{"resuming init command", "gdb:\n  init: [run]\n" + bp, []string{
			`plan.yaml:2:10: gdb.init[0]: command "run" would resume or end the target; snapctl resumes it itself`}},
		{"scheduler_locking", "scheduler_locking: maybe\n" + bp, []string{
			`plan.yaml:1:20: scheduler_locking: must be "on", "step", "off" or "replay", got "maybe"`}},
		{"scheduler_locking typo", "scheduler_locking: stpe\n" + bp, []string{
			`plan.yaml:1:20: scheduler_locking: must be "on", "step", "off" or "replay", got "stpe" (did you mean "step"?)`}},
		{"keep_snapshots", "keep_snapshots: some\n" + bp, []string{
			`plan.yaml:1:17: keep_snapshots: must be "all" or "changed", got "some"`}},
		{"keep_snapshots typo", bp + "    keep_snapshots: chnaged\n", []string{
			`plan.yaml:3:21: breakpoints[0].keep_snapshots: must be "all" or "changed", got "chnaged" (did you mean "changed"?)`}},
		{"keep_snapshots key typo", "keep_snapshot: all\n" + bp, []string{
			`plan.yaml:1:1: keep_snapshot: unknown key (did you mean "keep_snapshots"?)`}},
		{"keep_snapshots type", bp + "    keep_snapshots: [all]\n", []string{
			`plan.yaml:3:21: breakpoints[0].keep_snapshots: expected a string, got a list`}},
		{"fair_sched", "valgrind:\n  fair_sched: always\n" + bp, []string{
			`plan.yaml:2:15: valgrind.fair_sched: must be "no", "yes" or "try", got "always"`}},
		{"blocks", "valgrind:\n  blocks: sometimes\n" + bp, []string{
			`plan.yaml:2:11: valgrind.blocks: expected true or false, got "sometimes"`}},
		{"group_by", "report:\n  group_by: stak\n" + bp, []string{
			`plan.yaml:2:13: report.group_by: must be "site", "function" or "stack", got "stak" (did you mean "stack"?)`}},
		{"backend", "backend: nativ\n" + bp, []string{
			`plan.yaml:1:10: backend: must be "massif", "memcheck" or "native", got "nativ" (did you mean "native"?)`}},
		{"sites with massif", "backend: massif\nnative:\n  sites: true\n" + bp, []string{
			`plan.yaml:3:10: native.sites: true needs the native backend, and the plan says backend: massif (line 1), which records call sites already: drop one of them`}},
		{"trim_probe", "native:\n  trim_probe: maybe\n" + bp, []string{
			`plan.yaml:2:15: native.trim_probe: expected true or false, got "maybe"`}},
		{"threshold range", "valgrind:\n  threshold: 101\n" + bp, []string{
			`plan.yaml:2:14: valgrind.threshold: must be between 0 and 100, got 101`}},
		{"threshold string", "valgrind:\n  threshold: \"1%\"\n" + bp, []string{
			`plan.yaml:2:14: valgrind.threshold: expected a number, got "1%"`}},
		{"massif depth", "valgrind:\n  depth: 300\n" + bp, []string{
			`plan.yaml:2:10: valgrind.depth: must be at most 200 (massif's limit), got 300`}},
		{"alloc_fn with space", "valgrind:\n  alloc_fns: [\"my alloc\"]\n" + bp, []string{
			`plan.yaml:2:15: valgrind.alloc_fns[0]: function name "my alloc" contains a space; valgrind matches the name as massif prints it, without spaces`}},
		{"owned valgrind option", "valgrind:\n  args: [--tool=memcheck, --vgdb-error=1, --log-file=x, --massif-out-file=y]\n" + bp, []string{
			`plan.yaml:2:10: valgrind.args[0]: --tool is set by snapctl and cannot be passed: snapctl always runs massif`,
			`plan.yaml:2:27: valgrind.args[1]: --vgdb-error is set by snapctl and cannot be passed: snapctl runs valgrind's gdbserver itself`,
			`plan.yaml:2:43: valgrind.args[2]: --log-file is set by snapctl and cannot be passed: snapctl reads valgrind's log to know when its gdbserver is ready`,
			`plan.yaml:2:57: valgrind.args[3]: --massif-out-file is set by snapctl and cannot be passed: snapctl takes its snapshots into the run directory`}},
		{"valgrind option with a plan key", "valgrind:\n  args: [--threshold=1]\n" + bp, []string{
			`plan.yaml:2:10: valgrind.args[0]: --threshold has a plan key: use valgrind.threshold`}},
		{"valgrind non-option", "valgrind:\n  args: [./prog]\n" + bp, []string{
			`plan.yaml:2:10: valgrind.args[0]: "./prog" is not a valgrind option (they start with "--"); the program's arguments go in target.args`}},
		{"valgrind two options in one", "valgrind:\n  args: [\"--a --b\"]\n" + bp, []string{
			`plan.yaml:2:10: valgrind.args[0]: "--a --b": write one option per list item, as --name=value`}},
		{"bad size unit", "report:\n  fail_on:\n    growth_per_hit: 1kb\n" + bp, []string{
			`plan.yaml:3:21: report.fail_on.growth_per_hit: bad size "1kb": the unit must be B, KB, MB, GB, KiB, MiB or GiB`}},
		{"negative size", "report:\n  fail_on:\n    growth_per_hit: -5\n" + bp, []string{
			`plan.yaml:3:21: report.fail_on.growth_per_hit: bad size -5: negative`}},
		{"zero size", "report:\n  fail_on:\n    total_growth: 0\n" + bp, []string{
			`plan.yaml:3:19: report.fail_on.total_growth: must be at least 1 byte (leave the key out for no limit)`}},
		{"fractional bytes", "report:\n  fail_on:\n    total_growth: 1.5B\n" + bp, []string{
			`plan.yaml:3:19: report.fail_on.total_growth: bad size "1.5B": not a whole number of bytes`}},
		{"empty pattern", "report:\n  library_frames: [\"std::*\", \" \"]\n" + bp, []string{
			`plan.yaml:2:30: report.library_frames[1]: must not be empty`}},
		// Each item is checked where it stands: after a refused first item,
		// the third's error still names [2] and points at its own line.
		{"valgrind.args item after a refused one", "valgrind:\n  args:\n    - \"\"\n    - --max-snapshots=10\n    - --tool=memcheck\n" + bp, []string{
			`plan.yaml:3:7: valgrind.args[0]: must not be empty`,
			`plan.yaml:5:7: valgrind.args[2]: --tool is set by snapctl and cannot be passed: snapctl always runs massif`}},
		{"alloc_fns item after a refused one", "valgrind:\n  alloc_fns:\n    - [a]\n    - xmalloc\n    - my alloc\n" + bp, []string{
			`plan.yaml:3:7: valgrind.alloc_fns[0]: expected a string, got a list`,
			`plan.yaml:5:7: valgrind.alloc_fns[2]: function name "my alloc" contains a space; valgrind matches the name as massif prints it, without spaces`}},
		{"commands item after a refused one", bp + "    commands:\n      - \"\"\n      - print x\n      - continue\n", []string{
			`plan.yaml:4:9: breakpoints[0].commands[0]: must not be empty`,
			`plan.yaml:6:9: breakpoints[0].commands[2]: command "continue" would resume or end the target; snapctl resumes it itself`}},
		{"pattern item after a refused one", "report:\n  ignore:\n    - {a: b}\n    - malloc\n    - \"\"\n" + bp, []string{
			`plan.yaml:3:7: report.ignore[0]: expected a string, got a mapping`,
			`plan.yaml:5:7: report.ignore[2]: must not be empty`}},
		{"bad duration", "stop_timeout: 30\n" + bp, []string{
			`plan.yaml:1:15: stop_timeout: expected a positive duration such as "30s" or "2m", got 30`}},
		{"env list", "target:\n  env: [A=1]\n" + bp, []string{
			`plan.yaml:2:8: target.env: expected a mapping of variable names to values, got a list`}},
		{"env bad name", "target:\n  env: {\"A=B\": 1}\n" + bp, []string{
			`plan.yaml:2:9: target.env.A=B: not a valid environment variable name`}},
		{"env map value", "target:\n  env: {A: {b: 1}}\n" + bp, []string{
			`plan.yaml:2:12: target.env.A: expected a string, got a mapping`}},
		{"two documents", bp + "---\n" + bp, []string{
			`plan.yaml:3:1: a plan is a single YAML document; remove the second one (from "---")`}},
		{"syntax error", "breakpoints:\n  - location: main\n   skip: 1\n", []string{
			`plan.yaml:3: invalid YAML: did not find expected '-' indicator`}},
		{"unclosed quote", "breakpoints:\n  - location: main\n    condition: \"x\n", []string{
			`plan.yaml:3: invalid YAML: found unexpected end of stream`}},
		{"mapping in a plain value", "breakpoints:\n  - location: a: b\n", []string{
			`plan.yaml:2: invalid YAML: mapping values are not allowed in this context`}},
		{"unclosed flow list", "valgrind:\n  alloc_fns: [a, b\n" + bp, []string{
			`plan.yaml:2: invalid YAML: did not find expected ',' or ']'`}},
		{"tab indent", "breakpoints:\n\t- location: main\n", []string{
			`plan.yaml:2: invalid YAML: found character that cannot start any token`}},
		{"several errors in file order", "breakpoints:\n  - location: f\n    skip: -1\n    every: x\nreport:\n  group_by: all\n", []string{
			`plan.yaml:3:11: breakpoints[0].skip: must not be negative, got -1`,
			`plan.yaml:4:12: breakpoints[0].every: expected an integer, got "x"`,
			`plan.yaml:6:13: report.group_by: must be "site", "function" or "stack", got "all"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("plan.yaml", []byte(tt.plan))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v, want errors", p)
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %v (%T) is not an ErrorList", err, err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			var first *Error
			if !errors.As(err, &first) || first != list[0] {
				t.Errorf("errors.As(*Error) = %v, want the first error", first)
			}
		})
	}
}
