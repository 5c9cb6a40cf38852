package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestMain makes the test binary the subreaper of the snapctl runs the
// end-to-end tests start, so no valgrind, vgdb or gdb can outlive them,
// and removes the runs the tests shared.
func TestMain(m *testing.M) {
	code := testenv.Main(m)
	removeSharedRuns()
	os.Exit(code)
}

func TestVersion(t *testing.T) {
	root := newRootCmd("1.2.3")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "1.2.3") {
		t.Errorf("--version printed %q, want it to contain 1.2.3", got)
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	root := newRootCmd("dev")
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"--no-such-flag"})
	err := root.Execute()
	if code, _ := describe(err); code != exitUsage {
		t.Errorf("exit code for %v = %d, want %d", err, code, exitUsage)
	}
}

// TestCommandLineErrorsAreUsageErrors checks that every kind of bad command
// line, not only a bad flag, exits 2 as README's "Exit codes" promises.
func TestCommandLineErrorsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"foo"},
		{"dif", "a.ms", "b.ms"},
		{"diff", "a.ms"},
		{"diff", "a.ms", "b.ms", "c.ms"},
		{"show"},
		{"export"},
		{"doctor", "a", "b"},
		{"run", "plan.yaml"},
		{"completion", "bash", "extra"},
		{"completion", "nosuchshell"},
		{"help", "nosuch"},
		{},
	} {
		root := newRootCmd("dev")
		var stdout, stderr bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs(args)
		err := root.Execute()
		if err == nil {
			t.Errorf("snapctl %q: no error", args)
			continue
		}
		if code, msg := describe(err); code != exitUsage {
			t.Errorf("snapctl %q: exit code %d (%s), want %d", args, code, msg, exitUsage)
		}
	}
}

func TestUnknownCommandSuggests(t *testing.T) {
	root := newRootCmd("dev")
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"dif"})
	_, msg := describe(root.Execute())
	const want = `unknown command "dif" for "snapctl"; did you mean diff? (see 'snapctl help')`
	if msg != want {
		t.Errorf("message = %q, want %q", msg, want)
	}
}

// TestCommandAlone checks that snapctl and a command that only groups
// others, run without a command, print their usage to stderr and exit 2.
func TestCommandAlone(t *testing.T) {
	for _, tt := range []struct {
		args       []string
		msg, lists string
	}{
		{nil, `missing command for "snapctl": attach, compare, completion, diff, doctor, export, run or show`, "Available Commands:"},
		{[]string{"completion"}, `missing command for "snapctl completion": bash, fish, powershell or zsh`, "bash"},
	} {
		root := newRootCmd("dev")
		var stdout, stderr bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&stderr)
		root.SetArgs(append([]string{}, tt.args...))
		code, msg := describe(root.Execute())
		if code != exitUsage || !strings.HasPrefix(msg, tt.msg) {
			t.Errorf("snapctl %q: exit %d %q, want %d and %q", tt.args, code, msg, exitUsage, tt.msg)
		}
		if stdout.Len() != 0 || !strings.Contains(stderr.String(), tt.lists) {
			t.Errorf("snapctl %q: stdout %q, stderr %q; want the usage on stderr", tt.args, stdout.String(), stderr.String())
		}
	}
}

// Asking for help still succeeds.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"help", "run"}, {"run", "--help"}, {"help", "completion", "bash"}} {
		root := newRootCmd("dev")
		var stdout bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Errorf("snapctl %q: %v", args, err)
		}
		if !strings.Contains(stdout.String(), "Usage:") {
			t.Errorf("snapctl %q printed %q, want the help", args, stdout.String())
		}
	}
}

// TestFlagCompletion asks cobra's completion entry point, as the shell
// scripts do, for the values of every flag that takes one of a few.
func TestFlagCompletion(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--format", ""}, "text\nmarkdown\njson\n:4\n"},
		{[]string{"run", "--keep-snapshots", ""}, "all\nchanged\n:4\n"},
		{[]string{"diff", "--format", ""}, "text\nmarkdown\njson\n:4\n"},
		{[]string{"diff", "--group-by", "s"}, "site\nfunction\nstack\n:4\n"},
		{[]string{"show", "--format", ""}, "text\njson\n:4\n"},
		{[]string{"export", "--format", ""}, "pprof\nfolded\n:4\n"},
	} {
		root := newRootCmd("dev")
		var stdout bytes.Buffer
		root.SetOut(&stdout)
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"__complete"}, tt.args...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if got := stdout.String(); got != tt.want {
			t.Errorf("completing %q: %q, want %q", tt.args, got, tt.want)
		}
	}
}

// `snapctl run --help` lists every exit code, and README.md's "Exit
// codes" table has the same codes.
func TestExitCodesDocumented(t *testing.T) {
	root := newRootCmd("dev")
	var stdout bytes.Buffer
	root.SetOut(&stdout)
	root.SetArgs([]string{"run", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	help := stdout.String()
	var inHelp []string
	for _, e := range exitCodes {
		line := fmt.Sprintf("%5d  %s\n", e.code, e.meaning)
		if !strings.Contains(help, line) {
			t.Errorf("run --help lacks %q", line)
		}
		inHelp = append(inHelp, fmt.Sprint(e.code))
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "\n## Exit codes\n")
	if !ok {
		t.Fatal(`README.md has no "## Exit codes" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	var inReadme []string
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Split(line, "|"); len(f) > 2 {
			if code := strings.TrimSpace(f[1]); code != "" && code[0] >= '0' && code[0] <= '9' {
				inReadme = append(inReadme, code)
			}
		}
	}
	if diff := cmp.Diff(inReadme, inHelp); diff != "" {
		t.Errorf("exit codes in README.md (-) and run --help (+):\n%s", diff)
	}
}

func TestVersionOf(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "3519df58451c9b70533b417e05ab6e16062a063d"
	for _, tt := range []struct {
		name string
		set  string
		bi   *debug.BuildInfo
		want string
	}{
		{"ldflags", "1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}, "1.2.3"},
		{"go install in a clone", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261123000019-3519df58451c+dirty"}},
			"v0.0.0-20261123000019-3519df58451c+dirty"},
		{"tagged", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.0.0"}}, "v1.0.0"},
		{"revision only", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs", "git", "vcs.revision", rev, "vcs.modified", "false")}, "dev-3519df58451c"},
		{"modified", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", rev, "vcs.modified", "true")}, "dev-3519df58451c-dirty"},
		{"nothing known", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"no build info", "", nil, "dev"},
	} {
		if got := versionOf(tt.set, tt.bi); got != tt.want {
			t.Errorf("%s: versionOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestSecondSignal sends signals to the test process itself, with main's
// handling of the first one in place, and checks which of them secondSignal
// takes for the user's "end it now". Not parallel: the signals reach the
// whole process.
func TestSecondSignal(t *testing.T) {
	raise := func(sig syscall.Signal) {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
	}
	closed := func(c <-chan struct{}, wait time.Duration) bool {
		select {
		case <-c:
			return true
		case <-time.After(wait):
			return false
		}
	}
	notify := func() (context.Context, context.CancelFunc) {
		return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	}

	t.Run("one signal only cancels", func(t *testing.T) {
		ctx, stop := notify()
		defer stop()
		kill, stopSecond := secondSignal(ctx)
		defer stopSecond()
		raise(syscall.SIGINT)
		<-ctx.Done()
		if closed(kill, 300*time.Millisecond) {
			t.Fatal("the first signal was taken for the second")
		}
		raise(syscall.SIGTERM)
		if !closed(kill, 5*time.Second) {
			t.Fatal("the second signal did not close kill")
		}
	})
	// Two signals at once (two kinds, so the kernel cannot merge them):
	// the second comes before anything reacted to the first.
	t.Run("fast second signal", func(t *testing.T) {
		ctx, stop := notify()
		defer stop()
		kill, stopSecond := secondSignal(ctx)
		defer stopSecond()
		raise(syscall.SIGINT)
		raise(syscall.SIGHUP)
		if !closed(kill, 5*time.Second) {
			t.Fatal("a second signal sent right after the first was lost")
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		ctx, stop := notify()
		defer stop()
		raise(syscall.SIGINT)
		<-ctx.Done()
		kill, stopSecond := secondSignal(ctx)
		defer stopSecond()
		raise(syscall.SIGINT)
		if !closed(kill, 5*time.Second) {
			t.Fatal("a signal after the cancellation did not close kill")
		}
	})
}
