package testenv

import (
	"os"
	"os/exec"
	"strings"
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

// TestRaceExitWithoutSleep: a test binary built with -race runs its tests
// with atexit_sleep_ms=0 in GORACE, after the options the user gave there,
// and so does every program they start.
func TestRaceExitWithoutSleep(t *testing.T) {
	if !raceEnabled() {
		t.Skip("the tests are not built with -race")
	}
	if os.Getenv("TESTENV_PRINT_GORACE") != "" {
		os.Stdout.WriteString("GORACE=" + os.Getenv("GORACE") + "\n")
		return
	}
	if got := os.Getenv("GORACE"); !strings.Contains(got, "atexit_sleep_ms=") {
		t.Errorf("GORACE=%q, want atexit_sleep_ms=0 in it", got)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ gorace, want string }{
		{"halt_on_error=1", "GORACE=halt_on_error=1 atexit_sleep_ms=0"},
		{"atexit_sleep_ms=50", "GORACE=atexit_sleep_ms=50"}, // the user's own choice stays
	} {
		cmd := exec.Command(exe, "-test.run=^TestRaceExitWithoutSleep$")
		cmd.Env = []string{"TESTENV_PRINT_GORACE=1", "GORACE=" + c.gorace, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GORACE=%s: %v\n%s", c.gorace, err, out)
		}
		if !strings.Contains(string(out), c.want+"\n") {
			t.Errorf("GORACE=%s: the tests ran with\n%s\nwant %s", c.gorace, out, c.want)
		}
	}
}
