package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/preflight"
)

// helpOf is the help text of `snapctl ARGS... --help`.
func helpOf(t *testing.T, args ...string) string {
	t.Helper()
	root := newRootCmd("dev")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append(args, "--help"))
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestHelpTexts: every command's help is true of every backend.
// snapctl --help tells of both backends, --sites and attach; run --help
// lists report.html and says which files only massif writes; attach
// --help offers neither --backend massif nor --valgrind, which attach
// refuses or ignores.
func TestHelpTexts(t *testing.T) {
	root := helpOf(t)
	for _, want := range []string{"--sites", "heaptrack", "snapctl attach plan.yaml PID"} {
		if !strings.Contains(root, want) {
			t.Errorf("snapctl --help does not mention %q:\n%s", want, root)
		}
	}
	// Every backend of the list, described on a line of its own.
	for _, name := range driver.BackendNames() {
		if !strings.Contains(root, "\n  "+name+" ") {
			t.Errorf("snapctl --help does not describe the backend %q:\n%s", name, root)
		}
	}
	run := helpOf(t, "run")
	for _, want := range []string{"report.html", "--backend native", "with massif also valgrind.log"} {
		if !strings.Contains(run, want) {
			t.Errorf("run --help does not say %q:\n%s", want, run)
		}
	}
	attach := helpOf(t, "attach")
	for _, bad := range []string{"--valgrind", "--backend string", "massif (per call site"} {
		if strings.Contains(attach, bad) {
			t.Errorf("attach --help offers %q:\n%s", bad, attach)
		}
	}
}

// TestOutOfRangeSaysRange: an integer the plan cannot hold names the
// range it must be in.
func TestOutOfRangeSaysRange(t *testing.T) {
	_, err := plan.Parse("plan.yaml", []byte("breakpoints:\n  - name: a\n    location: f\n    max_hits: 4294967297\n"))
	if err == nil || !strings.Contains(err.Error(), "integer 4294967297 is out of range: want 1 to 2147483647") {
		t.Errorf("error %v, want the range", err)
	}
}

// TestShimSuggestion: a pyenv shim is refused with a command that runs
// the interpreter pyenv picks, not bash on the shim (which would exec it,
// exit 9).
func TestShimSuggestion(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	text := "#!/usr/bin/env bash\nset -e\nprogram=\"${0##*/}\"\nexec \"/root/.pyenv/libexec/pyenv\" exec \"$program\" \"$@\"\n"
	if err := os.WriteFile(shim, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := preflight.InspectBinary(shim)
	want := "binary " + shim + " is a pyenv shim (#!/usr/bin/env bash), a script that runs the version pyenv picks: valgrind and gdb need that program itself; give its path instead, e.g. snapctl run PLAN $(pyenv which python3) ARGS..."
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

// TestCommandLineQuoted: the reports show the program's command line as a
// shell takes it back: an empty argument shows as a quoted empty word,
// not as a double space.
func TestCommandLineQuoted(t *testing.T) {
	got := backend.CommandLine([]string{"redis-server", "--save", "", "--appendonly", "no", "a b", "it's"})
	if want := `redis-server --save '' --appendonly no 'a b' 'it'\''s'`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
