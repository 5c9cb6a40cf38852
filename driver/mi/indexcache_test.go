package mi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestIndexCache: the arguments make the directory (its owner's alone)
// and a real gdb keeps the index of the program it reads there, under
// the program's build id; the next gdb reads that index instead of
// indexing the program again. Start passes them to every gdb.
func TestIndexCache(t *testing.T) {
	testenv.MustHave(t, "gdb")
	t.Parallel()
	prog := testenv.Build(t, "testdata/prog.c")
	dir := filepath.Join(t.TempDir(), "cache", "gdb-index")
	args := indexCacheIn(dir, time.Now())
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the cache directory: %v %v", st, err)
	}
	gdb := func() string {
		cmd := exec.Command("gdb", append(append([]string{"--nx", "--batch"}, args...),
			"-iex", "set debug index-cache on", "-ex", "info line main", prog)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("gdb: %v\n%s", err, out)
		}
		return string(out)
	}
	index := filepath.Join(dir, testenv.BuildID(t, prog)+".gdb-index")
	if out := gdb(); !strings.Contains(out, "writing index cache for objfile "+prog) {
		t.Fatalf("the first gdb wrote no index of %s:\n%s", prog, out)
	}
	if _, err := os.Stat(index); err != nil {
		t.Fatal(err)
	}
	if out := gdb(); strings.Contains(out, "writing index cache") || strings.Contains(out, "couldn't read") {
		t.Errorf("the second gdb did not read %s:\n%s", index, out)
	}

	// Start's gdb gets the same arguments, for snapctl's own directory.
	record := filepath.Join(t.TempDir(), "args")
	script := filepath.Join(t.TempDir(), "gdb")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" >"+record+"\nexec gdb \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Options{Path: script, StartTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		t.Skipf("no cache directory: %v", err)
	}
	want := "set index-cache directory " + filepath.Join(base, "snapctl", "gdb-index")
	if got := strings.Split(string(data), "\n"); !slices.Contains(got, want) || !slices.Contains(got, "set index-cache enabled on") {
		t.Errorf("gdb's arguments %q, want %q and the cache on", got, want)
	}
}

// TestPruneIndexCache: past the limit the oldest indexes go first, until
// the rest fit; a temporary file (a gdb writing an index) is removed only
// once it is an hour old, and a file of another name never.
func TestPruneIndexCache(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	files := []struct {
		name string
		age  time.Duration
	}{
		{"a.gdb-index", 3 * time.Hour},
		{"b.gdb-index", 2 * time.Hour},
		{"c.gdb-index", time.Hour},
		{"d.gdb-index", time.Minute},
		{"b.gdb-index-x1Y2z3", 2 * time.Hour},
		{"d.gdb-index-a1B2c3", time.Minute},
		{"notes.txt", 3 * time.Hour},
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.WriteFile(path, make([]byte, 100), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, now.Add(-f.age), now.Add(-f.age)); err != nil {
			t.Fatal(err)
		}
	}
	pruneIndexCache(dir, 250, now)
	var left []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"c.gdb-index", "d.gdb-index", "d.gdb-index-a1B2c3", "notes.txt"}
	if !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
	// Within the limit nothing goes.
	pruneIndexCache(dir, 250, now)
	if entries, _ := os.ReadDir(dir); len(entries) != 4 {
		t.Errorf("%d files left, want 4", len(entries))
	}
}
