package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every command's --format takes its formats from the one registry: the
// same message for a value it does not take, md for markdown wherever
// markdown is taken, and no format in the registry that no command writes.
func TestFormatRegistry(t *testing.T) {
	root := newRootCmd("dev")
	taken := map[string][]string{}
	for _, cmd := range root.Commands() {
		flag := cmd.Flags().Lookup("format")
		if flag == nil {
			continue
		}
		fv, ok := flag.Value.(*formatValue)
		if !ok {
			t.Errorf("%s --format is a %T, not a formatValue", cmd.Name(), flag.Value)
			continue
		}
		taken[cmd.Name()] = fv.names
		if err := fv.Set("xml"); err == nil || err.Error() != "want "+orList(fv.names) {
			t.Errorf("%s --format xml: %v", cmd.Name(), err)
		}
		if slices.Contains(fv.names, "markdown") {
			if err := fv.Set("md"); err != nil || fv.String() != "markdown" {
				t.Errorf("%s --format md: %v, holds %q", cmd.Name(), err, fv.String())
			}
		}
	}
	want := map[string][]string{
		"run":     {"text", "markdown", "json"},
		"attach":  {"text", "markdown", "json"},
		"diff":    {"text", "markdown", "json"},
		"compare": {"text", "markdown", "json"},
		"show":    {"text", "json"},
		"export":  {"pprof", "folded"},
	}
	if diff := cmp.Diff(want, taken); diff != "" {
		t.Errorf("formats per command (-want +got):\n%s", diff)
	}
	for _, f := range outputFormats {
		used := false
		for _, names := range taken {
			used = used || slices.Contains(names, f.name)
		}
		if !used {
			t.Errorf("format %s is taken by no command", f.name)
		}
	}
	if got := orList([]string{"a", "b", "c"}); got != "a, b or c" {
		t.Errorf("orList = %q", got)
	}
	if !strings.Contains(root.Commands()[0].Flags().Lookup("format").Usage, ": ") {
		t.Error("--format's help does not list the formats")
	}
}
