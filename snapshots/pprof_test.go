package snapshots

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/pprof/profile"

	"github.com/snapctl/snapctl/internal/testenv"
)

// writeProfile renders FILE#SEL of a recorded file and reads it back.
func writeProfile(t *testing.T, file, sel string) (*profile.Profile, []byte) {
	t.Helper()
	f := parseRecorded(t, file)
	f.Name = file
	s, err := f.Select(sel)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := RenderPprof(&buf, f, s); err != nil {
		t.Fatal(err)
	}
	p, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("reading the profile back: %v", err)
	}
	return p, buf.Bytes()
}

// stacks returns each sample's frames, leaf first, as "fn file:line", with
// its values.
func stacks(p *profile.Profile) map[string][]int64 {
	out := map[string][]int64{}
	for _, s := range p.Sample {
		var fs []string
		for _, l := range s.Location {
			for _, ln := range l.Line {
				name := ln.Function.Name
				if ln.Line != 0 {
					name += " " + ln.Function.Filename + ":" + lineString(int(ln.Line))
				}
				fs = append(fs, name)
			}
		}
		out[strings.Join(fs, " <- ")] = s.Value
	}
	return out
}

func TestPprofLeak(t *testing.T) {
	p, _ := writeProfile(t, "leak.detailed.massif", "")
	if len(p.SampleType) != 1 || p.SampleType[0].Type != "inuse_space" || p.SampleType[0].Unit != "bytes" {
		t.Errorf("sample types = %v, want inuse_space/bytes", p.SampleType)
	}
	want := map[string][]int64{
		"make_payload leak.c:12 <- handle_request leak.c:19 <- main leak.c:27": {1000},
		"main leak.c:24": {16},
	}
	if d := cmp.Diff(want, stacks(p)); d != "" {
		t.Errorf("samples (-want +got):\n%s", d)
	}
	checkGolden(t, "pprof/leak.detailed.massif.txt", []byte(p.String()))
}

func TestPprofXtmemory(t *testing.T) {
	p, _ := writeProfile(t, "leak.xt.ms", "curB")
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	wantTypes := []string{"alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes", "freed_objects/count", "freed_space/bytes"}
	if d := cmp.Diff(wantTypes, types); d != "" {
		t.Fatalf("sample types (-want +got):\n%s", d)
	}
	if p.DefaultSampleType != "inuse_space" {
		t.Errorf("default sample type = %q", p.DefaultSampleType)
	}
	got := stacks(p)
	// 10 blocks of 100 bytes allocated and live; the 16-byte buffer of
	// leak.c:24 allocated once and freed at leak.c:28.
	for k, want := range map[string][]int64{
		"make_payload leak.c:12 <- handle_request leak.c:19 <- main leak.c:27": {10, 1000, 10, 1000, 0, 0},
		"main leak.c:24": {1, 16, 0, 0, 0, 0},
		"main leak.c:28": {0, 0, 0, 0, 1, 16},
		"main leak.c:29": {1, 16, 1, 16, 0, 0},
	} {
		if d := cmp.Diff(want, got[k]); d != "" {
			t.Errorf("%s (-want +got):\n%s", k, d)
		}
	}
}

func TestPprofBelowAndLibraries(t *testing.T) {
	p, _ := writeProfile(t, "threshold.massif", "")
	got := stacks(p)
	if v := got[BelowFrameName]; len(v) != 1 || v[0] != 600 {
		t.Errorf("below-threshold bucket = %v, want [600]", v)
	}
	if v := got["sized threshold.c:15 <- "+BelowFrameName]; len(v) != 1 || v[0] != 100 {
		t.Errorf("below-threshold caller of sized = %v, want [100]", v)
	}

	p, _ = writeProfile(t, "taskpool.massif", "peak")
	got = stacks(p)
	var libstd int64
	for k, v := range got {
		if strings.HasPrefix(k, "??? (in libstdc++.so.6.0.30) <- call_init dl-init.c:74") {
			libstd += v[0]
		}
	}
	if libstd != 72704 {
		t.Errorf("libstdc++ emergency pool = %d bytes, want 72704; samples:\n%v", libstd, got)
	}
	for _, fn := range p.Function {
		if fn.Name == "??? (in libstdc++.so.6.0.30)" && fn.Filename != "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30" {
			t.Errorf("unknown function's file = %q, want the object", fn.Filename)
		}
	}
}

func TestPprofNoTree(t *testing.T) {
	f := parseRecorded(t, "leak.default.massif")
	if err := RenderPprof(&bytes.Buffer{}, f, f.Snapshots[0]); err == nil {
		t.Error("a snapshot without a tree made a profile")
	}
}

// TestPprofTool runs `go tool pprof` on two exported snapshots, as a user
// would to compare them: -top on one, -top -diff_base on the pair.
func TestPprofTool(t *testing.T) {
	testenv.MustHave(t, "go")
	dir := t.TempDir()
	write := func(name, sel string) string {
		_, data := writeProfile(t, "leak.massif", sel)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("a.pb.gz", "3") // 200 bytes of payloads
	b := write("b.pb.gz", "")  // 1000 bytes of payloads
	out, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=5", b).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -top: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("make_payload")) || !bytes.Contains(out, []byte("1000B")) {
		t.Errorf("pprof -top does not show make_payload's 1000B:\n%s", out)
	}
	out, err = exec.Command("go", "tool", "pprof", "-top", "-diff_base", a, b).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof -diff_base: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("800B")) || !bytes.Contains(out, []byte("make_payload")) {
		t.Errorf("pprof -diff_base does not show make_payload's +800B:\n%s", out)
	}
}
