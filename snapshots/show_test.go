package snapshots

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderShowGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		opts ShowOptions
	}{
		{"leak.detailed.massif", ShowOptions{}},
		{"leak.default.massif", ShowOptions{}},
		{"threshold.massif", ShowOptions{}},
		{"taskpool.massif", ShowOptions{Threshold: 1}},
		{"inline.massif", ShowOptions{}},
		{"leak.xt.ms", ShowOptions{}},
		{"ticker.heaptrack.massif", ShowOptions{}},
		{"leak.detailed.massif", ShowOptions{Format: "json"}},
		{"threshold.massif", ShowOptions{Format: "json", Threshold: 2}},
		{"leak.xt.ms", ShowOptions{Format: "json"}},
	} {
		name := tc.file
		if tc.opts.Threshold != 0 {
			name += ".threshold"
		}
		ext := ".txt"
		if tc.opts.Format == "json" {
			ext = ".json"
		}
		t.Run(name+ext, func(t *testing.T) {
			f := parseRecorded(t, tc.file)
			f.Name = tc.file
			var buf bytes.Buffer
			if err := RenderShow(&buf, f, tc.opts); err != nil {
				t.Fatal(err)
			}
			if tc.opts.Format == "json" {
				var v map[string]any
				if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
					t.Fatalf("invalid JSON: %v", err)
				}
			}
			checkGolden(t, "show/"+name+ext, buf.Bytes())
			if tc.file == "ticker.heaptrack.massif" {
				// Streaming meets heaptrack's header only at the end of
				// the file and prints it there.
				return
			}

			// The streaming form writes the same bytes.
			fh, err := os.Open(filepath.Join(recorded, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			var stream bytes.Buffer
			if err := Show(&stream, NewReader(fh, tc.file, ReadOptions{}), tc.opts); err != nil {
				t.Fatal(err)
			}
			if stream.String() != buf.String() {
				t.Errorf("Show and RenderShow differ:\n%s\n----\n%s", stream.String(), buf.String())
			}
		})
	}
}

func TestShowExactBytes(t *testing.T) {
	f := parseRecorded(t, "threshold.massif")
	var buf bytes.Buffer
	if err := RenderShow(&buf, f, ShowOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"->94.61% (97.7 KiB) 0x109146: big (threshold.c:14)",
		"| ->04.73% (4.9 KiB) 0x1091E8: main (threshold.c:30)",
		"| ->00.09% (100 B) in 1 place, below massif's threshold",
		"->00.57% (600 B) in 3 places, all below massif's threshold",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	// At 5%, sized (5100 bytes, 4.8%) and the 600-byte bucket fold into one line.
	if err := RenderShow(&buf, f, ShowOptions{Threshold: 5}); err != nil {
		t.Fatal(err)
	}
	if want := "->05.39% (5.6 KiB) in 4 places, all below the display threshold (5.00%)"; !strings.Contains(buf.String(), want) {
		t.Errorf("--threshold 5 output lacks %q:\n%s", want, buf.String())
	}
}

func TestShowOptionsErrors(t *testing.T) {
	f := parseRecorded(t, "leak.detailed.massif")
	for _, opts := range []ShowOptions{{Format: "yaml"}, {Threshold: -1}, {Threshold: 101}} {
		if err := RenderShow(&bytes.Buffer{}, f, opts); err == nil {
			t.Errorf("RenderShow with %+v succeeded", opts)
		}
	}
}

func TestAppendPercent(t *testing.T) {
	for _, tc := range []struct {
		part, total int64
		want        string
	}{
		{0, 0, "00.00%"}, {1016, 1016, "100.00%"}, {1000, 1016, "98.43%"}, {16, 1016, "01.57%"},
		{1, 3, "33.33%"}, {2, 3, "66.67%"}, {1, 200000, "00.00%"}, {1, 20000, "00.01%"},
		{-16, 1016, "-01.57%"}, {1 << 62, 1 << 62, "100.00%"}, {1 << 60, 1 << 62, "25.00%"},
	} {
		if got := string(appendPercent(nil, tc.part, tc.total)); got != tc.want {
			t.Errorf("appendPercent(%d, %d) = %q, want %q", tc.part, tc.total, got, tc.want)
		}
	}
}

func TestAppendBytesMatchesFormatBytes(t *testing.T) {
	ns := []int64{0, 1, 1023, 1024, 1025, 1126, 1536, 100000, 1<<20 - 1, 1 << 20, 1048064, 1048063, 1048115, 3<<30 + 12345, 1<<53 + 1, 1 << 62, 1<<63 - 1, -5, -2048}
	for i := int64(0); i < 200000; i += 7 {
		ns = append(ns, 1024+i*53)
	}
	for _, n := range ns {
		if got, want := string(appendBytes(nil, n)), FormatBytes(n); got != want {
			t.Errorf("appendBytes(%d) = %q, FormatBytes = %q", n, got, want)
		}
	}
}
