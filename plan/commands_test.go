package plan

import (
	"context"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

func TestCheckCommand(t *testing.T) {
	refused := []string{
		"c", "co", "cont", "conti", "continue", "continue 3", "fg",
		"fin", "fini", "finish", "n", "nex", "next", "ni", "nexti",
		"s", "ste", "step", "si", "stepi", "u", "unt", "until 42",
		"adv", "advance main", "j", "ju", "jump 12", "r", "ru", "run",
		"sta", "start", "starti", "k", "ki", "kill", "q", "qu", "quit", "exit",
		"det", "detach", "disc", "disconnect", "tar", "target remote :1",
		"sig", "signal SIGINT", "at", "attach 1", "rc", "reverse-c",
		"rs", "rn", "rsi", "rni", "reverse-fin",
		// gdb ends the command word at the first character that cannot
		// be part of a command name.
		"c&", "c;", "  cont", "\tnext", "fin(", "s#",
		// gdb 13 has no such commands, but one that folded case would
		// take them for continue and next.
		"CONT", "N",
	}
	for _, c := range refused {
		if checkCommand(c) == "" {
			t.Errorf("checkCommand(%q) accepted it; gdb may take it for a command that resumes the target", c)
		}
	}
	allowed := []string{
		"p", "p x", "print x", "x/4xg $sp", "info", "info locals", "bt", "backtrace 5",
		"call f()", "set", "set var x = 1", "set print pretty on", "echo hi\\n",
		"output x", "printf \"%d\\n\", x", "shell ls", "!ls", "| bt | grep main",
		"monitor detailed_snapshot", "frame", "f", "f 1", "up", "down", "list",
		"d", "delete 2", "dis", "disable 1", "t", "thread 2", "rev", "where",
		"display x", "tbreak main", "source helpers.gdb", "# a comment",
		"continuex", "runx", "next.x",
	}
	for _, c := range allowed {
		if msg := checkCommand(c); msg != "" {
			t.Errorf("checkCommand(%q) = %q, want it accepted", c, msg)
		}
	}
}

func TestCheckCommandMessage(t *testing.T) {
	for c, want := range map[string]string{
		"continue": `command "continue" would resume or end the target; snapctl resumes it itself`,
		"c 3":      `command "c 3" would resume or end the target; snapctl resumes it itself`,
		"cont":     `command "cont" would resume or end the target (gdb may take "cont" for "continue"); snapctl resumes it itself`,
		"e":        `command "e" would resume or end the target (gdb may take "e" for "exit"); snapctl resumes it itself`,
		"st":       `command "st" would resume or end the target (gdb may take "st" for "start", "starti", "step" or "stepi"); snapctl resumes it itself`,
	} {
		if got := checkCommand(c); got != want {
			t.Errorf("checkCommand(%q) =\n%s\nwant\n%s", c, got, want)
		}
	}
}

// TestCheckCommandMatchesGdb asks the real gdb, with "help WORD", what it
// takes every prefix of every resuming command for, and checks that
// checkCommand refuses each word gdb resolves to a resuming command and
// accepts each word gdb resolves to another command. Words gdb finds
// ambiguous or unknown may go either way: gdb refuses them itself.
func TestCheckCommandMatchesGdb(t *testing.T) {
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)

	words := map[string]bool{}
	for name := range resumingCommands {
		for i := 1; i <= len(name); i++ {
			words[name[:i]] = true
		}
	}
	for name := range otherCommands {
		words[name] = true
	}
	for _, w := range []string{"p", "print", "x", "info", "bt", "call", "set", "echo", "output",
		"printf", "shell", "monitor", "frame", "up", "down", "list", "c&", "c;", "fin(", "CONT"} {
		words[w] = true
	}
	var cmds []string
	for name, cmd := range resumingCommands {
		if name == cmd {
			cmds = append(cmds, cmd)
		}
	}
	var sorted []string
	for w := range words {
		sorted = append(sorted, w)
	}
	sort.Strings(sorted)

	// One gdb answers every question: each answer follows a marker line.
	args := []string{"-batch", "-nx"}
	for _, w := range append(cmds, sorted...) {
		args = append(args, "-ex", "echo @@"+w+"\\n", "-ex", "help "+w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gdb", args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	help := map[string]string{}
	var word string
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if w, ok := strings.CutPrefix(line, "@@"); ok {
			word = strings.TrimSuffix(w, "\n")
			help[word] = "" // words asked twice get the same answer
			continue
		}
		help[word] += line
	}
	resolvesTo := map[string]string{} // help text -> resuming command
	for _, cmd := range cmds {
		if help[cmd] == "" {
			t.Fatalf("gdb printed no help for %q:\n%s", cmd, out)
		}
		resolvesTo[help[cmd]] = cmd
		// The first line lists the aliases, as in "continue, fg, c".
		if first, _, _ := strings.Cut(help[cmd], "\n"); strings.HasPrefix(first, cmd+", ") {
			for _, alias := range strings.Split(first, ", ") {
				if checkCommand(alias) == "" {
					t.Errorf("gdb's %q is an alias of %q, but checkCommand accepts it", alias, cmd)
				}
			}
		}
	}

	var resuming, other int
	for _, w := range sorted {
		h := help[w]
		switch cmd, ok := resolvesTo[h]; {
		case ok:
			resuming++
			if checkCommand(w) == "" {
				t.Errorf("gdb takes %q for %q, but checkCommand accepts it", w, cmd)
			}
		case strings.HasPrefix(h, "Ambiguous command") || strings.HasPrefix(h, "Undefined command"):
		default:
			other++
			if msg := checkCommand(w); msg != "" {
				first, _, _ := strings.Cut(h, "\n")
				t.Errorf("gdb takes %q for a command that does not resume the target (%s), but checkCommand refuses it: %s", w, first, msg)
			}
		}
	}
	// Guard against a parse that finds nothing to compare.
	if resuming < 50 || other < len(otherCommands) {
		t.Errorf("gdb resolved %d words to resuming commands and %d to others; the test expects at least 50 and %d:\n%s",
			resuming, other, len(otherCommands), out)
	}
}
