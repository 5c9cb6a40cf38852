package main

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestMain makes the test binary the subreaper of the snapctl runs the
// end-to-end tests start, so no valgrind, vgdb or gdb can outlive them.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

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

// TestNoArgumentsPrintsHelp checks that the root, runnable so that its
// arguments are validated, still prints the help and succeeds on its own.
func TestNoArgumentsPrintsHelp(t *testing.T) {
	root := newRootCmd("dev")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "Available Commands:") {
		t.Errorf("snapctl with no arguments printed %q, want the help", out.String())
	}
}

// TestSecondSignal sends signals to the test process itself, with main's
// handling of the first one in place, and checks which of them secondSignal
// takes for the user's "end it now".
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
