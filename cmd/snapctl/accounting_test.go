package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// snapctl killed with SIGKILL at start-up (at its first snapshot), mid-run
// (once run.json was rewritten during the run) and at the target's exit
// (while run.json is written for the last time), while four threads at a
// time start, hit the breakpoint and exit: run.json lists every snapshot
// file in snapshots/ under its own name. The snapshots taken since
// run.json was last written keep hidden names (.NNNN-...), and every stop
// run.json lists has its file, under its own name or, for those listed by
// the run.json being written when snapctl died, the hidden one.
func TestKilledRunAccounts(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../driver/testdata/spin.c")
	const plan = "breakpoints:\n  - name: work\n    location: work\n"
	for _, moment := range []string{"startup", "mid-run", "exit"} {
		t.Run(moment, func(t *testing.T) {
			t.Parallel()
			args, stops := []string{"0"}, 0
			if moment == "mid-run" {
				// Without end, a second of sleep after each round of
				// 80 stops: run.json first lists stops after 10 s, and
				// without the sleep massif took some 2,500 snapshots by
				// then.
				args = []string{"0", "1000"}
			}
			if moment == "exit" {
				// Long enough (12.6 s of sleep between the rounds,
				// and the stops) that run.json is rewritten at least
				// once, every 10 s, before the last one, with stops
				// enough that the last writing takes a while: 640, each
				// a detailed snapshot of massif's.
				args, stops = []string{"8", "1800"}, 8*80
			}
			r := startSnapctl(t, session{Plan: plan, Bin: bin, Args: args, Limit: 15 * time.Minute})
			snaps := filepath.Join(r.out, "snapshots")
			switch moment {
			case "startup":
				waitFile(t, r, snaps, time.Minute)
			case "mid-run":
				waitFor(t, "run.json to list a stop", 2*time.Minute, func() bool { return len(listed(t, r.out, false)) > 0 })
			case "exit":
				// Each stop has one file at any time: massif's, the
				// compressed one unlisted, then the listed one. On a
				// loaded machine the stops take minutes: the wait lasts
				// while they come.
				// Every 100 ms until the last round, which follows
				// 1.8 s of sleep, then every 10 ms.
				waitProgress(t, "every stop", time.Minute, stops-80, func() (int, bool) {
					names, _ := os.ReadDir(snaps)
					return len(names), len(names) >= stops
				})
				// The last run.json being written, or snapctl done
				// with it: a zombie, as nobody waits for it yet (its
				// ProcessState is set only by Wait, so a snapctl that
				// wrote run.json between two looks and exited used to
				// leave this wait to run out, at load average 20).
				tmp := filepath.Join(r.out, ".run.json.tmp-*")
				waitFor(t, "the last run.json", 30*time.Second, func() bool {
					names, _ := filepath.Glob(tmp)
					return len(names) > 0 || !testenv.Lives(r.cmd.Process.Pid)
				})
			}
			r.signal(syscall.SIGKILL)
			r.cmd.Wait()
			defer killLeft(t)

			list := listed(t, r.out, true)
			names, err := os.ReadDir(snaps)
			if err != nil {
				t.Fatal(err)
			}
			own, hidden := map[string]bool{}, map[string]bool{}
			for _, e := range names {
				if name, ok := strings.CutPrefix(e.Name(), "."); ok {
					hidden[name] = true
					continue
				}
				own[e.Name()] = true
				if !list[e.Name()] {
					t.Errorf("snapshots/%s is not in run.json", e.Name())
				}
			}
			for name := range list {
				if !own[name] && !hidden[name] {
					t.Errorf("run.json lists %s, which is not in snapshots/", name)
				}
			}
			t.Logf("run.json lists %d snapshots, %d under their own name; %d files hidden", len(list), len(own), len(hidden))
			if moment != "startup" && len(own) == 0 {
				t.Errorf("no snapshot under its own name")
			}
		})
	}
}

// listed returns the base names of the snapshots run.json lists; with
// must, run.json must be there and valid.
func listed(t *testing.T, out string, must bool) map[string]bool {
	t.Helper()
	var m struct {
		Stops []struct {
			Snapshot string `json:"snapshot"`
		} `json:"stops"`
	}
	data, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err == nil {
		err = json.Unmarshal(data, &m)
	}
	if err != nil {
		if must {
			t.Fatalf("run.json: %v", err)
		}
		return nil
	}
	names := map[string]bool{}
	for _, s := range m.Stops {
		names[filepath.Base(s.Snapshot)] = true
	}
	return names
}

// waitFor waits until cond holds, for timeout on a quiet machine and
// longer on a loaded one (testenv.Deadline).
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	testenv.WaitUntil(t, what, timeout, 2*time.Millisecond, cond)
}

// waitProgress waits until cond says done, for as long as the count it
// returns grows: it fails only when the count stays the same for stall
// (on a quiet machine; longer on a loaded one). It looks every 10 ms once
// the count has reached near, every 100 ms before: a look that reads a
// directory of 1,600 names every 10 ms through a minute's run took 1.8 s
// of processor time under the race detector.
func waitProgress(t *testing.T, what string, stall time.Duration, near int, cond func() (n int, done bool)) {
	t.Helper()
	last, since := -1, testenv.NewDeadline(stall)
	for {
		n, done := cond()
		if done {
			return
		}
		if n != last {
			last, since = n, testenv.NewDeadline(stall)
		} else if since.Passed() {
			t.Fatalf("waited for %s: no progress in %v (%d so far)", what, since, n)
		}
		if n < near {
			time.Sleep(100 * time.Millisecond)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// killLeft kills what a snapctl killed outright left of the test's own
// processes after 5 s (gdb, vgdb and valgrind end with it: that is
// TestSnapctlKilled's to check).
func killLeft(t *testing.T) {
	for _, p := range toolsAlive(t, 5*time.Second) {
		t.Logf("left after snapctl was killed: %+v", p)
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
	testenv.ReapOrphans()
}

// A run directory that fills up during the run: the run fails, and the run
// directory holds only what its run.json lists, the start-up one here (no
// stop, no snapshot file), not the snapshots taken before the disk was
// full. The full file system is a small tmpfs (the test skips where it
// cannot mount one).
func TestFullRunDirAccounts(t *testing.T) {
	bin := testenv.Build(t, "../../driver/testdata/spin.c")
	fs := testenv.SmallFS(t, "4m")
	t.Parallel()
	testenv.NoLeftovers(t)
	out := filepath.Join(fs, "run")
	r := startSnapctl(t, session{Plan: "breakpoints:\n  - name: work\n    location: work\n", Bin: bin, Args: []string{"50"}, Out: out, Limit: 2 * time.Minute})
	waitFor(t, "20 snapshots", time.Minute, func() bool {
		names, _ := os.ReadDir(filepath.Join(out, "snapshots"))
		return len(names) >= 20
	})
	testenv.KeepFull(t, fs)
	res := r.wait()
	if res.Code != exitFailure || res.Run == nil {
		t.Fatalf("exit code %d, run.json %v, want %d and run.json\nstderr:\n%s", res.Code, res.Run != nil, exitFailure, res.Stderr)
	}
	if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "no space left on device") {
		t.Errorf("message %q does not say that the run directory is full", msg)
	}
	list := listed(t, out, true)
	names, err := os.ReadDir(filepath.Join(out, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if !list[e.Name()] {
			t.Errorf("snapshots/%s is not in run.json", e.Name())
		}
	}
	t.Logf("run.json lists %d snapshots; %d files in snapshots/; status %s: %s", len(list), len(names), res.Run.Status, res.Run.Error)
}

// After the first SIGINT, SIGTERM or SIGHUP no stop is taken: run.json's
// stops all end before the signal reached snapctl, while four threads at
// a time start, hit the breakpoint and exit, but for the one under way
// then and one that began while the signal went from Go's handler to the
// run (a few goroutine switches, on a busy machine a stop's time; before,
// the stops went on for seconds, 250 of them).
func TestSignalTakesNoStop(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../driver/testdata/spin.c")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			r := startSnapctl(t, session{Plan: "breakpoints:\n  - name: work\n    location: work\n", Bin: bin, Args: []string{"0"}, Limit: 2 * time.Minute})
			waitFor(t, "20 snapshots", time.Minute, func() bool {
				names, _ := os.ReadDir(filepath.Join(r.out, "snapshots"))
				return len(names) >= 20
			})
			r.signal(sig)
			r.waitDelivered(sig)
			delivered := time.Now()
			res := r.wait()
			if res.Code != exitInterrupted || res.Run == nil {
				t.Fatalf("exit code %d, want %d and run.json\nstderr:\n%s", res.Code, exitInterrupted, res.Stderr)
			}
			var m struct {
				Stops []struct {
					Time string `json:"time"`
				} `json:"stops"`
			}
			if data, err := os.ReadFile(filepath.Join(r.out, "run.json")); err != nil || json.Unmarshal(data, &m) != nil {
				t.Fatalf("run.json: %v", err)
			}
			// The signal leaves the pending set when the kernel hands
			// it to Go's runtime; snapctl's signal goroutine then ends
			// the run's context and creates the agent's halt file, which
			// on a loaded machine (the suite's own tests in parallel on
			// two cores) took up to a few milliseconds, in which a massif
			// stop a millisecond long can still be taken. A stop taken
			// 100 ms after the signal is a promise broken.
			var after []string
			for _, st := range m.Stops {
				if at, err := time.Parse(time.RFC3339Nano, st.Time); err != nil || at.After(delivered.Add(100*time.Millisecond)) {
					after = append(after, st.Time)
				}
			}
			if len(after) > 2 {
				t.Errorf("%d of %d stops after %s, when %v reached snapctl: %v", len(after), len(m.Stops), delivered.UTC().Format(time.RFC3339Nano), sig, after[:min(len(after), 5)])
			}
		})
	}
}
