package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// memcheckSide is one side's standing of a compared site in `snapctl
// compare --format json`.
type memcheckSide struct {
	DefinitelyLost struct {
		BytesPerHit int64 `json:"bytes_per_hit"`
	} `json:"definitely_lost"`
	StillReachable struct {
		BytesPerHit int64 `json:"bytes_per_hit"`
	} `json:"still_reachable"`
	HeldBy *struct {
		Root *struct {
			Name string `json:"name"`
		} `json:"root"`
	} `json:"held_by"`
}

// Two memcheck runs of reach.c, the second with lose() freeing its
// block, compare by site: lose's suspect is gone, its lost 640 B per hit
// carried from the first run; keep's persists, reachable on both sides
// and held by registry (exit 10: a suspect persists).
func TestCompareMemcheckRuns(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	bin := testenv.Build(t, "../../driver/backend/memcheck/testdata/reach.c", "-pthread")
	const plan = "backend: memcheck\nbreakpoints:\n  - name: round\n    location: round_done\n"
	a := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"4"}}, exitOK)
	b := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"4", "-1", "fixed"}}, exitOK)
	code, stdout, stderr := snapctlCmd(t, "compare", "--format", "json", a.Out, b.Out)
	if code != exitLeak {
		t.Fatalf("compare exited %d, want %d\n%s%s", code, exitLeak, stdout, stderr)
	}
	var doc struct {
		Suspects []struct {
			Frame          frame         `json:"frame"`
			Status         string        `json:"status"`
			BeforeMemcheck *memcheckSide `json:"before_memcheck"`
			AfterMemcheck  *memcheckSide `json:"after_memcheck"`
		} `json:"suspects"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	got := make(map[string]string)
	for _, s := range doc.Suspects {
		side := func(m *memcheckSide) string {
			if m == nil {
				return "-"
			}
			held := ""
			if m.HeldBy != nil && m.HeldBy.Root != nil {
				held = " held by " + m.HeldBy.Root.Name
			}
			return "lost " + strconv.FormatInt(m.DefinitelyLost.BytesPerHit, 10) + " reachable " + strconv.FormatInt(m.StillReachable.BytesPerHit, 10) + held
		}
		got[s.Frame.Function] = s.Status + ": " + side(s.BeforeMemcheck) + " → " + side(s.AfterMemcheck)
	}
	want := map[string]string{
		"lose": "gone: lost 640 reachable 0 → -",
		"keep": "persists: lost 0 reachable 640 held by registry → lost 0 reachable 640 held by registry",
	}
	if len(got) != 2 || got["lose"] != want["lose"] || got["keep"] != want["keep"] {
		t.Errorf("compared suspects %q, want %q", got, want)
	}
	_, text, _ := snapctlCmd(t, "compare", a.Out, b.Out)
	if !strings.Contains(text, "lose (reach.c:") || !strings.Contains(text, "; lost +640 B/hit → none") ||
		!strings.Contains(text, "; reachable +640 B/hit held by registry → reachable +640 B/hit held by registry") {
		t.Errorf("compare's text:\n%s", text)
	}
}
