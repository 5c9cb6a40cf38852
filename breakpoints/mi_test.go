package breakpoints

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/internal/testenv"
)

func TestQuoteMI(t *testing.T) {
	for in, want := range map[string]string{
		"main":                   "main",
		"leak.c:15":              "leak.c:15",
		"*0x401136":              "*0x401136",
		"":                       `""`,
		"id % 10 == 0":           `"id % 10 == 0"`,
		`s == "a\b"`:             `"s == \"a\\b\""`,
		"'ns::f(int, char)'":     `"'ns::f(int, char)'"`,
		"a\tb\nc\r":              `"a\tb\nc\r"`,
		"x\x01\x7f":              `"x\001\177"`,
		"größe":                  "größe",
		"Scheduler::submit(int)": "Scheduler::submit(int)",
	} {
		if got := quoteMI(in); got != want {
			t.Errorf("quoteMI(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestInsertArgs(t *testing.T) {
	tests := []struct {
		b    Breakpoint
		want []string
	}{
		{Breakpoint{Location: "main"}, []string{"main"}},
		{Breakpoint{Location: "f", Skip: 3}, []string{"-i", "3", "f"}},
		{Breakpoint{Location: "f", Thread: 2}, []string{"-c", `"$_thread == 2"`, "f"}},
		{Breakpoint{Location: "f", Condition: "x>1"}, []string{"-c", "x>1", "f"}},
		{Breakpoint{Location: "f", Condition: `s[0] == '"'`, Thread: 4, Skip: 1},
			[]string{"-i", "1", "-c", `"$_thread == 4 && (s[0] == '\"')"`, "f"}},
		{Breakpoint{Location: "-source a.c -line 3"}, []string{"--source", "a.c", "--line", "3"}},
		{Breakpoint{Location: "-func ns::f(int, char) -qualified", Skip: 1}, []string{"-i", "1", "--function", `"ns::f(int, char)"`, "--qualified"}},
		// Every, MaxHits and AroundCall belong to the stop loop.
		{Breakpoint{Location: "f", Every: 5, MaxHits: 10, AroundCall: true}, []string{"f"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.b.InsertArgs()); diff != "" {
			t.Errorf("%+v: InsertArgs (-want +got):\n%s", tt.b, diff)
		}
	}
}

// TestInsertArgsInGdb inserts breakpoints built by InsertArgs into a real
// gdb, over MI, on a compiled C++ fixture, and checks that gdb understood
// each location, condition and ignore count as meant.
func TestInsertArgsInGdb(t *testing.T) {
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "testdata/locations.cpp")

	tests := []struct {
		b              Breakpoint
		function, line string
		cond, ignore   string
	}{
		{b: Breakpoint{Location: "handle_request"}, function: "handle_request(int)"},
		{b: Breakpoint{Location: "locations.cpp:16", Condition: `id % 10 == 0`, Skip: 2},
			function: "handle_request(int)", line: "16", cond: "id % 10 == 0", ignore: "2"},
		{b: Breakpoint{Location: "Scheduler::submit(int)", Thread: 1, Condition: "job > 3"},
			function: "Scheduler::submit(int)", cond: "$_thread == 1 && (job > 3)"},
		{b: Breakpoint{Location: "ns::f(int, char)"}, function: "ns::f(int, char)"},
		{b: Breakpoint{Location: "'ns::f(int, char)'"}, function: "ns::f(int, char)"},
		{b: Breakpoint{Location: "-source locations.cpp -line 17", Condition: `queue_len != 1`},
			function: "handle_request(int)", line: "17", cond: "queue_len != 1"},
		{b: Breakpoint{Location: "-function ns::f(int, char) -qualified"}, function: "ns::f(int, char)"},
	}

	g := startMI(t, bin)
	for i, tt := range tests {
		res := g.send(t, fmt.Sprintf("%d-break-insert %s", i+1, strings.Join(tt.b.InsertArgs(), " ")))
		if !strings.HasPrefix(res, fmt.Sprintf("%d^done,bkpt={", i+1)) {
			t.Errorf("%q: gdb answered %s", tt.b.Location, res)
			continue
		}
		want := []string{fmt.Sprintf(`func="%s"`, tt.function)}
		if tt.line != "" {
			want = append(want, fmt.Sprintf(`line="%s"`, tt.line))
		}
		if tt.cond != "" {
			want = append(want, fmt.Sprintf(`cond="%s"`, strings.ReplaceAll(tt.cond, `"`, `\"`)))
		}
		if tt.ignore != "" {
			want = append(want, fmt.Sprintf(`ignore="%s"`, tt.ignore))
		}
		for _, w := range want {
			if !strings.Contains(res, w) {
				t.Errorf("%q: gdb's answer lacks %s:\n%s", tt.b.Location, w, res)
			}
		}
	}
	g.close(t)
}

// miGdb is the least MI client that TestInsertArgsInGdb needs:
// breakpoints may not import driver/mi.
type miGdb struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	cancel context.CancelFunc
}

func startMI(t *testing.T, bin string) *miGdb {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	cmd := exec.CommandContext(ctx, "gdb", "--nx", "--quiet", "--interpreter=mi3", bin)
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	g := &miGdb{cmd: cmd, stdin: stdin, lines: make(chan string, 100), cancel: cancel}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	go func() {
		s := bufio.NewScanner(stdout)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			g.lines <- s.Text()
		}
		close(g.lines)
	}()
	return g
}

// send writes one MI command and returns its result record.
func (g *miGdb) send(t *testing.T, command string) string {
	t.Helper()
	if _, err := io.WriteString(g.stdin, command+"\n"); err != nil {
		t.Fatalf("writing to gdb: %v", err)
	}
	token, _, _ := strings.Cut(command, "-")
	for line := range g.lines {
		if strings.HasPrefix(line, token+"^") {
			return line
		}
	}
	t.Fatalf("gdb exited before answering %s", command)
	return ""
}

func (g *miGdb) close(t *testing.T) {
	g.send(t, "99-gdb-exit")
	g.stdin.Close()
	if err := g.cmd.Wait(); err != nil {
		t.Errorf("gdb: %v", err)
	}
	g.cancel()
}
