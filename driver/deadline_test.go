package driver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/backend/massif"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/testenv"
)

// The agent's busy file, written by agent.py in gdb and read by
// agent.overdue: a stop under way is overdue once the same mark has
// been seen for the limit; a new stop, or none, starts over.
func TestAgentBusyFile(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	dir := t.TempDir()
	script := filepath.Join(dir, gdb.AgentScript)
	if err := os.WriteFile(script, []byte(gdb.AgentSource), 0o600); err != nil {
		t.Fatal(err)
	}
	busy := filepath.Join(dir, agentBusy)
	// runAgent runs py in gdb with agent.py loaded, a an Agent whose busy
	// file is busy and B a breakpoint numbered 7.
	runAgent := func(py string) {
		t.Helper()
		cmds := filepath.Join(dir, "cmds")
		text := "python\nclass B:\n    number = 7\n" +
			"a = Agent(" + gdb.PyString(filepath.Join(dir, agentRecords)) + ", " + gdb.PyString(dir) + ", " + gdb.PyString(busy) + ", " + massif.DefaultAgentMeasure() + ")\n" +
			py + "\nend\n"
		if err := os.WriteFile(cmds, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("gdb", "-batch", "-nx", "-x", script, "-x", cmds)
		cmd.Env = append(os.Environ(), testenv.ScopeEnv(t)) // another test's leftover check leaves it be
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gdb: %v\n%s", err, out)
		}
	}
	f, err := os.Create(busy)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &agent{busy: f}
	t0 := time.Unix(1790000000, 0)
	check := func(at time.Duration, wantBp string, wantOK bool) {
		t.Helper()
		bp, _, ok := a.overdue(t0.Add(at), 2*time.Second)
		if bp != wantBp || ok != wantOK {
			t.Errorf("overdue at +%v = %q, %v; want %q, %v", at, bp, ok, wantBp, wantOK)
		}
	}

	runAgent("a.begin(B())\na.begin(B())")
	if data, _ := os.ReadFile(busy); string(data) != fmt.Sprintf("%-31s\n", "2 7") {
		t.Errorf("busy file %q, want \"2 7\" padded to 32 bytes", data)
	}
	check(0, "", false) // first seen
	check(time.Second, "", false)
	check(2*time.Second, "7", true)
	runAgent("a.begin(B())\na.begin(B())\na.begin(B())")
	check(3*time.Second, "", false) // another stop: timed from here
	check(4*time.Second, "", false)
	check(5*time.Second, "7", true)
	runAgent("a.begin(B())\na.mark('-')")
	check(9*time.Second, "", false)
}
