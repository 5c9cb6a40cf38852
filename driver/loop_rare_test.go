package driver

// The stop loop's rare paths against the scripted gdb of loop_test.go:
// stops that are not the plan's, signals, gdb or the connection to
// valgrind going away, stops that fail or hang, around_call cut short,
// and gdb's scheduler-locking mode around stops that resume the target.
// Each case checks the MI commands gdb received, what run.json records
// and the error the run ends with.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

const (
	exitedNormally = `*stopped,reason="exited-normally"`
	// finished is the stop of -exec-finish, back in main.
	finished = `*stopped,reason="function-finished",frame={addr="0x20",func="main",args=[],file="leak.c",line="35"},thread-id="1",stopped-threads="all",gdb-result-var="$1",return-value="0"`
)

// signalRecord is the stop for a signal the target received in
// handle_request.
func signalRecord(sig string) string {
	return `*stopped,reason="signal-received",signal-name="` + sig + `",signal-meaning="a signal",frame={addr="0x10",func="handle_request",args=[],file="leak.c",fullname="/src/leak.c",line="23"},thread-id="1",stopped-threads="all"`
}

var (
	// signalFrame is the frame of signalRecord.
	signalFrame = runjson.Frame{Function: "handle_request", File: "leak.c", Line: 23, FullName: "/src/leak.c", Addr: "0x10"}
	// fakeBacktrace is the fake's answer to -stack-list-frames.
	fakeBacktrace = []runjson.Frame{signalFrame, {Function: "main", File: "leak.c", Line: 35, Addr: "0x20"}}
	// hitThread is the stopped thread of a hit, as the fake lists it.
	hitThread = runjson.Thread{ID: "1", TargetID: "Thread 42", State: "stopped"}
)

// The commands of a stop at a plain breakpoint under the default threads
// (none), the first time (gdb is asked for the stopped thread's target id)
// and afterwards; and of an around_call hit, which asks for the backtrace
// and every thread.
var (
	firstStop   = []string{"-thread-info 1", snapshotMonitor}
	laterStop   = []string{snapshotMonitor}
	aroundStop  = []string{"-stack-list-frames 0 31", "-thread-info", snapshotMonitor}
	aroundLater = []string{"-stack-list-frames 0 31", snapshotMonitor}
)

// cmds joins commands and lists of commands into one list.
func cmds(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		}
	}
	return out
}

// errHung ends a stop loop that does not end on its own.
var errHung = errors.New("the stop loop did not end")

// runLoop runs the stop loop of a scripted session, with a generous
// ceiling that only guards against a loop that would wait forever.
func runLoop(t *testing.T, s *session, ctx context.Context) error {
	t.Helper()
	ctx, cancel := context.WithTimeoutCause(ctx, 20*time.Second, errHung)
	defer cancel()
	err := s.newStopLoop().loop(ctx)
	if errors.Is(context.Cause(ctx), errHung) {
		t.Fatalf("%v (it returned %v)", errHung, err)
	}
	return err
}

// eventKinds is the kinds of eventsOf(m), in order.
func eventKinds(m *runjson.Manifest) []string {
	var kinds []string
	for _, e := range eventsOf(m) {
		kinds = append(kinds, string(e.Kind))
	}
	return kinds
}

// eventsOf returns run.json's events without their times, but for the
// nothing-measured event that finish adds when no stop took a snapshot, as
// most scripted runs here do (TestRunNothingMeasured checks it).
func eventsOf(m *runjson.Manifest) []runjson.Event {
	var out []runjson.Event
	for _, e := range m.Events {
		if e.Kind == runjson.EventNothingMeasured {
			continue
		}
		e.Time = ""
		out = append(out, e)
	}
	return out
}

// phases lists run.json's stops as "breakpoint hit phase scheduler-locking".
func phases(m *runjson.Manifest) []string {
	var out []string
	for _, st := range m.Stops {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %d %s %s", st.Breakpoint, st.Hit, st.Phase, st.SchedulerLocking)))
	}
	return out
}

// killedError is the Wait error of a process killed by SIGKILL.
func killedError(t *testing.T) *exec.ExitError {
	t.Helper()
	err := exec.Command("sh", "-c", "kill -KILL $$").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("sh killing itself: %v", err)
	}
	return ee
}

func checkSent(t *testing.T, fake *fakeGDB, want []string) {
	t.Helper()
	if diff := cmp.Diff(want, fake.sent); diff != "" {
		t.Errorf("commands gdb received (-want +got):\n%s", diff)
	}
}

func checkEvents(t *testing.T, m *runjson.Manifest, want []runjson.Event) {
	t.Helper()
	if diff := cmp.Diff(want, eventsOf(m)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A stop that is not a plan breakpoint's is recorded as an
// unexpected-stop event and the target goes on.
func TestLoopUnexpectedStop(t *testing.T) {
	t.Parallel()
	otherFrame := &runjson.Frame{Function: "other", File: "other.c", Line: 5, Addr: "0x30"}
	for _, tc := range []struct {
		name string
		rec  string
		want runjson.Event
	}{
		{"unknown breakpoint",
			`*stopped,reason="breakpoint-hit",disp="keep",bkptno="7",frame={addr="0x30",func="other",args=[],file="other.c",line="5"},thread-id="2",stopped-threads="all"`,
			runjson.Event{Kind: runjson.EventUnexpectedStop, Reason: "breakpoint-hit", Thread: runjson.Thread{ID: "2"}, Frame: otherFrame, Message: "breakpoint 7 is not the plan's"}},
		{"watchpoint",
			`*stopped,reason="watchpoint-trigger",wpt={number="3",exp="x"},value={old="1",new="2"},frame={addr="0x30",func="other",args=[],file="other.c",line="5"},thread-id="1",stopped-threads="all"`,
			runjson.Event{Kind: runjson.EventUnexpectedStop, Reason: "watchpoint-trigger", Thread: runjson.Thread{ID: "1"}, Frame: otherFrame}},
		{"no reason",
			`*stopped,frame={addr="0x30",func="other",args=[],file="other.c",line="5"},thread-id="1",stopped-threads="all"`,
			runjson.Event{Kind: runjson.EventUnexpectedStop, Thread: runjson.Thread{ID: "1"}, Frame: otherFrame}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n    optional: true\n"), exitedNormally)
			fake.events <- mustRecord(t, tc.rec)
			loopErr := runLoop(t, s, context.Background())
			if loopErr != nil {
				t.Fatal(loopErr)
			}
			m, err := finishRun(t, s, loopErr)
			// The optional breakpoint never hit: nothing was measured.
			var nh *NeverHitError
			if !errors.As(err, &nh) || !nh.Nothing || m.Status != runjson.StatusCompleted {
				t.Errorf("run ended with %v, status %q; want nothing measured, completed", err, m.Status)
			}
			checkSent(t, fake, []string{"-exec-continue"})
			checkEvents(t, m, []runjson.Event{tc.want})
			if len(m.Stops) != 0 || m.Breakpoints[0].Hits != 0 {
				t.Errorf("stops %+v, hits %d; want none", m.Stops, m.Breakpoints[0].Hits)
			}
		})
	}
}

// A signal is recorded with the stack where it arrived and passed on to
// the target. A fatal one keeps that stack as the crash site: when the
// target dies of it, the run's error names the frame.
func TestLoopSignal(t *testing.T) {
	t.Parallel()
	killedBy := func(sig string) string {
		return `*stopped,reason="exited-signalled",signal-name="` + sig + `",signal-meaning="a signal"`
	}
	sigEvent := func(sig string, bt []runjson.Frame) runjson.Event {
		f := signalFrame
		return runjson.Event{Kind: runjson.EventSignal, Signal: sig, Reason: "signal-received", Thread: runjson.Thread{ID: "1"}, Frame: &f, Backtrace: bt}
	}
	for _, tc := range []struct {
		name   string
		sig    string
		end    string // the stop after the signal
		noBT   bool   // gdb cannot list the frames
		err    error
		status runjson.Status
		crash  *runjson.Crash
	}{
		{name: "handled", sig: "SIGUSR1", end: `*stopped,reason="exited",exit-code="01"`, status: runjson.StatusCompleted},
		{name: "fatal", sig: "SIGSEGV", end: killedBy("SIGSEGV"),
			err: &CrashError{Signal: "SIGSEGV", Frame: &fakeBacktrace[0]}, status: runjson.StatusCrashed,
			crash: &runjson.Crash{Signal: "SIGSEGV", Thread: runjson.Thread{ID: "1"}, Backtrace: fakeBacktrace}},
		{name: "fatal, then killed by another", sig: "SIGSEGV", end: killedBy("SIGKILL"),
			err: &CrashError{Signal: "SIGKILL"}, status: runjson.StatusCrashed,
			crash: &runjson.Crash{Signal: "SIGSEGV", Thread: runjson.Thread{ID: "1"}, Backtrace: fakeBacktrace}},
		{name: "fatal without a backtrace", sig: "SIGABRT", end: killedBy("SIGABRT"), noBT: true,
			err: &CrashError{Signal: "SIGABRT"}, status: runjson.StatusCrashed,
			crash: &runjson.Crash{Signal: "SIGABRT", Thread: runjson.Thread{ID: "1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n    optional: true\n"), tc.end)
			if tc.noBT {
				fake.fail = map[string]string{"-stack-list-frames": "Cannot access memory at address 0x7ff0"}
			}
			fake.events <- mustRecord(t, signalRecord(tc.sig))
			loopErr := runLoop(t, s, context.Background())
			if diff := cmp.Diff(tc.err, loopErr, cmp.Comparer(func(a, b error) bool { return a.Error() == b.Error() })); diff != "" {
				t.Errorf("loop's error (-want +got):\n%s", diff)
			}
			var ce *CrashError
			if tc.err != nil && !errors.As(loopErr, &ce) {
				t.Errorf("loop's error %v is no *CrashError", loopErr)
			}
			m, _ := finishRun(t, s, loopErr)
			checkSent(t, fake, []string{"-stack-list-frames", "-exec-continue"})
			bt := fakeBacktrace
			if tc.noBT {
				bt = nil
			}
			checkEvents(t, m, []runjson.Event{sigEvent(tc.sig, bt)})
			if diff := cmp.Diff(tc.crash, m.Target.Crash); diff != "" {
				t.Errorf("crash (-want +got):\n%s", diff)
			}
			if m.Status != tc.status {
				t.Errorf("status %q, want %q", m.Status, tc.status)
			}
			if tc.err == nil {
				if m.Target.Signal != nil || m.Target.ExitCode == nil || *m.Target.ExitCode != 1 {
					t.Errorf("target ended with signal %v, exit code %v; want exit code 1", m.Target.Signal, m.Target.ExitCode)
				}
			} else if m.Target.Signal == nil || *m.Target.Signal != ce.Signal || m.Target.ExitCode != nil {
				t.Errorf("target ended with signal %v, exit code %v; want %s", m.Target.Signal, m.Target.ExitCode, ce.Signal)
			}
		})
	}
}

// A failure at a stop ends the run with an error that names its cause:
// the run's own end, gdb's death, the connection to valgrind lost, or
// gdb's words. The target is not resumed after it.
func TestLoopStopFails(t *testing.T) {
	t.Parallel()
	gdbKilled := &mi.ExitError{Pid: 42, State: killedError(t).ProcessState, Stderr: "Fatal signal: Segmentation fault"}
	const plain = "breakpoints:\n  - name: request\n    location: handle_request\n"
	const withCommands = plain + "    commands: [info locals]\n"
	for _, tc := range []struct {
		name   string
		plan   string
		fake   func(*session, *fakeGDB)
		ctx    func() (context.Context, context.CancelFunc)
		stops  []string // the stops of the continues gdb runs
		sent   []string
		status runjson.Status
		check  func(t *testing.T, err error)
	}{
		{name: "run ends", plan: withCommands,
			fake: func(_ *session, f *fakeGDB) { f.hang = map[string]bool{snapshotMonitor: true} },
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeoutCause(context.Background(), 50*time.Millisecond, ErrTimeout)
			},
			sent: firstStop, status: runjson.StatusTimeout,
			check: func(t *testing.T, err error) {
				if err != ErrTimeout {
					t.Errorf("got %v, want the run's cause, ErrTimeout", err)
				}
			}},
		{name: "gdb error", plan: plain,
			fake: func(_ *session, f *fakeGDB) {
				f.fail = map[string]string{"-thread-info 1": "Invalid thread id: 1"}
			},
			// gdb runs the whole batch, the continue too: the
			// run ends all the same.
			stops: []string{exitedNormally},
			sent:  cmds(firstStop, "-exec-continue"), status: runjson.StatusFailed,
			check: func(t *testing.T, err error) {
				var me *mi.Error
				const want = `at breakpoint "request": -thread-info: gdb: -thread-info 1: Invalid thread id: 1`
				if err == nil || err.Error() != want || !errors.As(err, &me) {
					t.Errorf("got %v, want the *mi.Error %q", err, want)
				}
			}},
		{name: "gdb dies", plan: plain,
			fake: func(_ *session, f *fakeGDB) { f.dieAt, f.dieWith = snapshotMonitor, gdbKilled },
			sent: firstStop, status: runjson.StatusFailed,
			check: func(t *testing.T, err error) {
				want := &ToolError{Tool: "gdb", Msg: "was killed by SIGKILL during the run", Tail: "Fatal signal: Segmentation fault"}
				if diff := cmp.Diff(want, err); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}},
		{name: "connection lost", plan: plain,
			fake: func(s *session, f *fakeGDB) {
				// valgrind ran the target to its end once vgdb
				// was gone.
				valgrindEnded(t, s, false)
				f.fail = map[string]string{
					snapshotMonitor:  "Remote communication error.  Target disconnected.: Connection reset by peer.",
					"-exec-continue": "The program is not being run.",
				}
			},
			sent: cmds(firstStop, "-exec-continue"), status: runjson.StatusFailed,
			check: func(t *testing.T, err error) {
				want := &ToolError{Tool: "vgdb", Msg: `the connection to valgrind was lost (gdb: "Remote communication error.  Target disconnected.: Connection reset by peer.") and the target's process exited with status 0: vgdb exited or was killed, or the target called exec (valgrind follows exec only with --trace-children=yes)`}
				if diff := cmp.Diff(want, err); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, tc.plan), tc.stops...)
			tc.fake(s, fake)
			ctx, cancel := context.WithCancel(context.Background())
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			fake.events <- mustRecord(t, hitRecord)
			loopErr := runLoop(t, s, ctx)
			tc.check(t, loopErr)
			m, err := finishRun(t, s, loopErr)
			checkSent(t, fake, tc.sent)
			checkEvents(t, m, nil)
			if len(m.Stops) != 0 || m.Status != tc.status || err != loopErr {
				t.Errorf("stops %+v, status %q, run's error %v; want none, %s, the loop's", m.Stops, m.Status, err, tc.status)
			}
		})
	}
}

// A stop whose snapshot does not answer within stop_timeout is abandoned:
// an event says so, the target is interrupted, and the stop that the
// interrupt brings back is handled as the stop loop would: the
// interrupt's own resumes the target, another (the exit, a hit, a signal)
// is not lost.
func TestLoopStopAbandoned(t *testing.T) {
	t.Parallel()
	const plan = "stop_timeout: 100ms\nbreakpoints:\n  - name: request\n    location: handle_request\n    commands: [info locals]\n"
	abandoned := append(firstStop[:len(firstStop):len(firstStop)], "-exec-interrupt")
	for _, tc := range []struct {
		name      string
		interrupt string
		stops     []string // after the interrupt's stop
		sent      []string
		events    []string
		hits      []int
		exit      int
	}{
		{name: "own stop", interrupt: signalRecord("SIGINT"), stops: []string{exitedNormally},
			sent: cmds(abandoned, "-exec-continue"), events: []string{"stop-abandoned"}},
		{name: "own stop without reason", interrupt: `*stopped,frame={addr="0x10",func="handle_request",args=[],file="leak.c",line="23"},thread-id="1",stopped-threads="all"`,
			stops: []string{exitedNormally}, sent: cmds(abandoned, "-exec-continue"), events: []string{"stop-abandoned"}},
		{name: "exit", interrupt: `*stopped,reason="exited",exit-code="012"`,
			sent: abandoned, events: []string{"stop-abandoned"}, exit: 10},
		{name: "hit", interrupt: hitRecord, stops: []string{exitedNormally},
			sent: cmds(abandoned, firstStop, "-gdb-show scheduler-locking", "-gdb-set scheduler-locking on",
				`-interpreter-exec console "info locals"`, "-gdb-set scheduler-locking replay", "-exec-continue"),
			events: []string{"stop-abandoned"}, hits: []int{2}},
		{name: "signal", interrupt: signalRecord("SIGUSR2"), stops: []string{exitedNormally},
			sent:   cmds(abandoned, "-stack-list-frames", "-exec-continue"),
			events: []string{"stop-abandoned", "signal"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, plan), tc.stops...)
			fake.hang = map[string]bool{snapshotMonitor: true}
			fake.interrupts = []string{tc.interrupt}
			fake.events <- mustRecord(t, hitRecord)
			loopErr := runLoop(t, s, context.Background())
			if loopErr != nil {
				t.Fatal(loopErr)
			}
			m, err := finishRun(t, s, loopErr)
			var nh *NeverHitError
			var early *EndedEarlyError
			switch {
			case tc.exit != 0 && (!errors.As(err, &early) || early.ExitCode != tc.exit || m.Status != runjson.StatusCompleted):
				// The abandoned stop was the only one and the target
				// failed: it ended before anything was measured.
				t.Errorf("run ended with %v, status %q; want the target ended early, completed", err, m.Status)
			case tc.exit == 0 && len(tc.hits) == 0 && (!errors.As(err, &nh) || !nh.Nothing || m.Status != runjson.StatusCompleted):
				// The abandoned stop was the only one: nothing measured.
				t.Errorf("run ended with %v, status %q; want nothing measured, completed", err, m.Status)
			case len(tc.hits) > 0 && (err != nil || m.Status != runjson.StatusCompleted):
				t.Errorf("run ended with %v, status %q; want nil, completed", err, m.Status)
			}
			checkSent(t, fake, tc.sent)
			kinds := eventKinds(m)
			if diff := cmp.Diff(tc.events, kinds); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if e := m.Events[0]; !strings.HasPrefix(e.Message, `at breakpoint "request": -interpreter-exec: `) || !strings.HasSuffix(e.Message, context.DeadlineExceeded.Error()) {
				t.Errorf("stop-abandoned message %q", e.Message)
			}
			var hits []int
			for _, st := range m.Stops {
				hits = append(hits, st.Hit)
			}
			if diff := cmp.Diff(tc.hits, hits); diff != "" {
				t.Errorf("stops by hit (-want +got):\n%s", diff)
			}
			if c := m.Target.ExitCode; c == nil || *c != tc.exit {
				t.Errorf("exit code %v, want %d", c, tc.exit)
			}
			if want := 1 + len(tc.hits); m.Breakpoints[0].Hits != want {
				t.Errorf("%d hits, want %d", m.Breakpoints[0].Hits, want)
			}
		})
	}
}

// An interrupt whose stop does not come within its wait (a loaded
// machine): the target runs on, and gdb refuses the resume that follows
// ("while the selected thread is running"), which is no failure of the
// run; the interrupt's stop, when it comes later, only resumes the
// target, with no event of its own. Before, the refused resume ended the
// run ("resuming the target: ... is running").
func TestLoopInterruptWithoutStop(t *testing.T) {
	t.Parallel()
	const plan = "stop_timeout: 100ms\nbreakpoints:\n  - name: request\n    location: handle_request\n    commands: [info locals]\n"
	s, fake := fakeSession(t, mustPlan(t, plan), signalRecord("SIGINT"), exitedNormally)
	fake.hang = map[string]bool{snapshotMonitor: true}
	fake.running = 1
	fake.events <- mustRecord(t, hitRecord)
	loopErr := runLoop(t, s, context.Background())
	if loopErr != nil {
		t.Fatalf("the loop ended with %v", loopErr)
	}
	m, err := finishRun(t, s, loopErr)
	var nh *NeverHitError
	if !errors.As(err, &nh) || !nh.Nothing || m.Status != runjson.StatusCompleted {
		t.Errorf("run ended with %v, status %q; want nothing measured, completed", err, m.Status)
	}
	if diff := cmp.Diff(cmds(firstStop, "-exec-interrupt", "-exec-continue", "-exec-continue"), interruptsOnce(fake.sent)); diff != "" {
		t.Errorf("commands gdb received, each run of interrupts as one (-want +got):\n%s", diff)
	}
	kinds := eventKinds(m)
	if diff := cmp.Diff([]string{"stop-abandoned"}, kinds); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if c := m.Target.ExitCode; c == nil || *c != 0 || m.Target.Signal != nil {
		t.Errorf("the target's end: exit code %v, signal %v; want 0", c, m.Target.Signal)
	}
}

// interruptsOnce is the commands gdb received with each run of
// -exec-interrupt as one: an interrupt is sent again until its wait ends,
// as often as it fits in it.
func interruptsOnce(sent []string) []string {
	var out []string
	for _, c := range sent {
		if c != "-exec-interrupt" || len(out) == 0 || out[len(out)-1] != c {
			out = append(out, c)
		}
	}
	return out
}

// The same for an around_call stop given up on: the call does not
// return within stop_timeout, the interrupt's stop does not come within
// its wait, and the resume that leaves the stop (recorder.resumed's,
// once gdb's scheduler-locking mode is restored) is refused as the target
// runs.
func TestLoopAroundCallInterruptWithoutStop(t *testing.T) {
	t.Parallel()
	const plan = "stop_timeout: 100ms\nbreakpoints:\n  - name: request\n    location: handle_request\n    around_call: true\n"
	s, fake := fakeSession(t, mustPlan(t, plan), signalRecord("SIGINT"), exitedNormally)
	fake.running = 1
	fake.events <- mustRecord(t, hitRecord)
	loopErr := runLoop(t, s, context.Background())
	if loopErr != nil {
		t.Fatalf("the loop ended with %v", loopErr)
	}
	m, err := finishRun(t, s, loopErr)
	if err != nil || m.Status != runjson.StatusCompleted {
		t.Errorf("run ended with %v, status %q; want nil, completed", err, m.Status)
	}
	if diff := cmp.Diff(cmds(aroundStop, "-gdb-show scheduler-locking", "-gdb-set scheduler-locking on", "-exec-finish",
		"-exec-interrupt", "-gdb-set scheduler-locking replay", "-exec-continue", "-exec-continue"), interruptsOnce(fake.sent)); diff != "" {
		t.Errorf("commands gdb received, each run of interrupts as one (-want +got):\n%s", diff)
	}
	kinds := eventKinds(m)
	if diff := cmp.Diff([]string{"stop-abandoned"}, kinds); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"request 1 hit on"}, phases(m)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
}

// The stop of an interrupt given up on that never comes (every thread
// that could take its SIGINT held stopped by gdb, the running one
// blocking it, as in a --sites run whose finish ran heaptrack's timer
// thread alone: fact 159) ends the run stop_timeout later, with an error that says so. Before, the loop waited for ever.
func TestLoopInterruptStopNeverComes(t *testing.T) {
	t.Parallel()
	const plan = "stop_timeout: 100ms\nbreakpoints:\n  - name: request\n    location: handle_request\n    around_call: true\n"
	s, fake := fakeSession(t, mustPlan(t, plan))
	fake.running = 1
	fake.events <- mustRecord(t, hitRecord)
	loopErr := runLoop(t, s, context.Background())
	var te *ToolError
	if !errors.As(loopErr, &te) || !strings.Contains(te.Msg, "the stop of snapctl's interrupt has not come ") || !strings.Contains(te.Msg, "after it was given up on (stop_timeout 100ms)") {
		t.Fatalf("the loop ended with %v, want the interrupt's stop overdue", loopErr)
	}
	m, _ := finishRun(t, s, loopErr)
	kinds := eventKinds(m)
	if diff := cmp.Diff([]string{"stop-abandoned", "stop-stalled"}, kinds); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if m.Status != runjson.StatusFailed {
		t.Errorf("status %q, want failed", m.Status)
	}
}

// While the target runs, gdb's death and the loss of the connection to
// valgrind end the run with an error that names the child that went.
func TestLoopChildGone(t *testing.T) {
	t.Parallel()
	killed := killedError(t)
	valgrindLogText := "==42== Memcheck\n==42== one\n==42== two\n"
	lost := mustRecord(t, `&"Remote connection closed\n"`)
	vgdbLost := &ToolError{Tool: "vgdb", Msg: `the connection to valgrind was lost (gdb: "Remote connection closed"); vgdb exited or was killed`}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *session, fake *fakeGDB)
		want *ToolError
	}{
		{"gdb killed", func(t *testing.T, s *session, fake *fakeGDB) {
			fake.die(&mi.ExitError{Pid: 42, State: killed.ProcessState, Stderr: "Fatal signal: Aborted"})
		}, &ToolError{Tool: "gdb", Msg: "was killed by SIGKILL during the run", Tail: "Fatal signal: Aborted"}},
		{"gdb's output ended", func(t *testing.T, s *session, fake *fakeGDB) {
			fake.die(&mi.ExitError{Err: errors.New("EOF")})
		}, &ToolError{Tool: "gdb", Msg: "exited during the run"}},
		{"connection lost, valgrind runs", func(t *testing.T, s *session, fake *fakeGDB) {
			fake.events <- lost
		}, vgdbLost},
		{"connection lost, valgrind exited", func(t *testing.T, s *session, fake *fakeGDB) {
			valgrindEnded(t, s, false)
			fake.events <- lost
		}, &ToolError{Tool: "vgdb", Msg: `the connection to valgrind was lost (gdb: "Remote connection closed") and the target's process exited with status 0: vgdb exited or was killed, or the target called exec (valgrind follows exec only with --trace-children=yes)`}},
		{"connection lost, valgrind killed", func(t *testing.T, s *session, fake *fakeGDB) {
			if err := os.WriteFile(filepath.Join(s.out.dir, valgrindLog), []byte(valgrindLogText), 0o644); err != nil {
				t.Fatal(err)
			}
			valgrindEnded(t, s, true)
			fake.events <- lost
		}, &ToolError{Tool: "valgrind", Msg: "was killed by SIGKILL during the run", Tail: strings.TrimSpace(valgrindLogText)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n"))
			tc.run(t, s, fake)
			loopErr := runLoop(t, s, context.Background())
			if diff := cmp.Diff(tc.want, loopErr); diff != "" {
				t.Errorf("loop's error (-want +got):\n%s", diff)
			}
			m, _ := finishRun(t, s, loopErr)
			checkSent(t, fake, nil)
			if m.Status != runjson.StatusFailed || !strings.HasPrefix(m.Error, tc.want.Tool+": ") {
				t.Errorf("status %q, error %q; want failed, naming %s", m.Status, m.Error, tc.want.Tool)
			}
		})
	}
}

// around_call whose finish gdb refuses: the event says why, the hit's
// snapshot stays, gdb's scheduler-locking mode is restored and the target
// goes on.
func TestLoopAroundCallFailed(t *testing.T) {
	t.Parallel()
	s, fake := fakeSession(t, mustPlan(t, "scheduler_locking: on\nbreakpoints:\n  - name: request\n    location: handle_request\n    around_call: true\n"), exitedNormally)
	fake.fail = map[string]string{"-exec-finish": `"finish" not meaningful in the outermost frame.`}
	fake.events <- mustRecord(t, hitRecord)
	loopErr := runLoop(t, s, context.Background())
	if loopErr != nil {
		t.Fatal(loopErr)
	}
	m, err := finishRun(t, s, loopErr)
	if err != nil || m.Status != runjson.StatusCompleted {
		t.Errorf("run ended with %v, status %q; want nil, completed", err, m.Status)
	}
	checkSent(t, fake, cmds(aroundStop,
		"-gdb-show scheduler-locking", "-gdb-set scheduler-locking on",
		"-exec-finish",
		"-gdb-set scheduler-locking replay", "-exec-continue"))
	checkEvents(t, m, []runjson.Event{{Kind: runjson.EventAroundCallFailed, Thread: hitThread,
		Message: `breakpoint "request" hit 1: finish: "finish" not meaningful in the outermost frame.`}})
	if diff := cmp.Diff([]string{"request 1 hit on"}, phases(m)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
}

// around_call whose call is cut short by another stop: the return
// snapshot is lost and an event says what came first; gdb's
// scheduler-locking mode is restored and every applied before that stop
// is handled as the stop loop would.
func TestLoopAroundCallCutShort(t *testing.T) {
	t.Parallel()
	const plan = "scheduler_locking: on\nbreakpoints:\n  - name: request\n    location: handle_request\n    around_call: true\n    every: 2\n"
	lock := []string{"-gdb-set scheduler-locking on", "-exec-finish"}
	unlock := "-gdb-set scheduler-locking replay"
	hitInThread2 := `*stopped,reason="breakpoint-hit",disp="keep",bkptno="1",frame={addr="0x10",func="handle_request",args=[],file="leak.c",line="23"},thread-id="2",stopped-threads="all"`
	for _, tc := range []struct {
		name     string
		finishes []string
		stops    []string
		sent     []string
		reason   string
		events   []string
		phases   []string
	}{
		{name: "exit", finishes: []string{exitedNormally},
			// The target is gone: gdb's mode is not restored on it.
			sent:   cmds(aroundStop, "-gdb-show scheduler-locking", lock),
			reason: "exited-normally", events: []string{"around-call-cut-short"},
			phases: []string{"request 1 hit on"}},
		{name: "signal", finishes: []string{signalRecord("SIGUSR1")}, stops: []string{exitedNormally},
			sent: cmds(aroundStop, "-gdb-show scheduler-locking", lock, unlock, "-break-after 1 1",
				"-stack-list-frames", "-exec-continue"),
			reason: "signal-received", events: []string{"around-call-cut-short", "signal"},
			phases: []string{"request 1 hit on"}},
		// The hit in another thread stands for the two hits that
		// every: 2 makes one stop of; its own call returns. The
		// fake's thread list has no thread 2, so gdb is asked for it
		// at each of its stops.
		{name: "hit in another thread", finishes: []string{hitInThread2, finished}, stops: []string{exitedNormally},
			sent: cmds(aroundStop, "-gdb-show scheduler-locking", lock, unlock, "-break-after 1 1",
				aroundStop, lock, "-thread-info", snapshotMonitor, unlock, "-break-after 1 1", "-exec-continue"),
			reason: "breakpoint-hit", events: []string{"around-call-cut-short"},
			phases: []string{"request 1 hit on", "request 3 hit on", "request 3 return on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, plan), tc.stops...)
			fake.finishes = tc.finishes
			fake.events <- mustRecord(t, hitRecord)
			loopErr := runLoop(t, s, context.Background())
			if loopErr != nil {
				t.Fatal(loopErr)
			}
			m, err := finishRun(t, s, loopErr)
			if err != nil || m.Status != runjson.StatusCompleted {
				t.Errorf("run ended with %v, status %q; want nil, completed", err, m.Status)
			}
			checkSent(t, fake, tc.sent)
			var kinds []string
			for _, e := range m.Events {
				kinds = append(kinds, string(e.Kind))
			}
			if diff := cmp.Diff(tc.events, kinds); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			want := runjson.Event{Kind: runjson.EventAroundCallCutShort, Reason: tc.reason, Thread: hitThread,
				Message: `breakpoint "request" hit 1: ` + tc.reason + ` before the call returned`}
			if diff := cmp.Diff(want, eventsOf(m)[0]); diff != "" {
				t.Errorf("event (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.phases, phases(m)); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}
		})
	}
}

// The plan's scheduler-locking mode is set, when it differs from gdb's,
// around the actions of a stop that resume the target (around_call's
// finish, breakpoint commands) and gdb's mode restored before the target
// goes on; gdb's mode is read once. A stop that resumes nothing leaves
// the mode alone.
func TestLoopSchedulerLocking(t *testing.T) {
	t.Parallel()
	const bp = "breakpoints:\n  - name: request\n    location: handle_request\n"
	// aroundCall is the commands of an around_call stop: the first reads
	// the threads, and gdb's mode unless it is known; with mode, it is set
	// for finish and gdb's restored before the target goes on.
	aroundCall := func(first, show bool, mode string) []string {
		out := aroundLater
		if first {
			out = aroundStop
		}
		if show {
			out = cmds(out, "-gdb-show scheduler-locking")
		}
		if mode == "" {
			return cmds(out, "-exec-finish", snapshotMonitor, "-exec-continue")
		}
		return cmds(out, "-gdb-set scheduler-locking "+mode, "-exec-finish", snapshotMonitor,
			"-gdb-set scheduler-locking replay", "-exec-continue")
	}
	for _, tc := range []struct {
		name     string
		plan     string
		finishes []string
		sent     []string
		phases   []string
	}{
		{name: "around_call", plan: "scheduler_locking: on\n" + bp + "    around_call: true\n",
			finishes: []string{finished, finished},
			sent:     cmds(aroundCall(true, true, "on"), aroundCall(false, false, "on")),
			phases:   []string{"request 1 hit on", "request 1 return on", "request 2 hit on", "request 2 return on"}},
		{name: "commands", plan: "scheduler_locking: step\n" + bp + "    commands: [bt]\n",
			sent: cmds(firstStop, "-gdb-show scheduler-locking",
				"-gdb-set scheduler-locking step", `-interpreter-exec console "bt"`, "-gdb-set scheduler-locking replay", "-exec-continue",
				laterStop,
				"-gdb-set scheduler-locking step", `-interpreter-exec console "bt"`, "-gdb-set scheduler-locking replay", "-exec-continue"),
			phases: []string{"request 1 hit step", "request 2 hit step"}},
		{name: "gdb's own mode", plan: "scheduler_locking: replay\n" + bp + "    around_call: true\n",
			finishes: []string{finished, finished},
			sent:     cmds(aroundCall(true, true, ""), aroundCall(false, false, "")),
			phases:   []string{"request 1 hit replay", "request 1 return replay", "request 2 hit replay", "request 2 return replay"}},
		{name: "default", plan: bp + "    around_call: true\n",
			finishes: []string{finished, finished},
			sent:     cmds(aroundCall(true, true, "on"), aroundCall(false, false, "on")),
			phases:   []string{"request 1 hit on", "request 1 return on", "request 2 hit on", "request 2 return on"}},
		{name: "nothing resumes", plan: "scheduler_locking: on\n" + bp,
			sent:   cmds(firstStop, "-exec-continue", laterStop, "-exec-continue"),
			phases: []string{"request 1 hit", "request 2 hit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, tc.plan), hitRecord, exitedNormally)
			fake.finishes = tc.finishes
			fake.events <- mustRecord(t, hitRecord)
			loopErr := runLoop(t, s, context.Background())
			if loopErr != nil {
				t.Fatal(loopErr)
			}
			m, err := finishRun(t, s, loopErr)
			if err != nil || m.Status != runjson.StatusCompleted {
				t.Errorf("run ended with %v, status %q; want nil, completed", err, m.Status)
			}
			checkSent(t, fake, tc.sent)
			checkEvents(t, m, nil)
			if diff := cmp.Diff(tc.phases, phases(m)); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}
		})
	}
}

// gdb refusing to restore its scheduler-locking mode ends the run: the
// target is not resumed under the plan's mode.
func TestLoopSchedulerLockingNotRestored(t *testing.T) {
	t.Parallel()
	s, fake := fakeSession(t, mustPlan(t, "scheduler_locking: on\nbreakpoints:\n  - name: request\n    location: handle_request\n    commands: [bt]\n"))
	fake.fail = map[string]string{"-gdb-set scheduler-locking replay": "Target 'remote' cannot support this command."}
	fake.events <- mustRecord(t, hitRecord)
	loopErr := runLoop(t, s, context.Background())
	const want = `restoring scheduler-locking replay: gdb: -gdb-set scheduler-locking replay: Target 'remote' cannot support this command.`
	var me *mi.Error
	if loopErr == nil || loopErr.Error() != want || !errors.As(loopErr, &me) {
		t.Errorf("loop's error %v, want the *mi.Error %q", loopErr, want)
	}
	m, _ := finishRun(t, s, loopErr)
	checkSent(t, fake, cmds(firstStop, "-gdb-show scheduler-locking", "-gdb-set scheduler-locking on",
		`-interpreter-exec console "bt"`, "-gdb-set scheduler-locking replay"))
	if diff := cmp.Diff([]string{"request 1 hit on"}, phases(m)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	if m.Status != runjson.StatusFailed {
		t.Errorf("status %q, want failed", m.Status)
	}
}

// A run that ends while the target runs interrupts it and ends with the
// run's cause; an exit that came before the interrupt took effect is
// still recorded.
func TestLoopCancelled(t *testing.T) {
	t.Parallel()
	ten := 10
	for _, tc := range []struct {
		name      string
		interrupt string
		exit      *int
	}{
		{name: "own stop", interrupt: signalRecord("SIGINT")},
		{name: "exit first", interrupt: `*stopped,reason="exited",exit-code="012"`, exit: &ten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := fakeSession(t, mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n"))
			fake.interrupts = []string{tc.interrupt}
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(ErrInterrupted)
			loopErr := runLoop(t, s, ctx)
			if loopErr != ErrInterrupted {
				t.Errorf("loop's error %v, want the run's cause", loopErr)
			}
			m, _ := finishRun(t, s, loopErr)
			checkSent(t, fake, []string{"-exec-interrupt"})
			if diff := cmp.Diff(tc.exit, m.Target.ExitCode); diff != "" {
				t.Errorf("exit code (-want +got):\n%s", diff)
			}
			if m.Status != runjson.StatusInterrupt || len(m.Stops) != 0 {
				t.Errorf("status %q, stops %+v; want interrupted, none", m.Status, m.Stops)
			}
		})
	}
}

// threadStates names each thread of a real process with its state, as the
// error of an overdue interrupt lists them.
func TestThreadStates(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	cmd.Process.Signal(syscall.SIGSTOP)
	want := fmt.Sprintf("%d stopped", pid)
	testenv.WaitUntil(t, "the sleep stopped", 10*time.Second, time.Millisecond, func() bool { return threadStates(pid) == want })
	if got := threadStates(0); got != "" {
		t.Errorf("threadStates(0) = %q, want none", got)
	}
}

// A thread in a tracing stop is listed with its tracer and where it
// stands, and the signals pending for the whole process follow: what fact
// 159's hang needed to be understood.
func TestThreadStatesTraced(t *testing.T) {
	runtime.LockOSThread() // a tracer's requests come from its thread
	defer runtime.UnlockOSThread()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		t.Fatalf("the traced sleep did not stop at its exec: %v %v", ws, err)
	}
	var regs syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(pid, &regs); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The kernel names the tracing thread, here this locked one.
	tracer := syscall.Gettid()
	want := fmt.Sprintf("%d stopped by a tracer (%s %d, at %#x); pending for the process: SIGINT", pid, proc.Name(tracer), tracer, regs.PC())
	if got := threadStates(pid); got != want {
		t.Errorf("threadStates = %q, want %q", got, want)
	}
}
