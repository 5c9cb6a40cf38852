package plan

import (
	"fmt"
	"sort"
	"strings"
)

// resumingCommands are the gdb commands that resume or end the target,
// with their aliases, each mapped to the command it names. snapctl resumes
// the target itself; one of these in a plan would break its stop loop, so
// they are refused.
var resumingCommands = commandNames(
	"continue c fg",
	"next n",
	"nexti ni",
	"step s",
	"stepi si",
	"finish fin",
	"until u",
	"advance",
	"jump j",
	"run r",
	"start",
	"starti",
	"kill k",
	"detach",
	"disconnect",
	"quit q exit",
	"target",
	"attach",
	"signal",
	"reverse-continue rc",
	"reverse-step rs",
	"reverse-next rn",
	"reverse-stepi rsi",
	"reverse-nexti rni",
	"reverse-finish",
)

// commandNames maps each word of each "command alias..." line to the
// line's first word.
func commandNames(lines ...string) map[string]string {
	m := make(map[string]string)
	for _, l := range lines {
		words := strings.Fields(l)
		for _, w := range words {
			m[w] = words[0]
		}
	}
	return m
}

// otherCommands are the gdb commands and aliases whose whole name is a
// prefix of a resuming command's name. gdb takes a word that is a whole
// name before reading it as an abbreviation, so "f" is frame, not finish.
var otherCommands = map[string]string{
	"d":   "delete",
	"dis": "disable",
	"f":   "frame",
	"rev": "reverse-search",
	"t":   "thread",
}

// checkCommand explains why a gdb CLI command is refused, or returns "".
//
// gdb accepts any abbreviation of a command that is unambiguous, after
// the whole names and aliases, so "cont" and "fin" are continue and
// finish. A command is refused when its first word is a whole name or
// alias of a resuming command, or when it is a prefix of one and not the
// whole name of another command. A prefix that gdb finds ambiguous ("st",
// "co") is refused too: gdb would reject it anyway, and a later gdb may
// not find it ambiguous.
func checkCommand(c string) string {
	word := strings.ToLower(commandWord(c))
	if word == "" || otherCommands[word] != "" {
		return ""
	}
	if _, ok := resumingCommands[word]; ok {
		return fmt.Sprintf("command %q would resume or end the target; snapctl resumes it itself", c)
	}
	shown := make(map[string]string) // command -> the name to show for it
	for name, cmd := range resumingCommands {
		switch {
		case !strings.HasPrefix(name, word):
		case strings.HasPrefix(cmd, word):
			shown[cmd] = cmd
		case shown[cmd] == "":
			shown[cmd] = name
		}
	}
	var names []string
	for _, name := range shown {
		names = append(names, fmt.Sprintf("%q", name))
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	alt := names[len(names)-1]
	if len(names) > 1 {
		alt = strings.Join(names[:len(names)-1], ", ") + " or " + alt
	}
	return fmt.Sprintf("command %q would resume or end the target (gdb may take %q for %s); snapctl resumes it itself", c, word, alt)
}

// commandWord returns the command name gdb reads at the start of a CLI
// line: "!" or "|" alone, or the longest run of letters, digits and
// "-_.+<>$", so that "c&" and "c;" are the command "c".
func commandWord(line string) string {
	s := strings.TrimLeft(line, " \t")
	if s != "" && (s[0] == '!' || s[0] == '|') {
		return s[:1]
	}
	i := 0
	for i < len(s) && commandChar(s[i]) {
		i++
	}
	return s[:i]
}

func commandChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.+<>$", c) >= 0
}
