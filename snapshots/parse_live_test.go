package snapshots

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestParseLiveValgrind runs the installed valgrind on the leak fixture and
// parses both files it writes, so the parser is checked against the massif
// actually on this machine and not only against recordings.
func TestParseLiveValgrind(t *testing.T) {
	testenv.MustHave(t, "valgrind")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, filepath.Join(recorded, "leak.c"))
	dir := t.TempDir()
	out := filepath.Join(dir, "massif.out")
	xt := filepath.Join(dir, "xt.ms")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "valgrind", "-q", "--tool=massif", "--threshold=0", "--detailed-freq=1", "--vgdb-prefix="+filepath.Join(dir, "vgdb"),
		"--massif-out-file="+out, "--xtree-memory=full", "--xtree-memory-file="+xt, bin)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("valgrind: %v\n%s", err, b)
	}

	f, err := ParseFile(out)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Select("")
	if err != nil {
		t.Fatal(err)
	}
	if n := descend(t, s.Tree, "make_payload (leak.c:12)", "handle_request (leak.c:19)", "main (leak.c:27)"); n.Bytes != 1000 {
		t.Errorf("make_payload = %d bytes, want 1000 (10 x malloc(100))", n.Bytes)
	}
	if n := childNamed(t, s.Tree, "main (leak.c:29)"); n.Bytes != 16 {
		t.Errorf("main (leak.c:29) = %d bytes, want 16", n.Bytes)
	}
	if s.HeapBytes != 1016 {
		t.Errorf("mem_heap_B = %d, want 1016", s.HeapBytes)
	}

	x, err := ParseFile(xt)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := x.Select("curBk")
	if err != nil {
		t.Fatal(err)
	}
	if n := childNamed(t, blocks.Tree, "make_payload (leak.c:12)"); n.Bytes != 10 {
		t.Errorf("curBk make_payload = %d blocks, want 10", n.Bytes)
	}
}
