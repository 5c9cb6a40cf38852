package snapshots

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds the parser arbitrary bytes: it must return a snapshot list
// or an error, never panic, and the streaming totals-only reader must agree
// with the full parse on every total. The seed corpus is the recorded files
// plus testdata/fuzz/FuzzParse, so plain `go test` runs it.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(recorded, "*.m*"))
	for _, name := range files {
		if filepath.Ext(name) == ".gz" {
			continue // the text inside is seeded already
		}
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		if len(data) < 64<<10 {
			f.Add(data)
		}
	}
	f.Add([]byte(goodFile))
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.HasPrefix(data, gzipMagic) {
			// Decompressed by compress/gzip, whose errors are its own:
			// it must not panic. The text parser is fuzzed below.
			Parse(bytes.NewReader(data), "fuzz")
			return
		}
		full, err := Parse(bytes.NewReader(data), "fuzz")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			return
		}
		for _, s := range full.Snapshots {
			if (s.Tree == nil) != (s.Kind == TreeEmpty) {
				t.Fatalf("snapshot %d: kind %v with tree %v", s.Index, s.Kind, s.Tree != nil)
			}
		}
		r := NewReader(bytes.NewReader(data), "fuzz", ReadOptions{TotalsOnly: true})
		for i := 0; ; i++ {
			s, err := r.Next()
			if err == io.EOF {
				if i != len(full.Snapshots) {
					t.Fatalf("totals-only read %d snapshots, full parse %d", i, len(full.Snapshots))
				}
				break
			}
			if err != nil {
				// Totals-only does not check trees, so it may accept more
				// but never less.
				t.Fatalf("totals-only failed where the full parse succeeded: %v", err)
			}
			if i >= len(full.Snapshots) || s.HeapBytes != full.Snapshots[i].HeapBytes {
				t.Fatalf("totals-only snapshot %d differs", i)
			}
		}
		for _, sel := range []string{"", "peak", "0", "curB"} {
			full.Select(sel)
		}
		// Show streams tree lines as read, RenderShow walks the nodes: both
		// must print the same text.
		for _, th := range []float64{0, 1, 50} {
			var a, b bytes.Buffer
			full.Desc, full.Cmd, full.TimeUnit = "", "", "" // a late header prints at the end when streaming
			if err := RenderShow(&a, full, ShowOptions{Threshold: th}); err != nil {
				t.Fatal(err)
			}
			stripped := stripHeader(data)
			if err := Show(&b, NewReader(bytes.NewReader(stripped), "fuzz", ReadOptions{}), ShowOptions{Threshold: th}); err != nil {
				t.Fatalf("Show failed where Parse succeeded: %v", err)
			}
			if a.String() != b.String() {
				t.Fatalf("threshold %g: Show and RenderShow differ:\n%s\n----\n%s", th, b.String(), a.String())
			}
		}
	})
}

// stripHeader drops desc:, cmd: and time_unit: lines, which may come
// anywhere between snapshots.
func stripHeader(data []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		t := bytes.TrimLeft(line, "")
		if bytes.HasPrefix(t, []byte("desc:")) || bytes.HasPrefix(t, []byte("cmd:")) || bytes.HasPrefix(t, []byte("time_unit:")) {
			continue
		}
		out = append(out, line...)
	}
	return out
}
