package tracer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

func TestMain(m *testing.M) {
	if pid := os.Getenv("SNAPCTL_TRACER_TEST_PID"); pid != "" {
		traceForever(pid)
		return
	}
	os.Exit(testenv.Main(m))
}

func kernelOrSkip(t *testing.T) {
	t.Helper()
	var refused *uprobes.Refused
	if err := uprobes.Available(); errors.As(err, &refused) {
		t.Skipf("the kernel does not count hits here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

// prog is testdata/threads.c running.
type prog struct {
	cmd        *exec.Cmd
	in         io.Writer
	out        *bufio.Reader
	hot, crash uint64
}

func start(t *testing.T, workers, calls int) *prog {
	t.Helper()
	bin := testenv.Build(t, "testdata/threads.c")
	cmd := exec.Command(bin, strconv.Itoa(workers), strconv.Itoa(calls))
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	// Pipes of the test's own, not os/exec's: os/exec closes its pipes
	// once its Wait returns, which a stop of the program's can make it
	// do (TestStopTakenByAnotherWait).
	inR, in, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); in.Close(); out.Close() })
	p := &prog{cmd: cmd, in: in, out: bufio.NewReader(out)}
	line, err := p.out.ReadString('\n')
	if _, serr := fmt.Sscanf(line, "ready %v %v", &p.hot, &p.crash); err != nil || serr != nil {
		t.Fatalf("threads.c said %q: %v %v", line, err, serr)
	}
	return p
}

func (p *prog) say(t *testing.T, cmd string) string {
	t.Helper()
	fmt.Fprintln(p.in, cmd)
	if cmd == "go" || cmd == "crash" || cmd == "quit" {
		return ""
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		t.Fatalf("threads.c, asked %s: %v", cmd, err)
	}
	return strings.TrimSpace(line)
}

func (p *prog) count(t *testing.T) int {
	n, _ := strconv.Atoi(p.say(t, "count"))
	return n
}

// traced sets up what the product does: every thread seized, then the
// probe placed at hot() counting every EVERY-th hit, then resumed.
func traced(t *testing.T, p *prog, every int) (*Tracer, *uprobes.Counter) {
	t.Helper()
	pid := p.cmd.Process.Pid
	tr, err := Seize(pid, Config{Watch: []syscall.Signal{syscall.SIGWINCH, syscall.SIGURG}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Detach() })
	c, err := uprobes.New(pid, syscall.SIGWINCH, syscall.SIGURG, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Add(0, uprobes.Rule{Every: every}, []uint64{p.hot}, 0, 0); err != nil {
		t.Fatal(err)
	}
	tr.ResumeAll()
	return tr, c
}

var sigs = Signals{Stop: syscall.SIGWINCH, Hold: syscall.SIGURG}

// allStopped says which threads of pid are not in a tracing stop.
func notStopped(pid int) []string {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []string
	for _, e := range ents {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
		if err != nil {
			continue
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if f[0] != "t" && f[0] != "Z" && f[0] != "X" {
			out = append(out, e.Name()+":"+f[0])
		}
	}
	return out
}

func tracerPids(t *testing.T, pid int) []string {
	t.Helper()
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []string
	for _, e := range ents {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, e.Name()))
		for l := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(l, "TracerPid:"); ok && strings.TrimSpace(v) != "0" {
				out = append(out, e.Name()+" by "+strings.TrimSpace(v))
			}
		}
	}
	return out
}

// Four workers make 800,000 hits while a thread starts and ends every
// millisecond: every 10,000th is measured, in hot(), with every thread
// of the process stopped, and the count is exact; the program's exit is
// the loop's end, with its code.
func TestMeasuredStopsAreExact(t *testing.T) {
	kernelOrSkip(t)
	p := start(t, 4, 200_000)
	tr, c := traced(t, p, 10_000)
	p.say(t, "go")
	fmt.Fprintln(p.in, "wait")
	var hits []uint64
	var bad []string
	end, ok, err := tr.Loop(c, sigs, nil, func(h Hit, _ Stopped) error {
		hits = append(hits, h.N)
		if h.PC < p.hot || h.PC > p.hot+8 {
			bad = append(bad, fmt.Sprintf("hit %d at %#x, hot() at %#x", h.N, h.PC, p.hot))
		}
		if ns := notStopped(p.cmd.Process.Pid); len(ns) > 0 {
			bad = append(bad, fmt.Sprintf("hit %d: threads not stopped: %v", h.N, ns))
		}
		return nil
	}, nil)
	if err != nil || !ok {
		t.Fatalf("loop: %v %v", ok, err)
	}
	if end.Kind != Exited || end.Code != 3 {
		t.Errorf("the loop ended with %+v, want the exit with 3", end)
	}
	if line, _ := p.out.ReadString('\n'); strings.TrimSpace(line) != "done 800000" {
		t.Errorf("threads.c said %q", line)
	}
	var want []uint64
	for h := uint64(1); h <= 800_000; h += 10_000 {
		want = append(want, h)
	}
	if fmt.Sprint(hits) != fmt.Sprint(want) {
		t.Errorf("measured hits %v, want %v", hits, want)
	}
	for _, b := range bad {
		t.Error(b)
	}
	if s, _ := c.Read(0); s.Count != 800_000 || s.Blocked != 0 || s.Failed != 0 {
		t.Errorf("the kernel counted %+v", s)
	}
	if n := tr.Started(); n < 10 {
		t.Errorf("%d threads started while traced, want the helpers'", n)
	}
}

// Detached at any moment, the program runs on: no thread traced, no
// probe left, none of the tracer's signals taken by it.
func TestDetachLeavesItRunning(t *testing.T) {
	kernelOrSkip(t)
	p := start(t, 4, 0)
	tr, c := traced(t, p, 1000)
	p.say(t, "go")
	stop := make(chan struct{})
	var stops atomic.Int64
	go func() {
		testenv.WaitUntil(t, "5 measured stops", time.Minute, 10*time.Millisecond, func() bool { return stops.Load() >= 5 })
		close(stop)
	}()
	_, ok, err := tr.Loop(c, sigs, stop, func(Hit, Stopped) error { stops.Add(1); return nil }, nil)
	if err != nil || ok {
		t.Fatalf("loop: %v %v", ok, err)
	}
	if err := tr.Detach(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if tp := tracerPids(t, p.cmd.Process.Pid); len(tp) > 0 {
		t.Errorf("still traced: %v", tp)
	}
	if ch := testenv.TextChanges(t, p.cmd.Process.Pid); len(ch) > 0 {
		t.Errorf("probes left: %v", ch)
	}
	n := p.count(t)
	testenv.WaitUntil(t, "the workers to go on", time.Minute, 10*time.Millisecond, func() bool { return p.count(t) > n+10_000 })
	p.say(t, "quit")
	if err := p.cmd.Wait(); err == nil || p.cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("threads.c ended with %v", err)
	}
}

// A group stop (SIGSTOP to the process) is kept while traced: no thread
// runs until SIGCONT, after which the stops go on.
func TestGroupStopIsListenedThrough(t *testing.T) {
	kernelOrSkip(t)
	p := start(t, 4, 0)
	tr, c := traced(t, p, 1000)
	pid := p.cmd.Process.Pid
	p.say(t, "go")
	stop := make(chan struct{})
	done := make(chan error, 1)
	var stops atomic.Int64
	go func() {
		_, _, err := tr.Loop(c, sigs, stop, func(Hit, Stopped) error { stops.Add(1); return nil }, nil)
		done <- err
	}()
	testenv.WaitUntil(t, "a measured stop", time.Minute, 10*time.Millisecond, func() bool { return stops.Load() >= 1 })
	syscall.Kill(pid, syscall.SIGSTOP)
	// Every thread in a tracing stop is not yet the group stop: a
	// measured stop's threads are so too, and the SIGSTOP, sent while
	// they were, is taken only once they run again. The group stop is
	// when the hits stop: no hit in 200 ms, in a program making millions
	// a second.
	testenv.WaitUntil(t, "the hits to stop in the group stop", time.Minute, 10*time.Millisecond, func() bool {
		s1, _ := c.Read(0)
		time.Sleep(200 * time.Millisecond)
		s2, _ := c.Read(0)
		return s1.Count == s2.Count
	})
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, e.Name()))
		s := string(data)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] != "t" && f[0] != "T" {
			t.Errorf("thread %s is in state %s in the group stop", e.Name(), f[0])
		}
	}
	s1, _ := c.Read(0)
	time.Sleep(200 * time.Millisecond)
	if s2, _ := c.Read(0); s2.Count != s1.Count {
		t.Errorf("hits went on in the group stop: %d then %d", s1.Count, s2.Count)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	m := stops.Load()
	testenv.WaitUntil(t, "stops after SIGCONT", time.Minute, 10*time.Millisecond, func() bool { return stops.Load() > m+3 })
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := tr.Detach(); err != nil {
		t.Fatal(err)
	}
	n := p.count(t)
	testenv.WaitUntil(t, "the workers to go on", time.Minute, 10*time.Millisecond, func() bool { return p.count(t) > n+10_000 })
}

// A fault ends the loop with the signal and where it came.
func TestFatalSignalSaysWhere(t *testing.T) {
	kernelOrSkip(t)
	p := start(t, 4, 0)
	tr, c := traced(t, p, 1000)
	p.say(t, "go")
	p.say(t, "crash")
	end, ok, err := tr.Loop(c, sigs, nil, func(Hit, Stopped) error { return nil }, nil)
	if err != nil || !ok {
		t.Fatalf("loop: %v %v", ok, err)
	}
	if end.Kind != Killed || end.Sig != syscall.SIGSEGV || end.Tid != p.cmd.Process.Pid || end.PC < p.crash || end.PC > p.crash+64 || !strings.Contains(end.File, "threads") {
		t.Errorf("the loop ended with %+v, crash() at %#x", end, p.crash)
	}
}

// traceForever is the test binary as a tracer of its own, to be killed:
// it seizes process pid (SNAPCTL_TRACER_TEST_PID: "PID ADDR"), counts
// every 1000th hit of ADDR, says "counting" and takes stops until it is
// killed.
func traceForever(arg string) {
	var pid int
	var addr uint64
	fmt.Sscanf(arg, "%d %v", &pid, &addr)
	tr, err := Seize(pid, Config{Watch: []syscall.Signal{syscall.SIGWINCH, syscall.SIGURG}})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	c, err := uprobes.New(pid, syscall.SIGWINCH, syscall.SIGURG, 1)
	if err == nil {
		err = c.Add(0, uprobes.Rule{Every: 1000}, []uint64{addr}, 0, 0)
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	tr.ResumeAll()
	fmt.Println("counting")
	tr.Loop(c, sigs, nil, func(Hit, Stopped) error { return nil }, nil)
	select {}
}

// snapctl killed with SIGKILL while it traces the process leaves it
// running: the kernel detaches every thread and resumes it, the probes
// go with the tracer's descriptors, and a signal of the tracer's that
// reaches the program is ignored.
func TestKilledTracerLeavesItRunning(t *testing.T) {
	kernelOrSkip(t)
	p := start(t, 4, 0)
	pid := p.cmd.Process.Pid
	p.say(t, "go")
	for round := 0; round < 5; round++ {
		self, _ := os.Executable()
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), testenv.ScopeEnv(t), fmt.Sprintf("SNAPCTL_TRACER_TEST_PID=%d %#x", pid, p.hot))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "counting\n" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the tracer said %q", line)
		}
		// Killed at a moment of its stops, a little later each round.
		time.Sleep(time.Duration(round*7) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		testenv.WaitUntil(t, "the kernel to detach", time.Minute, 10*time.Millisecond, func() bool { return len(tracerPids(t, pid)) == 0 })
		if ch := testenv.TextChanges(t, pid); len(ch) > 0 {
			t.Fatalf("round %d: probes left: %v", round, ch)
		}
		n := p.count(t)
		testenv.WaitUntil(t, "the workers to go on", time.Minute, 10*time.Millisecond, func() bool { return p.count(t) > n+10_000 })
	}
	p.say(t, "quit")
	if err := p.cmd.Wait(); err == nil || p.cmd.ProcessState.ExitCode() != 3 {
		t.Errorf("threads.c ended with %v", err)
	}
}

// A thread that cannot stop (a vfork's parent until its child exits)
// fails the wait for every thread's stop after the patience, naming it,
// rather than hang: the seizure fails, what was seized is detached (the
// kernel detaches the rest as the tracer's thread ends), and the program
// runs on.
func TestStopAllIsBounded(t *testing.T) {
	p := start(t, 4, 0)
	pid := p.cmd.Process.Pid
	p.say(t, "go")
	line := p.say(t, "vfork")
	var tid int
	if _, err := fmt.Sscanf(line, "vforking %d", &tid); err != nil {
		t.Fatalf("threads.c said %q", line)
	}
	time.Sleep(100 * time.Millisecond) // in vfork
	start := time.Now()
	_, err := Seize(pid, Config{Patience: func() time.Duration { return 300 * time.Millisecond }})
	var ns *NotStopped
	if !errors.As(err, &ns) || fmt.Sprint(ns.Threads) != fmt.Sprint([]int{tid}) {
		t.Fatalf("Seize: %v, want thread %d not stopped", err, tid)
	}
	if took := time.Since(start); took > testenv.Scaled(5*time.Second) {
		t.Errorf("Seize took %v with a patience of 300 ms", took)
	}
	testenv.WaitUntil(t, "the kernel to detach", time.Minute, 10*time.Millisecond, func() bool { return len(tracerPids(t, pid)) == 0 })
	n := p.count(t)
	testenv.WaitUntil(t, "the workers to go on", time.Minute, 10*time.Millisecond, func() bool { return p.count(t) > n+10_000 })
}

// The program's main thread stops at PTRACE_INTERRUPT, but the event goes
// to another wait of the tracer's process: os/exec's Wait for the program
// it started takes a traced thread's stop as it would its end (fact 152).
// The wait for every thread's stop still finds the thread stopped, by its
// siginfo, and the stop and the resume go on as if the event had come.
func TestStopTakenByAnotherWait(t *testing.T) {
	p := start(t, 4, 0)
	pid := p.cmd.Process.Pid
	t.Cleanup(func() {
		// os/exec takes the program for ended once its Wait took a
		// stop: kill and reap it here.
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WALL, nil)
	})
	p.say(t, "go")
	tr, err := Seize(pid, Config{Watch: []syscall.Signal{syscall.SIGWINCH}, Patience: func() time.Duration { return testenv.Scaled(time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.ResumeAll()
	waited := make(chan *os.ProcessState, 1)
	go func() { p.cmd.Wait(); waited <- p.cmd.ProcessState }()
	testenv.WaitUntil(t, "os/exec's Wait to wait", time.Minute, time.Millisecond, func() bool { return testenv.InSyscall(os.Getpid(), "waitid") })
	// The tracer polls for its stops: os/exec's wait, blocked in the
	// kernel, is woken first nearly always. Stop until it has been.
	var taken *os.ProcessState
	for i := 0; i < 50 && taken == nil; i++ {
		if _, err := tr.StopAll(); err != nil {
			t.Fatalf("stop %d: %v", i+1, err)
		}
		if ns := notStopped(pid); len(ns) > 0 {
			t.Fatalf("stop %d: threads %v are not stopped", i+1, ns)
		}
		select {
		case taken = <-waited:
		default:
		}
		tr.ResumeAll()
	}
	if taken == nil {
		t.Fatal("os/exec's Wait took none of 50 stops of the main thread")
	}
	if !taken.Sys().(syscall.WaitStatus).Stopped() {
		t.Fatalf("os/exec's Wait returned %v, not a stop", taken)
	}
	if err := tr.Detach(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, "the kernel to detach", time.Minute, 10*time.Millisecond, func() bool { return len(tracerPids(t, pid)) == 0 })
	n := p.count(t)
	testenv.WaitUntil(t, "the workers to go on", time.Minute, 10*time.Millisecond, func() bool { return p.count(t) > n+10_000 })
}

// A process whose main thread has ended (pthread_exit) is seized in its
// other threads: the kernel refuses to trace the zombie main thread, as
// it does a thread that has just exited, and neither is a failure.
// A server's helper thread exiting as snapctl seized it made an attach
// fail with "operation not permitted", 1 in 10 cycles of a fault row.
func TestSeizeSkipsEndedThreads(t *testing.T) {
	cmd := testenv.StartFixture(t, testenv.Build(t, "testdata/leaderexit.c"))
	pid := cmd.Process.Pid
	testenv.WaitUntil(t, "the main thread to be a zombie", 10*time.Second, time.Millisecond, func() bool {
		return proc.Stat(pid).State == 'Z'
	})
	tr, err := Seize(pid, Config{Watch: []syscall.Signal{syscall.SIGWINCH, syscall.SIGURG}})
	if err != nil {
		t.Fatalf("seizing a process whose main thread ended: %v", err)
	}
	traced := tracerPids(t, pid)
	if err := tr.Detach(); err != nil {
		t.Errorf("detach: %v", err)
	}
	if len(traced) != 1 || strings.HasPrefix(traced[0], strconv.Itoa(pid)+" ") {
		t.Errorf("threads traced %v, want the worker alone", traced)
	}
}

// A program started on the tracer's thread before (by whatever goroutine
// ran there) is that thread's child too: its end is left to the goroutine
// that waits for it, not taken by the tracer's waits. A native test
// binary's gcc once failed so ("waitid: no child processes").
func TestChildOfTracerThreadLeftToItsWaiter(t *testing.T) {
	kernelOrSkip(t)
	p := start(t, 1, 0)
	tr, _ := traced(t, p, 1000)
	child := exec.Command("true")
	var err error
	tr.do(func() { err = child.Start() })
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitUntil(t, "the child to end", 10*time.Second, time.Millisecond, func() bool {
		return proc.Stat(child.Process.Pid).State == 'Z'
	})
	p.say(t, "go")
	ev, ok, err := tr.Next(nil)
	if err != nil || !ok {
		t.Fatalf("next: %+v %v %v", ev, ok, err)
	}
	tr.ResumeAll()
	if err := child.Wait(); err != nil {
		t.Errorf("waiting for the child the tracer's thread started: %v", err)
	}
	p.say(t, "quit")
}
