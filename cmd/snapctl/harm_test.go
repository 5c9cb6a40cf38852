package main

// Whatever dies, the attached program runs on: snapctl attach (with and
// without --sites, guarded or not) on the threaded TCP server under a
// loopback load of 4 clients, and one of snapctl's processes killed or
// stopped mid-run. After each cycle the server must answer, untraced, with
// no signal pending, its code the files', and heaptrack's library silent
// (300 more "keep" requests, more than its buffer holds many times, go
// through: a library still writing into a FIFO nobody reads would end
// the server with SIGPIPE), and no process of the run may be left.

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// A harmCase is one fault against snapctl attach on the server.
type harmCase struct {
	flags  []string // attach's flags: --sites, --guard=false
	env    []string // snapctl's environment besides the test's: SNAPCTL_HITS=gdb
	victim string   // "snapctl", "gdb", "gdbserver", "heaptrack_interpret"
	stop   bool     // SIGSTOP for 2 s, then SIGCONT, rather than SIGKILL
	want   []int    // exit codes, nil when snapctl is killed
	// broken says why the case is known not to hold yet ("" when it
	// must hold).
	broken string
	// idle: no load before the fault (the server waits in accept and
	// read, its breakpoint in); snapctl and gdb stopped, the victim
	// killed, 20 requests 200 ms later, the first to hit the breakpoint
	// since, and snapctl and gdb continued.
	idle bool
	// gdbGone: snapctl takes the stops and gdb has left the process, so
	// gdb's death ends nothing: the run goes on.
	gdbGone bool
	// matrixOnly: run by the matrix and bench/harm.sh, not by
	// TestHarmUnderLoad in every CI run (the attach modes whose stop
	// path is another's cases already cover).
	matrixOnly bool
}

func (c harmCase) name() string {
	how := "kill -9 "
	if c.stop {
		how = "SIGSTOP "
	}
	mode := "attach"
	for _, f := range append(slices.Clone(c.flags), c.env...) {
		mode += " " + f
	}
	name := mode + ": " + how + c.victim + "/" + mMidRun
	if c.idle {
		name += ", the server idle"
	}
	return name
}

// gdbStops has gdb and gdbserver take a plain attach's stops, as they
// did before snapctl took them itself (SNAPCTL_STOPS=gdb): the cases
// whose victim is gdb or gdbserver judge that path. Taken by snapctl,
// the stops need neither once the run is set up; the cases without it
// (kill -9 and SIGSTOP of snapctl, snapctl and gdb together) judge
// snapctl's own stops.
var gdbStops = []string{"SNAPCTL_STOPS=gdb"}

// harmCases are the cases the matrix and TestHarmUnderLoad run.
var harmCases = []harmCase{
	{flags: []string{"--sites"}, victim: "snapctl"},
	// gdb traces the process under --sites: a thread whose breakpoint
	// trap gdb had not collected when it died gets its SIGTRAP (fact 63),
	// which snapctl's handler in the process takes (fact 113); a thread
	// a killed gdb leaves in its step copy at the entry point (fact 114)
	// the guardian's repair takes back to the program's code.
	{flags: []string{"--sites"}, victim: "gdb", want: []int{exitFailure}},
	{flags: []string{"--sites"}, victim: "heaptrack_interpret", want: []int{exitInterrupted, exitTimeout, exitFailure}},
	{flags: []string{"--sites"}, victim: "snapctl", stop: true, want: []int{exitInterrupted, exitTimeout}},
	{flags: []string{"--sites"}, victim: "gdb", stop: true, want: []int{exitInterrupted, exitTimeout, exitFailure}},
	{flags: []string{"--sites"}, victim: "snapctl+gdb"},
	{flags: nil, victim: "snapctl"},
	{flags: nil, victim: "snapctl", stop: true, want: []int{exitInterrupted, exitTimeout}},
	{env: gdbStops, victim: "gdb", want: []int{exitFailure}},
	{env: gdbStops, victim: "gdb", stop: true, want: []int{exitInterrupted, exitTimeout, exitFailure}},
	{flags: nil, victim: "snapctl+gdb"},
	// snapctl's own stops: gdb, left idle once it set the run up, is
	// killed; the stops go on and Ctrl-C ends the run.
	{flags: nil, victim: "gdb", gdbGone: true, want: []int{exitInterrupted, exitTimeout}, matrixOnly: true},
	// The server runs on (fact 113), and snapctl sees gdbserver's death
	// wherever it waits for a stop, a kernel-counted hit's thread run on
	// alone included (stopLoop.waitStopped).
	{env: gdbStops, victim: "gdbserver", want: []int{exitFailure}},
	// The guardian's hold on gdbserver: the breakpoint's bytes are put
	// back before the kernel lets the threads go, so that the next
	// request does not run into it (without the hold the server dies of
	// SIGTRAP at the first request after gdbserver's death, snapctl
	// stopped). A trap gdbserver had not collected goes to snapctl's
	// handler in the process (fact 113).
	{env: gdbStops, victim: "gdbserver", want: []int{exitFailure}, idle: true},
	// gdbserver held for 2 s: gdb's stop waits for it, then the run
	// goes on or stalls after stop_timeout.
	{env: gdbStops, victim: "gdbserver", stop: true, want: []int{exitInterrupted, exitTimeout, exitFailure}, matrixOnly: true},
	// heaptrack's interpreter held for 2 s: the program's writes into
	// the FIFO wait as long, then it serves on.
	{flags: []string{"--sites"}, victim: "heaptrack_interpret", stop: true, want: []int{exitInterrupted, exitTimeout}, matrixOnly: true},
	// gdb tracing the process itself (--guard=false), the kernel
	// counting the hits: what gdbserver's death would leave, gdb's.
	{flags: []string{"--guard=false"}, victim: "snapctl", matrixOnly: true},
	{flags: []string{"--guard=false"}, env: gdbStops, victim: "gdb", want: []int{exitFailure}, matrixOnly: true},
	{flags: []string{"--guard=false"}, victim: "snapctl+gdb", matrixOnly: true},
	{flags: []string{"--guard=false"}, victim: "snapctl", stop: true, want: []int{exitInterrupted, exitTimeout}, matrixOnly: true},
	{flags: []string{"--guard=false"}, env: gdbStops, victim: "gdb", stop: true, want: []int{exitInterrupted, exitTimeout, exitFailure}, matrixOnly: true},
	// gdb counting every hit, each a stop (SNAPCTL_HITS=gdb), rather
	// than the kernel.
	{env: []string{"SNAPCTL_HITS=gdb"}, victim: "snapctl", matrixOnly: true},
	{env: []string{"SNAPCTL_HITS=gdb"}, victim: "gdbserver", want: []int{exitFailure}, matrixOnly: true},
	{flags: []string{"--guard=false"}, env: []string{"SNAPCTL_HITS=gdb"}, victim: "gdb", want: []int{exitFailure}, matrixOnly: true},
}

// runsOn reports whether the run goes on after case c's fault: a stopped
// process continued, heaptrack's interpreter gone.
func runsOn(c harmCase) bool { return c.stop || c.victim == "heaptrack_interpret" || c.gdbGone }

// harmCycles is how many times each case is run on one server: 1, or
// SNAPCTL_HARM_CYCLES (bench/harm.sh asks for 10).
func harmCycles() int {
	if n, err := strconv.Atoi(os.Getenv("SNAPCTL_HARM_CYCLES")); err == nil && n > 0 {
		return n
	}
	return 1
}

// TestHarmUnderLoad runs each case that must hold once, each on a server
// of its own: every case, every victim and every attach mode is judged on
// every promise in each CI run. Repetition, which finds the rarer
// windows of a fault, is bench/harm.sh's (ten cycles of each case on one
// server) and the matrix's (bench/faults.sh 'attach.*server', with
// SNAPCTL_HARM_CYCLES, which this test heeds too).
func TestHarmUnderLoad(t *testing.T) {
	// Each case holds its server, its run and its processes by the
	// test's own mark; a case whose run goes on after the fault ends it
	// with Ctrl-C once the server has answered requests since.
	t.Parallel()
	testenv.MustHave(t, "gdb", "gdbserver", "heaptrack")
	for _, c := range harmCases {
		if c.broken != "" || c.matrixOnly {
			continue
		}
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			for i, p := range harmRun(t, c, harmCycles()) {
				if !p.held {
					t.Errorf("promise %d, %s: %s", i, p.name, p.detail)
				}
			}
		})
	}
}

// harmRun runs case c cycles times on one server under load and returns
// the promises of every cycle, the first broken one of each kind first.
func harmRun(t *testing.T, c harmCase, cycles int) []promise {
	testenv.MustHave(t, "gdb", "heaptrack")
	if c.victim == "gdbserver" {
		testenv.MustHave(t, "gdbserver")
	}
	srvDir := t.TempDir()
	srv := startServerIn(t, srvDir)
	if keep := os.Getenv("SNAPCTL_HARM_CORES"); keep != "" {
		// bench/harm.sh's record of a server that died: its core
		// file and its binary, for gdb.
		defer func() {
			cores, _ := filepath.Glob(filepath.Join(srvDir, "core*"))
			for i, core := range cores {
				base := fmt.Sprintf("%s-%d-%d", strings.NewReplacer(" ", "_", "/", "_", ":", "", ",", "").Replace(c.name()), srv.Pid, i)
				if os.MkdirAll(keep, 0o755) == nil {
					exec.Command("cp", core, filepath.Join(keep, base+".core")).Run()
					exec.Command("cp", srv.Cmd.Path, filepath.Join(keep, base+".bin")).Run()
				}
			}
		}()
	}
	stop := make(chan struct{})
	if !c.idle {
		answered := srv.Load(stop)
		defer func() {
			close(stop)
			answered()
		}()
	}
	held := map[string]int{}
	var broken []promise
	ran := 0
	for cycle := 1; cycle <= cycles; cycle++ {
		ran = cycle
		for _, p := range harmCycle(t, srv, c, cycle) {
			if p.held {
				held[p.name]++
			} else {
				p.detail = fmt.Sprintf("cycle %d of %d: %s", cycle, cycles, p.detail)
				broken = append(broken, p)
			}
		}
		if srv.Gone() != "" {
			break
		}
	}
	ps := broken
	for name, n := range held {
		if !slices.ContainsFunc(broken, func(p promise) bool { return p.name == name }) {
			ps = append(ps, promise{name: name, held: true, detail: fmt.Sprintf("%d of %d", n, cycles)})
		}
	}
	whole := 0
	for cycle := 1; cycle <= ran; cycle++ {
		prefix := fmt.Sprintf("cycle %d of ", cycle)
		if !slices.ContainsFunc(broken, func(p promise) bool { return strings.HasPrefix(p.detail, prefix) }) {
			whole++
		}
	}
	detail := fmt.Sprintf("%d of %d cycles held", whole, ran)
	if ran < cycles {
		detail += fmt.Sprintf(" (the server died at cycle %d of %d)", ran, cycles)
	}
	return append(ps, promise{name: "cycles", held: true, detail: detail})
}

// harmCycle attaches to the server, lets it take stops, applies the fault
// and judges the server and what is left.
func harmCycle(t *testing.T, srv *testenv.Server, c harmCase, cycle int) []promise {
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n    every: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &running{t: t, out: filepath.Join(dir, "run"), dir: dir, start: time.Now()}
	ctx, cancel := testenv.Context(3 * time.Minute)
	r.cancel = cancel
	// A run that goes on after the fault is ended below, by Ctrl-C; the
	// timeout is a bound for the attach and its start-up too, which on
	// a loaded machine (load average 70 on 2 cores) took more than 40 s
	// under --sites.
	args := append(append([]string{"attach", "--quiet", "--timeout", "2m", "--out", r.out}, c.flags...), plan, strconv.Itoa(srv.Pid))
	keep := os.Getenv("SNAPCTL_HARM_CORES")
	if keep != "" {
		// bench/harm.sh's record of a cycle whose server died: the MI
		// transcript too, kept below.
		args = append([]string{args[0], "--trace"}, args[1:]...)
	}
	r.cmd = exec.CommandContext(ctx, snapctlBinary(t), args...)
	r.cmd.Dir = dir
	// snapctl's private directory lands here, its guardian's log with it.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	r.cmd.Env = append(append(os.Environ(), testenv.ScopeEnv(t), "TMPDIR="+tmp), c.env...)
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sites := slices.Contains(c.flags, "--sites")
	// Mid-run: traced, heaptrack writing into snapctl's FIFO, the
	// process resumed with its breakpoints in (gdb inserts them as it
	// resumes it, once its calls into the process are done): a
	// breakpoint instruction in the program's own code, where only the
	// plan's breakpoint goes (gdb's calls that inject heaptrack insert
	// gdb's own in the dynamic loader, for the time of each call).
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", srv.Pid))
	ready := func() bool {
		if srv.Gone() != "" || tracerPid(srv.Pid) == 0 {
			return false
		}
		if sites && !fifoMoved(srv.Pid) {
			return false
		}
		if c.victim == "gdbserver" && procComm(tracerPid(srv.Pid)) != "gdbserver" {
			return false
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/maps", srv.Pid)); err != nil || srv.Gone() != "" {
			return false // the loop below reports it
		}
		return slices.ContainsFunc(testenv.TextChanges(t, srv.Pid), func(c string) bool { return strings.HasPrefix(c, exe+"+") })
	}
	var setup []promise
	var fault time.Time // when the fault was applied
	for deadline := testenv.NewDeadline(2 * time.Minute); !ready(); time.Sleep(20 * time.Millisecond) {
		if deadline.Passed() || !proc.Alive(r.cmd.Process.Pid) || srv.Gone() != "" {
			setup = append(setup, promise{name: "setup", detail: "snapctl did not reach the server's run: " + r.stderr.String()})
			break
		}
	}
	var counting []promise
	if setup == nil && kernelCounting(c) {
		// The plan's hits are counted in the kernel (every: 5), under
		// --sites too: snapctl holds the probes' eBPF links.
		links := bpfLinksOf(r.cmd.Process.Pid)
		for deadline := testenv.NewDeadline(10 * time.Second); links == 0 && !deadline.Passed() && proc.Alive(r.cmd.Process.Pid); time.Sleep(20 * time.Millisecond) {
			links = bpfLinksOf(r.cmd.Process.Pid)
		}
		counting = append(counting, promise{name: "counted in the kernel", held: links > 0, detail: fmt.Sprintf("snapctl holds %d eBPF links at the fault", links)})
	}
	if setup == nil {
		time.Sleep(time.Duration(200+rand.Intn(600)) * time.Millisecond)
		victim := harmVictim(r.cmd.Process.Pid, srv.Pid, c.victim)
		fault = time.Now()
		if victim == 0 {
			setup = append(setup, promise{name: "setup", detail: "no " + c.victim + " to act on"})
		} else if c.victim == "snapctl+gdb" {
			gdb := harmVictim(r.cmd.Process.Pid, srv.Pid, "gdb")
			syscall.Kill(victim, syscall.SIGKILL)
			syscall.Kill(gdb, syscall.SIGKILL)
		} else if c.stop {
			syscall.Kill(victim, syscall.SIGSTOP)
			time.Sleep(2 * time.Second)
			syscall.Kill(victim, syscall.SIGCONT)
		} else if c.idle {
			// snapctl and gdb held meanwhile, so that only the
			// guardian can mend anything before the requests.
			gdb := harmVictim(r.cmd.Process.Pid, srv.Pid, "gdb")
			syscall.Kill(r.cmd.Process.Pid, syscall.SIGSTOP)
			syscall.Kill(gdb, syscall.SIGSTOP)
			syscall.Kill(victim, syscall.SIGKILL)
			time.Sleep(200 * time.Millisecond)
			for range 20 {
				srv.Ask("keep")
			}
			syscall.Kill(gdb, syscall.SIGCONT)
			syscall.Kill(r.cmd.Process.Pid, syscall.SIGCONT)
		} else {
			syscall.Kill(victim, syscall.SIGKILL)
		}
	}
	if setup == nil && runsOn(c) {
		// The run goes on after the fault: once 10 requests of ours have
		// been answered since (every request hits the breakpoint, every
		// fifth hit is a stop that snapctl measures while gdb holds the
		// thread), or snapctl has ended by itself, or 45 s after the
		// fault, Ctrl-C ends the run, rather than its --timeout.
		for answered := 0; answered < 10 && proc.Alive(r.cmd.Process.Pid) && time.Since(fault) < 45*time.Second; {
			if got, err := srv.Ask("after the fault"); err == nil && strings.HasPrefix(got, "ok ") {
				answered++
			}
		}
		r.cmd.Process.Signal(syscall.SIGINT)
	}
	res := finish(r)
	if keep != "" && srv.Gone() != "" {
		// What snapctl did as the server died: its run directory (run
		// log, run.json, the MI transcript), its stderr and its
		// private directory with the guardian's log.
		base := filepath.Join(keep, fmt.Sprintf("%s-%d-cycle%d", strings.NewReplacer(" ", "_", "/", "_", ":", "", ",", "").Replace(c.name()), srv.Pid, cycle))
		if os.MkdirAll(base, 0o755) == nil {
			exec.Command("cp", "-r", r.out, tmp, base).Run()
			os.WriteFile(filepath.Join(base, "stderr"), []byte(fmt.Sprintf("exit %d\n%s", res.Code, res.Stderr)), 0o644)
		}
	}
	var ps []promise
	if c.want != nil {
		ps = append(ps, promise{name: "exit code", held: slices.Contains(c.want, res.Code),
			detail: fmt.Sprintf("exit %d, want %v (%s)", res.Code, c.want, lastLine(res.Stderr))})
	}
	ps = append(ps, setup...)
	ps = append(ps, counting...)
	ps = append(ps, serverUnharmed(t, srv, sites)...)
	if keep := os.Getenv("SNAPCTL_HARM_GUARDIAN_LOGS"); keep != "" {
		// bench/harm.sh's measure of what the guardian mended.
		logs, _ := filepath.Glob(filepath.Join(tmp, "*", "guardian.log"))
		if f, err := os.OpenFile(keep, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			for _, l := range logs {
				data, _ := os.ReadFile(l)
				fmt.Fprintf(f, "== %s, cycle %d\n%s\n", c.name(), cycle, data)
			}
			f.Close()
		}
	}
	for i, p := range ps {
		if !p.held {
			logs, _ := filepath.Glob(filepath.Join(tmp, "*", "guardian.log"))
			for _, l := range logs {
				data, _ := os.ReadFile(l)
				ps[i].detail += "; guardian: " + strings.ReplaceAll(strings.TrimSpace(string(data)), "\n", " | ")
			}
			break
		}
	}
	return ps
}

// startServerIn starts the server fixture as testenv.StartServer does,
// in dir: a core file of a server that dies lands there.
func startServerIn(t *testing.T, dir string) *testenv.Server {
	t.Helper()
	bin := testenv.Build(t, nativeFixtures+"tcpserver.c")
	portFile := filepath.Join(dir, "port")
	cmd := exec.Command(bin, portFile, "4")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := testenv.NewDeadline(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(portFile); err == nil && strings.TrimSpace(string(data)) != "" {
			return &testenv.Server{Pid: cmd.Process.Pid, Port: strings.TrimSpace(string(data)), Cmd: cmd}
		}
		if deadline.Passed() {
			t.Fatal("the server did not start")
		}
	}
}

// kernelCounting reports whether case c's hits are counted in the
// kernel by the time of its fault: where the kernel allows it, unless
// SNAPCTL_HITS=gdb, and not while the server is idle (the probes go in
// at the breakpoint's first hit).
func kernelCounting(c harmCase) bool {
	return uprobes.Available() == nil && !slices.Contains(c.env, "SNAPCTL_HITS=gdb") && !c.idle
}

// harmVictim finds the process named victim of the run snapctl runs on the
// server.
func harmVictim(snapctl, server int, victim string) int {
	switch victim {
	case "snapctl", "snapctl+gdb":
		return snapctl
	case "gdbserver":
		return tracerPid(server)
	}
	comm := map[string]string{"gdb": "gdb", "heaptrack_interpret": "heaptrack_inter"}[victim]
	for _, kid := range childrenOf(snapctl) {
		if procComm(kid) == comm {
			return kid
		}
	}
	return 0
}

// serverUnharmed judges the server after a cycle: alive and serving,
// untraced, not stopped, with no signal pending, its code the files' and
// no SIGTRAP handler of snapctl's left,
// heaptrack's FIFO closed, and no process of the run left.
func serverUnharmed(t *testing.T, srv *testenv.Server, sites bool) []promise {
	alive := promise{name: "attached process"}
	var state, tracer string
	// A guardian whose snapctl was killed ends gdb (5 s at most) and has
	// gdbserver take the breakpoints out (20 s at most): on a loaded
	// machine 10 s were not always enough.
	for deadline := testenv.NewDeadline(40 * time.Second); !deadline.Passed(); time.Sleep(50 * time.Millisecond) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Pid))
		if err != nil || srv.Gone() != "" {
			break
		}
		state, tracer = statusField(string(st), "State"), statusField(string(st), "TracerPid")
		if tracer == "0" && (strings.HasPrefix(state, "S") || strings.HasPrefix(state, "R")) {
			alive.held = true
			break
		}
	}
	if g := srv.Gone(); g != "" {
		alive.held, alive.detail = false, g
		return []promise{alive}
	}
	if !alive.held {
		alive.detail = fmt.Sprintf("state %s, traced by %s", state, tracer)
		return []promise{alive}
	}
	ps := []promise{alive}
	// Serving, and heaptrack's library silent: 300 allocating requests.
	serve := promise{name: "serves", held: true}
	for i := range 300 {
		if got, err := srv.Ask("keep"); err != nil || !strings.HasPrefix(got, "ok ") {
			serve.held, serve.detail = false, fmt.Sprintf("request %d: %q %v (%s)", i, got, err, srv.Gone())
			break
		}
	}
	ps = append(ps, serve)
	pending := promise{name: "no signal pending", held: true}
	for _, tid := range append([]int{srv.Pid}, tasksOf(srv.Pid)...) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", srv.Pid, tid))
		for _, k := range []string{"SigPnd", "ShdPnd"} {
			if v := statusField(string(st), k); v != "" && strings.Trim(v, "0") != "" {
				pending.held, pending.detail = false, fmt.Sprintf("thread %d %s %s", tid, k, v)
			}
		}
	}
	ps = append(ps, pending)
	text := promise{name: "code as the files'", held: true}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		text.held, text.detail = false, strings.Join(ch, "; ")
	}
	ps = append(ps, text)
	// snapctl's SIGTRAP handler goes with snapctl, or with its guardian.
	trap := promise{name: "SIGTRAP as before", held: true}
	for deadline := testenv.NewDeadline(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if trap.detail = trapHandlerLeft(srv.Pid); trap.detail == "" || deadline.Passed() {
			break
		}
	}
	trap.held = trap.detail == ""
	ps = append(ps, trap)
	if sites {
		fifo := promise{name: "FIFO closed", held: true}
		for deadline := testenv.NewDeadline(10 * time.Second); holdsFIFO(srv.Pid); time.Sleep(50 * time.Millisecond) {
			if deadline.Passed() {
				fifo.held, fifo.detail = false, "the server still holds heaptrack's FIFO"
				break
			}
		}
		ps = append(ps, fifo)
	}
	left := promise{name: "no process left", held: true}
	mine := func(p testenv.Proc) bool { return p.PID != srv.Pid }
	var procs []testenv.Proc
	for deadline := testenv.NewDeadline(15 * time.Second); !deadline.Passed(); time.Sleep(100 * time.Millisecond) {
		if procs = testenv.Mine(t, mine); len(procs) == 0 {
			break
		}
	}
	if len(procs) > 0 {
		var names []string
		for _, p := range procs {
			names = append(names, fmt.Sprintf("%d %s (%s)", p.PID, firstWord(p.Cmdline), p.State))
			syscall.Kill(p.PID, syscall.SIGCONT)
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
		left.held, left.detail = false, strings.Join(names, ", ")
	}
	return append(ps, left)
}

// holdsFIFO reports whether process pid holds heaptrack's FIFO open.
func holdsFIFO(pid int) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if target, _ := os.Readlink(fd); strings.HasSuffix(target, "heaptrack.fifo") {
			return true
		}
	}
	return false
}

// fifoMoved reports whether process pid holds heaptrack's FIFO at the
// descriptor snapctl moves it to, out of the program's numbers: gdb's
// calls into the process that inject heaptrack are done.
func fifoMoved(pid int) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		n, _ := strconv.Atoi(filepath.Base(fd))
		if target, _ := os.Readlink(fd); strings.HasSuffix(target, "heaptrack.fifo") && n >= 64 {
			return true
		}
	}
	return false
}

func tracerPid(pid int) int {
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	n, _ := strconv.Atoi(statusField(string(st), "TracerPid"))
	return n
}

func statusField(status, key string) string {
	for _, l := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func procComm(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(data))
}

// childrenOf lists the children of process pid, whichever of its threads
// started them.
func childrenOf(pid int) []int {
	var kids []int
	for _, tid := range append([]int{pid}, tasksOf(pid)...) {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, tid))
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				kids = append(kids, n)
			}
		}
	}
	return kids
}

func tasksOf(pid int) []int {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var tids []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n != pid {
			tids = append(tids, n)
		}
	}
	return tids
}
