package plan

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, that every error it
// returns is a positioned ErrorList, and that what it accepts is valid:
// named, located breakpoints whose MI arguments can be built.
// The seed corpus is testdata/plans/*.yaml plus testdata/fuzz/FuzzParse.
//
//	go test ./breakpoints -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s -fuzzminimizetime 5s
func FuzzParse(f *testing.F) {
	plans, _ := filepath.Glob(filepath.Join("..", "testdata", "plans", "*.yaml"))
	for _, p := range plans {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("plan.yaml", data)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.File != "plan.yaml" || e.Msg == "" || !strings.HasPrefix(e.Error(), "plan.yaml") {
					t.Fatalf("badly formed error %#v", e)
				}
			}
			return
		}
		if len(p.Breakpoints) == 0 {
			t.Fatal("accepted a plan without breakpoints")
		}
		names := map[string]bool{}
		for _, b := range p.Breakpoints {
			if checkName(b.Name) != "" || names[b.Name] || b.Location == "" || b.Every < 1 || b.Skip < 0 || b.Pos.Line == 0 {
				t.Fatalf("accepted an invalid breakpoint %+v", b)
			}
			names[b.Name] = true
			if _, err := ExplicitLocation(b.Location); err != nil {
				t.Fatalf("accepted a location that does not read: %+v: %v", b, err)
			}
			b.ShouldSnapshot(1)
			b.Done(1)
		}
		for _, a := range p.Valgrind.Args {
			if !strings.HasPrefix(a, "-") {
				t.Fatalf("valgrind argument %q is not an option", a)
			}
		}
	})
}

// FuzzParseSize checks that ParseSize never panics and that what it
// accepts is a byte count it can justify: within range, and equal to the
// number times the unit for whole numbers.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"512", "1KiB", "2 MiB", "1.5KB", "0.3B", "-1", "1e3", "99999999999999999999GiB", " 4 GB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bad size ") {
				t.Fatalf("ParseSize(%q) error %q", s, err)
			}
			return
		}
		if n < 0 || n > maxSize {
			t.Fatalf("ParseSize(%q) = %d, out of range", s, n)
		}
	})
}
