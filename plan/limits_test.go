package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A plan larger than MaxPlanSize is refused without being read: a sparse
// file of a terabyte at once, and a pipe that never ends one byte past the
// limit. /dev/zero and a directory are not plans, and are refused before
// anything is read.
func TestLoadTooLarge(t *testing.T) {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<40); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "endless.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		line := []byte(strings.Repeat("#", 1023) + "\n")
		for {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}()
	for _, tt := range []struct{ path, want string }{
		{huge, huge + ": larger than 1024 KiB; a plan is a few kilobytes"},
		{fifo, fifo + ": larger than 1024 KiB; a plan is a few kilobytes"},
		{"/dev/zero", "/dev/zero: cannot read the plan: it is a character device, not a regular file or a pipe"},
		{dir, dir + ": cannot read the plan: it is a directory, not a regular file or a pipe"},
	} {
		_, err := Load(tt.path)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Load(%s) = %v, want %q", tt.path, err, tt.want)
		}
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
