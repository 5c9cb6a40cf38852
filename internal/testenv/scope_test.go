package testenv

import (
	"os/exec"
	"slices"
	"testing"
	"time"
)

// leftovers judges a tool process by its environment: one carrying the
// test's mark, or no mark at all, is the test's; one carrying another
// test's mark is not; one whose environment reads empty (it exited, or is
// in the middle of an exec: valgrind's launcher becoming its tool) is
// nobody's, perhaps another test's. Four processes named gdb, each with
// one such environment, the empty one given outright.
func TestLeftoversOfEmptyEnvironment(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command")
	}
	envs := map[string][]string{
		"empty":    {},
		"unmarked": {"HOME=/"},
		"mine":     {ScopeEnv(t)},
		"other":    {scopeVar + "=another test"},
	}
	pids := make(map[int]string)
	for name, env := range envs {
		// Args[0] names the process gdb, a tool to the checks.
		cmd := &exec.Cmd{Path: sleep, Args: []string{"gdb", "60"}, Env: env}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		pids[cmd.Process.Pid] = name
	}
	// Each is a tool once it has run sleep, its environment its own.
	started := func(p Proc) bool { _, ok := pids[p.PID]; return ok && isTool(p) }
	for deadline := NewDeadline(10 * time.Second); len(DescendantsWhere(started)) < len(pids); time.Sleep(10 * time.Millisecond) {
		if deadline.Passed() {
			t.Fatalf("%d of %d processes started", len(DescendantsWhere(started)), len(pids))
		}
	}
	var got []string
	for _, p := range leftovers(t) {
		if name, ok := pids[p.PID]; ok {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	if want := []string{"mine", "unmarked"}; !slices.Equal(got, want) {
		t.Errorf("leftovers %q, want %q", got, want)
	}
}
