package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// A run keeps its snapshots gzipped, and show, diff and export read them
// as they are: leak.c leaks 24 bytes per request, so stop 3's snapshot
// holds 48 bytes at handle_request, and the diff of stops 1 and 3 is +48.
func TestKeptSnapshotsCompressed(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "leak.c"
	bin := testenv.Build(t, src)
	leak := fmt.Sprintf("handle_request (leak.c:%d)", testenv.LineOf(t, src, "the leak: 24"))

	res := mustRunShared(t, session{Plan: requestPlan, Bin: bin, Args: []string{"3"}}, exitOK)
	checkCompleted(t, res) // every stop's file is gzip
	if len(res.Run.Stops) != 3 {
		t.Fatalf("%d stops, want 3", len(res.Run.Stops))
	}
	var files []string
	for _, s := range res.Run.Stops {
		if !strings.HasSuffix(s.Snapshot, ".massif.gz") {
			t.Errorf("stop %d: snapshot %q, want a .massif.gz name", s.Seq, s.Snapshot)
		}
		files = append(files, filepath.Join(res.Out, s.Snapshot))
	}

	out, err := execute(t, "", "show", files[2])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"massif file " + files[2] + "\n", "100.00% (48 B) curB", "(48 B) ", leak} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}

	out, err = snapctlDiff(t, "--format", "json", files[0], files[2])
	if err != nil {
		t.Fatal(err)
	}
	var doc snapshots.DiffDocument
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.DeltaBytes != 48 || len(doc.Sites) != 1 || snapshots.FrameString(doc.Sites[0].Frame) != leak || doc.Sites[0].Delta != 48 {
		t.Errorf("diff of stops 1 and 3: delta %d, sites %+v; want +48 at %s", doc.DeltaBytes, doc.Sites, leak)
	}

	out, err = execute(t, "", "export", "--format", "folded", files[2], "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	if want := "main;handle_request 48\n"; out != want {
		t.Errorf("folded = %q, want %q", out, want)
	}
}

// The recorded .gz files read as the plain ones: the same show, diff and
// export output.
func TestGzipRecordedCommands(t *testing.T) {
	plain := recordedMassif + "leak.monitor.ms"
	for _, args := range [][]string{
		{"show", "FILE"},
		{"diff", recordedMassif + "leak.xt.ms", "FILE"},
		{"export", "--format", "folded", "--lines", "FILE#curBk"},
	} {
		run := func(file string) string {
			a := make([]string, len(args))
			for i, s := range args {
				a[i] = strings.ReplaceAll(s, "FILE", file)
			}
			out, err := execute(t, "", a...)
			if err != nil {
				t.Fatalf("%v: %v", a, err)
			}
			return strings.ReplaceAll(out, file, "FILE")
		}
		if want, got := run(plain), run(plain+".gz"); got != want {
			t.Errorf("%s: the .gz file gives\n%s\nthe plain one\n%s", args[0], got, want)
		}
	}
}
