package breakpoints

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A plan larger than MaxPlanSize is refused after reading one byte past the
// limit: /dev/zero, which never ends, is refused at once.
func TestLoadTooLarge(t *testing.T) {
	_, err := Load("/dev/zero")
	want := "/dev/zero: larger than 1024 KiB; a plan is a few kilobytes"
	if err == nil || err.Error() != want {
		t.Errorf("Load(/dev/zero) = %v, want %q", err, want)
	}
}

// Every string value has a limit, checked with a positioned plan error that
// names the key and does not echo the value.
func TestValueLimits(t *testing.T) {
	long := strings.Repeat("x", MaxLine+1)
	huge := strings.Repeat("y", MaxValue+1)
	plan := "target:\n  args: [\"" + huge + "\"]\nbreakpoints:\n  - location: f\n    condition: \"" + long + "\"\n    commands: [\"p " + long + "\"]\n"
	_, err := Parse("plan.yaml", []byte(plan))
	var got []string
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("Parse = %v, want an ErrorList", err)
	}
	for _, e := range list {
		got = append(got, e.Error())
	}
	want := []string{
		"plan.yaml:2:10: target.args[0]: 65537 bytes long, at most 65536 allowed",
		"plan.yaml:5:16: breakpoints[0].condition: 4097 bytes long, at most 4096 allowed",
		"plan.yaml:6:16: breakpoints[0].commands[0]: 4099 bytes long, at most 4096 allowed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// ConditionError and CwdError point at the value of their key.
func TestConditionAndCwdErrors(t *testing.T) {
	plan := "target:\n  cwd: /no/such\nbreakpoints:\n  - location: f\n    condition: \"x ==\"\n"
	p, err := Parse("plan.yaml", []byte(plan))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Breakpoints[0].ConditionError("bad").Error(), "plan.yaml:5:16: breakpoints[0].condition: bad"; got != want {
		t.Errorf("ConditionError = %q, want %q", got, want)
	}
	if got, want := p.Target.CwdError("missing").Error(), "plan.yaml:2:8: target.cwd: missing"; got != want {
		t.Errorf("CwdError = %q, want %q", got, want)
	}
}
