package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// A run directory whose disk something else keeps full, filled after
// run.json was rewritten during the run with its stops: the final
// writing has no room for its temporary file, and the run.json left
// must not go on saying that the run had not ended (the fault matrix's
// row "full run directory/mid-run" broke so, once in six, when the run
// was slow enough for a rewriting before the disk filled). run.json says
// that the run failed and why, and still lists the stops whose snapshot
// files are there. The full file system is a small tmpfs (the test skips
// where it cannot mount one).
func TestFullRunDirAfterListing(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	testenv.NoLeftovers(t)
	fs := testenv.SmallFS(t, "2m")
	out := filepath.Join(fs, "run")
	cancel, done, _ := startTicksRun(t, out)
	testenv.KeepFull(t, fs)
	cancel()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("Run = %v, want the full disk named", err)
	}
	m := readManifest(t, out)
	if m.Status != runjson.StatusFailed || m.Error == unfinished || !strings.Contains(m.Error, "run.json lists 5 of the run's 5 stops") {
		t.Errorf("run.json: status %q, error %q; want failed, the full disk and the stops listed", m.Status, m.Error)
	}
	if code, _ := ExitStatus(err); m.ExitCode == nil || *m.ExitCode != code || code == 0 {
		t.Errorf("run.json: exit code %v, want %d, the run's", m.ExitCode, code)
	}
	listed := map[string]bool{}
	for _, st := range m.Stops {
		listed[filepath.Base(st.Snapshot)] = true
	}
	names, err := os.ReadDir(filepath.Join(out, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if !listed[e.Name()] {
			t.Errorf("snapshots/%s is not in run.json", e.Name())
		}
	}
	if len(m.Stops) != 5 || len(names) != 5 {
		t.Errorf("run.json lists %d stops, snapshots/ holds %d files; want 5 and 5", len(m.Stops), len(names))
	}
}
