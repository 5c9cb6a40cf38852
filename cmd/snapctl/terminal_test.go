package main

// Tests of what a terminal receives from `snapctl run`: the real binary runs
// with a pseudo-terminal as stdin, stdout and stderr, and the test reads
// every byte the terminal gets.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/internal/testenv"
)

// onTerminal runs snapctl with args on a new pseudo-terminal, with env added
// to the test's environment, and returns the bytes the terminal received
// and snapctl's exit code. The pseudo-terminal passes bytes unchanged
// ("\n" stays "\n").
func onTerminal(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	master, slave, err := term.OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	ctx, cancel := testenv.Context(2 * time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, snapctlBinary(t), args...)
	cmd.Dir = t.TempDir()
	// Marked as the test's own: the tests beside it take a tool with no
	// mark for their leftover.
	cmd.Env = append(append(os.Environ(), testenv.ScopeEnv(t)), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if err := cmd.Start(); err != nil {
		slave.Close()
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(testenv.ReapOrphans)
	read := make(chan []byte, 1)
	go func() {
		// Read until every holder of the slave closed it (EIO).
		data, _ := io.ReadAll(master)
		read <- data
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	code := 0
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		code = ee.ExitCode()
	default:
		t.Fatalf("snapctl did not exit by itself: %v", err)
	}
	select {
	case data := <-read:
		return string(data), code
	case <-time.After(testenv.Scaled(10 * time.Second)):
		t.Fatal("the terminal was still held open 10s (stretched by the load) after snapctl exited")
		return "", 0
	}
}

// screen renders what a terminal shows for out, line by line: "\r"
// returns to the first column and later characters overwrite earlier ones;
// escape sequences are dropped. Trailing spaces are trimmed.
func screen(out string) []string {
	var lines []string
	var line []rune
	col := 0
	for i := 0; i < len(out); i++ {
		switch c := out[i]; c {
		case '\n':
			lines = append(lines, strings.TrimRight(string(line), " "))
			line, col = line[:0], 0
		case '\r':
			col = 0
		case '\x1b':
			if i+1 < len(out) && out[i+1] == '[' {
				i += 2
				for i < len(out) && (out[i] < '@' || out[i] > '~') {
					i++
				}
			}
		default:
			r := rune(c)
			if col < len(line) {
				line[col] = r
			} else {
				line = append(line, r)
			}
			col++
		}
	}
	if len(line) > 0 {
		lines = append(lines, strings.TrimRight(string(line), " "))
	}
	return lines
}

// The program's lines reach the terminal whole and in order, stdout and
// stderr interleaved as written; the status line shows from the start and
// is gone from the screen at the end. TERM=dumb gets neither the status
// line nor colours nor cursor movement; NO_COLOR gets no colours.
func TestTerminalOutput(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"chatty.c")
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(plan, []byte(requestPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	const requests = 12
	var program []string
	for i := range requests {
		program = append(program, fmt.Sprintf("request %d done", i))
		if i%10 == 0 {
			program = append(program, fmt.Sprintf("note: %d requests", i))
		}
	}
	program = append(program, fmt.Sprintf("served %d requests", requests))

	for _, tt := range []struct {
		name           string
		env            []string
		status, colour bool
	}{
		{"xterm", []string{"TERM=xterm-256color", "NO_COLOR="}, true, true},
		{"dumb", []string{"TERM=dumb", "NO_COLOR="}, false, false},
		{"no colour", []string{"TERM=xterm-256color", "NO_COLOR=1"}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, code := onTerminal(t, tt.env, "run", "--out", filepath.Join(t.TempDir(), "run"), plan, bin, fmt.Sprint(requests))
			if code != 0 {
				t.Fatalf("snapctl exited with %d:\n%s", code, out)
			}
			if !tt.status {
				// Without a status line the program writes to the
				// terminal itself, and the report follows its
				// unfinished last line as a shell prompt would.
				out = strings.Replace(out, program[len(program)-1], program[len(program)-1]+"\n", 1)
			}
			lines := screen(out)
			var got []string
			for _, l := range lines {
				if strings.HasPrefix(l, "request ") || strings.HasPrefix(l, "note: ") || strings.HasPrefix(l, "served ") {
					got = append(got, l)
				}
			}
			if diff := cmp.Diff(program, got); diff != "" {
				t.Errorf("the program's lines on the screen (-want +got):\n%s\nbytes: %q", diff, out)
			}
			// The report starts on a line of its own after the
			// program's unfinished last line.
			if i := indexOf(lines, program[len(program)-1]); i < 0 || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "verdict: ") {
				t.Errorf("the report does not start on the line after the program's last:\n%s", strings.Join(lines, "\n"))
			}
			for _, l := range lines {
				if strings.Contains(l, "request: ") || strings.Contains(l, "valgrind...") || strings.Contains(l, "the plan...") {
					t.Errorf("the status line stayed on the screen: %q", l)
				}
			}
			if shown := strings.Contains(out, "starting valgrind...") && strings.Contains(out, "request: "); shown != tt.status {
				t.Errorf("status line shown: %v, want %v\nbytes: %q", shown, tt.status, out)
			}
			if coloured := strings.Contains(out, "\x1b["); coloured != tt.colour {
				t.Errorf("escape sequences: %v, want %v\nbytes: %q", coloured, tt.colour, out)
			}
			if strings.Contains(out, "\x1b[K") {
				t.Errorf("the status line erases with an escape sequence: %q", out)
			}
			if !tt.status && strings.Contains(out, "\r") {
				t.Errorf("carriage return without a status line: %q", out)
			}
		})
	}
}

func indexOf(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}

// With --format markdown, stdout carries report.md alone; the program's
// stdout goes to stderr, as with --format json.
func TestRunMarkdownKeepsProgramOffStdout(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"chatty.c")
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"3"}, Flags: []string{"--format", "markdown"}}, 0)
	md, err := os.ReadFile(filepath.Join(res.Out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != string(md) {
		t.Errorf("stdout is not report.md alone:\n%s", res.Stdout)
	}
	for _, want := range []string{"request 0 done\n", "note: 0 requests\n", "request 2 done\n", "served 3 requests"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr lacks the program's %q:\n%s", want, res.Stderr)
		}
	}
}

// valgrind writes straight to the target's terminal, so that its lines
// keep their order with the program's; what it says before its log is
// open (a bad option) still reaches snapctl's message, with a status line
// or without.
func TestTerminalValgrindSaysWhy(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"chatty.c")
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	if err := os.WriteFile(plan, []byte("valgrind:\n  args: [\"--max-snapshots=lots\"]\n"+requestPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"xterm-256color", "dumb"} {
		t.Run(name, func(t *testing.T) {
			out, code := onTerminal(t, []string{"TERM=" + name, "NO_COLOR=1"}, "run", "--out", filepath.Join(t.TempDir(), "run"), plan, bin, "1")
			if code != exitFailure {
				t.Errorf("exit code %d, want %d:\n%s", code, exitFailure, out)
			}
			lines := screen(out)
			at := slices.IndexFunc(lines, func(l string) bool {
				return strings.HasPrefix(l, "snapctl: valgrind: exited before its gdbserver was ready")
			})
			if at < 0 || !slices.Contains(lines[at:], "    valgrind: Bad option: --max-snapshots=lots") {
				t.Errorf("the message does not quote valgrind:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}
