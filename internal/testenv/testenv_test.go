package testenv

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestBuildCaches(t *testing.T) {
	a := Build(t, "testdata/hello.c")
	b := Build(t, "testdata/hello.c")
	if a != b {
		t.Errorf("second build of the same source made %s, want cached %s", b, a)
	}
	if err := exec.Command(a).Run(); err != nil {
		t.Errorf("running fixture: %v", err)
	}
}

// An orphaned valgrind (its parent shell died) is still found, because the
// test binary is the child subreaper.
func TestDescendantsFindsOrphanedValgrind(t *testing.T) {
	MustHave(t, "valgrind")
	bin := Build(t, "testdata/hello.c")
	sh := exec.Command("sh", "-c", "valgrind --tool=massif --massif-out-file=/dev/null "+bin+" 30 >/dev/null 2>&1 & echo started")
	if out, err := sh.Output(); err != nil || len(out) == 0 {
		t.Fatalf("starting valgrind: %v", err)
	}
	var found []Proc
	for deadline := NewDeadline(5 * time.Second); !deadline.Passed(); time.Sleep(50 * time.Millisecond) {
		if found = Descendants(); len(found) > 0 {
			break
		}
	}
	if len(found) == 0 {
		t.Fatal("orphaned valgrind not found among descendants")
	}
	killProcs(found)
	if left := Descendants(); len(left) > 0 {
		t.Errorf("still alive after kill: %v", left)
	}
}
