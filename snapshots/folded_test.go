package snapshots

import (
	"bytes"
	"strings"
	"testing"
)

func renderFolded(t *testing.T, file, sel string, opts FoldedOptions) string {
	t.Helper()
	s, err := parseRecorded(t, file).Select(sel)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := RenderFolded(&buf, s, opts); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestFoldedLeak(t *testing.T) {
	got := renderFolded(t, "leak.detailed.massif", "", FoldedOptions{})
	want := "main;handle_request;make_payload 1000\nmain 16\n"
	if got != want {
		t.Errorf("folded:\n%s\nwant:\n%s", got, want)
	}
	got = renderFolded(t, "leak.detailed.massif", "", FoldedOptions{Lines: true})
	want = "main (leak.c:27);handle_request (leak.c:19);make_payload (leak.c:12) 1000\nmain (leak.c:24) 16\n"
	if got != want {
		t.Errorf("folded with lines:\n%s\nwant:\n%s", got, want)
	}
}

func TestFoldedGolden(t *testing.T) {
	for _, tc := range []struct {
		file, sel string
		opts      FoldedOptions
	}{
		{"taskpool.massif", "peak", FoldedOptions{}},
		{"threshold.massif", "", FoldedOptions{Lines: true}},
		{"threads.massif", "", FoldedOptions{}},
		{"inline.massif", "", FoldedOptions{Lines: true}},
	} {
		got := renderFolded(t, tc.file, tc.sel, tc.opts)
		checkGolden(t, "folded/"+tc.file+".txt", []byte(got))
		// Every line is "stack bytes" with a positive byte count.
		for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
			i := strings.LastIndexByte(l, ' ')
			if n, ok := parseInt([]byte(l[i+1:])); i < 0 || !ok || n <= 0 {
				t.Errorf("%s: bad folded line %q", tc.file, l)
			}
		}
	}
}

func TestFoldedSeparators(t *testing.T) {
	s := &Snapshot{Tree: &Node{Bytes: 10, Children: []*Node{
		{Bytes: 7, Frame: Frame{Function: "a;b\nc"}},
		{Bytes: 2, Below: true, Places: 4},
	}}}
	var buf bytes.Buffer
	if err := RenderFolded(&buf, s, FoldedOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "(unattributed) 1\na:b c 7\n" + BelowFrameName + " 2\n"
	if buf.String() != want {
		t.Errorf("folded = %q, want %q", buf.String(), want)
	}
}
