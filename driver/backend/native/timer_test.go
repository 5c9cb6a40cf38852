package native_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// timerPaths are the stop paths of a native breakpoint: the agent's, GDB/MI's
// for a breakpoint with commands, and GDB/MI's for every breakpoint when
// gdb's agent is not loaded (its definitions, $_snapctl_hit() among them,
// still are).
var timerPaths = []struct {
	name           string
	noAgent, agent bool
	bp             func(name, location string) string
}{
	{"agent", false, true, nativePaths[0].bp},
	{"mi", false, false, nativePaths[1].bp},
	{"noagent", true, false, nativePaths[0].bp},
}

// TestNativeSignalTimer: SIGALRM every 200 us (and 50 us), faster than gdb
// steps a thread over a breakpoint, so that without the hold of the
// thread's signals for the step (agent.py's hold) nearly every step is
// interrupted, the handler returns to the breakpoint and gdb steps again:
// such a run took minutes for a few calls (docs/facts.md, fact 42). The
// run completes (the generous timeout is the failure, not a figure of
// speed), every call is one hit and one stop, on every stop path: with
// one thread or four taking the timer's signals, with a condition that
// skips every other call, and with breakpoints on a jump, a conditional
// jump and a return, where the step ends elsewhere than at the next
// instruction. The program's handler runs, and the program never finds
// SIGALRM blocked after a call. Every stop's allocator call returns.
func TestNativeSignalTimer(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/fasttimer.c")
	type run struct {
		name               string
		calls, us, threads int
		locations          []string
		condition          string
	}
	// 100 calls a row: without the hold a run of a few calls took
	// minutes, and with it each call is one hit and one stop, exactly.
	// A signal that comes exactly at the breakpoint's address, which a
	// 200 us timer makes about once in a few hundred hits (docs/facts.md,
	// fact 79), is TestNativeSignalAtBreakpoint's, at every one of its
	// hits.
	work := []string{"work"}
	runs := []run{
		{"200us", 100, 200, 1, work, ""},
		// 50 calls a thread: 200 hits, each step over the breakpoint
		// interrupted nearly every time, as in the one-thread row.
		{"200us/4threads", 50, 200, 4, work, ""},
		{"200us/condition", 100, 200, 1, work, "i % 2 == 0"},
		{"200us/branches", 100, 200, 1, []string{"'*hop_jmp'", "'*at_jcc'", "'*hop_ret'"}, ""},
		{"50us", 100, 50, 1, work, ""},
	}
	for _, r := range runs {
		for _, p := range timerPaths {
			t.Run(p.name+"/"+r.name, func(t *testing.T) {
				t.Parallel()
				plan := "backend: native\nbreakpoints:\n"
				for i, loc := range r.locations {
					plan += p.bp(fmt.Sprintf("bp%d", i), loc)
					if r.condition != "" {
						plan += "    condition: \"" + r.condition + "\"\n"
					}
				}
				m, out, err := runNativeOut(t, driver.Options{Timeouts: driver.Timeouts{Timeout: 5 * time.Minute}, NoAgent: p.noAgent}, plan,
					bin, strconv.Itoa(r.calls), strconv.Itoa(r.us), strconv.Itoa(r.threads))
				if err != nil {
					t.Fatal(err)
				}
				if m.GdbAgent != p.agent {
					t.Errorf("gdb_agent %v, want %v", m.GdbAgent, p.agent)
				}
				calls := counted(t, out, "calls")
				hits := calls
				if r.condition != "" {
					hits /= 2
				}
				if calls != r.calls*r.threads || len(m.Breakpoints) != len(r.locations) || len(m.Stops) != hits*len(r.locations) {
					t.Fatalf("%d calls, breakpoints %+v, %d stops; output %q", calls, m.Breakpoints, len(m.Stops), out)
				}
				for _, b := range m.Breakpoints {
					if b.Hits != hits {
						t.Errorf("breakpoint %s: %d hits, want %d", b.Name, b.Hits, hits)
					}
				}
				// Every stop has the allocator's figures: a signal that
				// comes during the call does not keep it from returning.
				for _, e := range m.Events {
					if e.Kind == runjson.EventAllocatorCallFailed {
						t.Errorf("event %s: %s", e.Kind, e.Message)
					}
				}
				if counted(t, out, "ticks") == 0 || counted(t, out, "blocked") != 0 {
					t.Errorf("the handler ran %d times, SIGALRM found blocked after %d calls; output %q", counted(t, out, "ticks"), counted(t, out, "blocked"), out)
				}
			})
		}
	}
}

// TestNativeSignalTimerAttach: attached twice to a process of four threads
// under a 200 us timer, on every stop path, each run takes its 25 stops
// (max_hits: 25 hits, 25 stops) and detaches; after that the process runs
// on, its handler runs, and it never finds SIGALRM blocked after a call:
// no thread is left with its signals held. With --guard gdbserver traces
// the process, and the process has one thread, which blocks its own
// signals for the step in a call gdb makes: without that the run never
// got past its first few stops. With four threads under gdbserver gdb 13
// cannot make that call safely, and such a run still does not end
// (docs/facts.md, fact 66).
func TestNativeSignalTimerAttach(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/fasttimer.c")
	for _, guard := range []bool{false, true} {
		for _, p := range timerPaths {
			name := p.name
			if guard {
				name = "guard/" + p.name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				if guard {
					testenv.MustHave(t, "gdbserver")
				}
				threads := "4"
				if guard {
					threads = "1"
				}
				var out testenv.Buffer
				// Each thread sleeps 100 us after a call: thousands of
				// calls a second, the timer's signals as before, and
				// not 4 threads keeping the processors busy for the
				// whole test.
				cmd := exec.Command(bin, "0", "200", threads, "100")
				cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
				cmd.Stdout = &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					cmd.Process.Kill()
					cmd.Wait()
				})
				pid := cmd.Process.Pid
				plan := "backend: native\nbreakpoints:\n" + p.bp("work", "work") + "    max_hits: 25\n"
				for range 2 {
					opts := driver.Options{Attach: driver.Attach{AttachPID: pid, Guard: guard}, Timeouts: driver.Timeouts{Timeout: 5 * time.Minute}, NoAgent: p.noAgent}
					_, m, err := runNative(t, opts, plan, "")
					if err != nil {
						t.Fatal(err)
					}
					if m.Status != runjson.StatusCompleted || len(m.Stops) != 25 || m.Breakpoints[0].Hits != 25 || !m.Native.Detached {
						t.Fatalf("status %s, %d stops, breakpoints %+v, native %+v, events %+v", m.Status, len(m.Stops), m.Breakpoints, m.Native, m.Events)
					}
				}
				runsOn(t, pid)
				cmd.Process.Signal(syscall.SIGTERM)
				if err := cmd.Wait(); err != nil {
					t.Fatalf("the process after the runs: %v, output %q", err, out.String())
				}
				if counted(t, out.String(), "calls") == 0 || counted(t, out.String(), "ticks") == 0 || counted(t, out.String(), "blocked") != 0 {
					t.Errorf("output %q", out.String())
				}
			})
		}
	}
}

// TestNativeSignalAtBreakpoint: a signal that comes exactly as the thread
// reaches the breakpoint's address, the instruction before it done,
// leaves the kernel's signal frame saved at that address and, in a loop,
// at the last hit's stack pointer: what a report that a signal during the
// step over the breakpoint makes gdb repeat looks like (docs/facts.md,
// fact 42). The hit that follows is a new one all the same, and every
// call is one hit and one stop, on every stop path, launched and attached
// with --guard, where gdb reads the registers through gdbserver. Before,
// every hit but the first was taken for a repeat and lost; a 200 us timer
// did that to about one hit in a few hundred (docs/facts.md, fact
// 79).
func TestNativeSignalAtBreakpoint(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/sigat.c")
	for _, guard := range []bool{false, true} {
		for _, p := range timerPaths {
			name := p.name
			if guard {
				name = "guard/" + p.name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				plan := "backend: native\nbreakpoints:\n" + p.bp("at", "'*at_signal'")
				if !guard {
					m, out, err := runNativeOut(t, driver.Options{NoAgent: p.noAgent}, plan, bin, "30")
					if err != nil {
						t.Fatal(err)
					}
					if calls := counted(t, out, "calls"); calls != 30 || counted(t, out, "ticks") != 30 || len(m.Stops) != 30 || m.Breakpoints[0].Hits != 30 {
						t.Errorf("%d calls, %d stops, breakpoints %+v; output %q", calls, len(m.Stops), m.Breakpoints, out)
					}
					return
				}
				testenv.MustHave(t, "gdbserver")
				cmd := exec.Command(bin, "0", "2000")
				cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					cmd.Process.Kill()
					cmd.Wait()
				})
				plan += "    max_hits: 30\n"
				opts := driver.Options{Attach: driver.Attach{AttachPID: cmd.Process.Pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 3 * time.Minute}, NoAgent: p.noAgent}
				_, m, err := runNative(t, opts, plan, "")
				if err != nil {
					t.Fatal(err)
				}
				if len(m.Stops) != 30 || m.Breakpoints[0].Hits != 30 || !m.Native.Detached {
					t.Errorf("%d stops, breakpoints %+v, native %+v", len(m.Stops), m.Breakpoints, m.Native)
				}
			})
		}
	}
}
