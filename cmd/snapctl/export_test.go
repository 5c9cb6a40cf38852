package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/snapctl/snapctl/internal/term"
)

func TestExportPprof(t *testing.T) {
	out := filepath.Join(t.TempDir(), "peak.pb.gz")
	if _, err := execute(t, "", "export", "--format", "pprof", recordedMassif+"taskpool.massif#peak", "-o", out); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	p, err := profile.Parse(fh)
	if err != nil {
		t.Fatal(err)
	}
	var vector int64
	for _, s := range p.Sample {
		for _, l := range s.Location {
			if l.Line[0].Function.Name == "Scheduler::log_payload(unsigned long)" {
				vector += s.Value[0]
			}
		}
	}
	if vector != 4000 {
		t.Errorf("bytes under Scheduler::log_payload = %d, want 4000", vector)
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 1 {
		t.Errorf("export left %d files behind, want only the profile", len(entries))
	}
}

func TestExportFolded(t *testing.T) {
	out, err := execute(t, "", "export", "--format", "folded", recordedMassif+"leak.detailed.massif", "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	if want := "main;handle_request;make_payload 1000\nmain 16\n"; out != want {
		t.Errorf("folded = %q, want %q", out, want)
	}
	out, err = execute(t, "", "export", "--format=folded", "--lines", recordedMassif+"leak.xt.ms#curBk")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "main (leak.c:27);handle_request (leak.c:19);make_payload (leak.c:12) 10\n") {
		t.Errorf("folded curBk lacks the 10 payload blocks:\n%s", out)
	}
}

func TestExportErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		want     string
		wantCode int
	}{
		{[]string{"export", "--format", "svg", recordedMassif + "leak.massif"}, `invalid argument "svg" for "--format" flag: want pprof or folded`, exitUsage},
		{[]string{"export", recordedMassif + "leak.default.massif#0", "-o", filepath.Join(dir, "x")}, "snapshot 0 has totals only", exitFailure},
		{[]string{"export", recordedMassif + "inline.massif#peak", "-o", filepath.Join(dir, "x")}, "has no peak snapshot", exitFailure},
		{[]string{"export", recordedMassif + "leak.massif", "-o", filepath.Join(dir, "no/such/dir/x")}, "writing", exitFailure},
	} {
		_, err := execute(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
			continue
		}
		if code, _ := describe(err); code != tc.wantCode {
			t.Errorf("%v: exit code %d, want %d", tc.args, code, tc.wantCode)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed exports left %d files", len(entries))
	}
}

// A gzipped profile is not written to a terminal (exit 2, nothing
// written); folded stacks are text and are, and a pipe or file takes both.
func TestExportRefusesGzipToTerminal(t *testing.T) {
	master, tty, err := term.OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer tty.Close()
	go io.Copy(io.Discard, master)
	spec := recordedMassif + "taskpool.massif#peak"
	run := func(stdout io.Writer, args ...string) error {
		root := newRootCmd("test")
		root.SetOut(stdout)
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"export"}, args...))
		return root.Execute()
	}
	for _, args := range [][]string{{spec}, {"--format", "pprof", spec, "-o", "-"}} {
		err := run(tty, args...)
		code, msg := describe(err)
		if code != exitUsage || !strings.Contains(msg, "not writing a gzipped pprof profile to a terminal") {
			t.Errorf("export %q to a terminal: exit %d %q, want %d and a refusal", args, code, msg, exitUsage)
		}
	}
	if err := run(tty, "--format", "folded", spec); err != nil {
		t.Errorf("folded stacks to a terminal: %v", err)
	}
	var buf bytes.Buffer
	if err := run(&buf, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := profile.Parse(&buf); err != nil {
		t.Errorf("export to a pipe: %v", err)
	}
}
