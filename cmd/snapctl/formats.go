package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// outputFormat is one way a snapctl command writes its result.
type outputFormat struct {
	name    string
	aliases []string
	what    string // what it is, for --format's help
}

// outputFormats lists every output format once. A command's --format flag
// takes a subset of them (formatFlag): one name, one meaning, one message
// for a value the command does not take.
var outputFormats = []outputFormat{
	{name: "text", what: "the report for a terminal"},
	{name: "markdown", aliases: []string{"md"}, what: "Markdown, for a bug report or a CI summary"},
	{name: "json", what: "JSON, for scripts"},
	{name: "pprof", what: "a gzipped profile.proto for go tool pprof"},
	{name: "folded", what: "folded stacks for flamegraph.pl, speedscope or inferno"},
}

// formatValue is a --format flag: it takes one of names (or an alias of
// one) and holds the format's name, so a wrong value is refused while the
// flags are parsed, with the same message on every command.
type formatValue struct {
	value *string
	names []string
}

func (f *formatValue) String() string { return *f.value }
func (f *formatValue) Type() string   { return "string" }

func (f *formatValue) Set(s string) error {
	for _, name := range f.names {
		if s == name || slices.Contains(formatByName(name).aliases, s) {
			*f.value = name
			return nil
		}
	}
	return fmt.Errorf("want %s", orList(f.names))
}

// formatFlag adds --format to cmd, taking the named formats, the first
// the default, into value. The help lists the formats, and the shell
// completes them.
func formatFlag(cmd *cobra.Command, value *string, usage string, names ...string) {
	for _, name := range names {
		formatByName(name) // a name misspelt here panics at start-up, in every test
	}
	*value = names[0]
	cmd.Flags().Var(&formatValue{value: value, names: names}, "format", usage+": "+orList(names))
	enumFlag(cmd, "format", names...)
}

// formatByName returns the format called name.
func formatByName(name string) outputFormat {
	for _, f := range outputFormats {
		if f.name == name {
			return f
		}
	}
	panic("snapctl: no output format " + name)
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
