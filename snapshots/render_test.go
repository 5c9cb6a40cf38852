package snapshots

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// fileDiff diffs two recorded snapshot files as `snapctl diff` does.
func fileDiff(t *testing.T, a, b string, opts Options) *Diff {
	t.Helper()
	sa, sb := loadSnapshot(t, a), loadSnapshot(t, b)
	d := mustDiff(t, sa, sb, opts)
	d.From = &SnapshotRef{File: a, Snapshot: sa.Index, HeapBytes: sa.HeapBytes}
	d.To = &SnapshotRef{File: b, Snapshot: sb.Index, HeapBytes: sb.HeapBytes}
	return d
}

func TestRenderDiffGolden(t *testing.T) {
	diffs := map[string]*Diff{
		"taskpool":  fileDiff(t, "taskpool/before.ms", "taskpool/after.ms", Options{}),
		"threshold": fileDiff(t, "threshold/before.ms", "threshold/after.ms", Options{}),
		"growth":    fileDiff(t, "growth/hit-1.ms", "growth/hit-7.ms", Options{}),
	}
	formats := map[Format]string{FormatText: "txt", FormatMarkdown: "md", FormatJSON: "json"}
	for name, d := range diffs {
		for f, ext := range formats {
			var b bytes.Buffer
			if err := RenderDiff(&b, d, f, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			checkAnalysisGolden(t, fmt.Sprintf("diff-%s.%s", name, ext), b.Bytes())
		}
	}
}

// growthReport is the analysis the driver would make of growth.c's recorded
// hits at breakpoint "request", plus a within-call diff of the C++ fixture.
func growthReport(t *testing.T) *Report {
	t.Helper()
	s := NewSeries("request", Options{})
	r := &Report{Title: "snapctl run: growth", Breakpoints: []string{"request", "submit"}}
	for i := 1; i <= 7; i++ {
		d, err := s.Add(i, i, loadSnapshot(t, fmt.Sprintf("growth/hit-%d.ms", i)))
		if err != nil {
			t.Fatal(err)
		}
		if d != nil {
			r.Diffs = append(r.Diffs, d)
		}
	}
	within := mustDiff(t, loadSnapshot(t, "taskpool/before.ms"), loadSnapshot(t, "taskpool/after.ms"), Options{})
	within.Kind, within.Breakpoint, within.FromSeq, within.ToSeq = "within-call", "submit", 8, 9
	r.Diffs = append(r.Diffs, within)
	r.Suspects = s.Suspects()
	return r
}

func TestRenderReportGolden(t *testing.T) {
	r := growthReport(t)
	opts := RenderOptions{MaxSites: 5, MaxFrames: 4}
	for f, ext := range map[Format]string{FormatText: "txt", FormatMarkdown: "md", FormatJSON: "json"} {
		var b bytes.Buffer
		if err := RenderReport(&b, r, f, opts); err != nil {
			t.Fatal(err)
		}
		checkAnalysisGolden(t, "report-growth."+ext, b.Bytes())
	}
}

// The JSON is run.json's: field names as docs/design.md gives them
// ("run.json, schema snapctl.run/v1").
func TestRenderJSONFields(t *testing.T) {
	var b bytes.Buffer
	if err := RenderReportJSON(&b, growthReport(t)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Diffs []struct {
			Kind       string `json:"kind"`
			Breakpoint string `json:"breakpoint"`
			FromSeq    int    `json:"from_seq"`
			ToSeq      int    `json:"to_seq"`
			DeltaBytes int64  `json:"delta_bytes"`
			Sites      []struct {
				Frame struct {
					Function string `json:"function"`
					File     string `json:"file"`
					Line     int    `json:"line"`
				} `json:"frame"`
				Stack  []map[string]any `json:"stack"`
				Before int64            `json:"before"`
				After  int64            `json:"after"`
				Delta  int64            `json:"delta"`
				Change string           `json:"change"`
			} `json:"sites"`
		} `json:"diffs"`
		Suspects []map[string]any `json:"suspects"`
	}
	dec := json.NewDecoder(&b)
	dec.DisallowUnknownFields()
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	d := doc.Diffs[1]
	if d.Kind != "between-hits" || d.Breakpoint != "request" || d.FromSeq != 2 || d.ToSeq != 3 || d.DeltaBytes != 88 {
		t.Errorf("diff 2→3: %+v", d)
	}
	if s := d.Sites[0]; s.Frame.Function != "grow_scratch" || s.Frame.File != "growth.c" || s.Frame.Line != 39 ||
		s.Before != 64 || s.After != 128 || s.Delta != 64 || s.Change != "grown" || len(s.Stack) != 3 {
		t.Errorf("first site of diff 2→3: %+v", s)
	}
	if len(doc.Suspects) != 1 {
		t.Fatalf("suspects: %v", doc.Suspects)
	}
	for _, k := range []string{"frame", "stack", "breakpoint", "growth_per_hit", "growing_intervals", "intervals", "total_growth"} {
		if _, ok := doc.Suspects[0][k]; !ok {
			t.Errorf("suspect has no %q: %v", k, doc.Suspects[0])
		}
	}

	b.Reset()
	if err := RenderDiffJSON(&b, fileDiff(t, "taskpool/before.ms", "taskpool/after.ms", Options{})); err != nil {
		t.Fatal(err)
	}
	var diffDoc map[string]any
	if err := json.Unmarshal(b.Bytes(), &diffDoc); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{"schema": "snapctl.diff/v1", "delta_bytes": 728.0} {
		if diffDoc[k] != want {
			t.Errorf("snapctl.diff/v1 %s = %v, want %v", k, diffDoc[k], want)
		}
	}
	for _, k := range []string{"from", "to", "sites"} {
		if _, ok := diffDoc[k]; !ok {
			t.Errorf("snapctl.diff/v1 has no %q", k)
		}
	}
	if strings.Contains(b.String(), `\u003c`) {
		t.Error("JSON escapes < in C++ names")
	}
}

func TestRenderColor(t *testing.T) {
	d := fileDiff(t, "threshold/before.ms", "threshold/after.ms", Options{})
	var plain, color bytes.Buffer
	if err := RenderDiffText(&plain, d, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := RenderDiffText(&color, d, RenderOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "\x1b[") {
		t.Errorf("colour without Color:\n%q", plain.String())
	}
	if !strings.Contains(color.String(), ansiRed+"+195.3 KiB"+ansiReset) || !strings.Contains(color.String(), ansiGreen) {
		t.Errorf("no red growth or green shrinkage with Color:\n%q", color.String())
	}
}

// A failing writer makes every renderer fail, not panic or lie.
func TestRenderWriteError(t *testing.T) {
	r := growthReport(t)
	for _, f := range []Format{FormatText, FormatMarkdown, FormatJSON} {
		if err := RenderReport(errWriter{}, r, f, RenderOptions{}); err == nil {
			t.Errorf("RenderReport %s to a failing writer succeeded", f)
		}
		if err := RenderDiff(errWriter{}, r.Diffs[0], f, RenderOptions{}); err == nil {
			t.Errorf("RenderDiff %s to a failing writer succeeded", f)
		}
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestRenderDeltaTreeGolden(t *testing.T) {
	for _, name := range []string{"taskpool", "threshold"} {
		a, b := loadSnapshot(t, name+"/before.ms"), loadSnapshot(t, name+"/after.ms")
		var out bytes.Buffer
		if err := RenderDeltaTree(&out, DiffTree(a.Tree, b.Tree), TreeOptions{}); err != nil {
			t.Fatal(err)
		}
		checkAnalysisGolden(t, "tree-"+name+".txt", out.Bytes())
	}
	// Depth 1 shows the root's children only.
	a, b := loadSnapshot(t, "growth/hit-1.ms"), loadSnapshot(t, "growth/hit-3.ms")
	var out bytes.Buffer
	if err := RenderDeltaTree(&out, DiffTree(a.Tree, b.Tree), TreeOptions{MaxDepth: 1}); err != nil {
		t.Fatal(err)
	}
	checkAnalysisGolden(t, "tree-growth-depth1.txt", out.Bytes())
}

func TestRenderNil(t *testing.T) {
	for _, f := range []Format{FormatText, FormatMarkdown, FormatJSON} {
		if err := RenderDiff(io.Discard, nil, f, RenderOptions{}); err == nil {
			t.Errorf("RenderDiff %s of nil succeeded", f)
		}
		if err := RenderReport(io.Discard, nil, f, RenderOptions{}); err != nil {
			t.Errorf("RenderReport %s of nil: %v", f, err)
		}
		r := &Report{Diffs: []*Diff{nil, {Breakpoint: "bp"}}}
		if err := RenderReport(io.Discard, r, f, RenderOptions{}); err != nil {
			t.Errorf("RenderReport %s with a nil diff: %v", f, err)
		}
	}
}
