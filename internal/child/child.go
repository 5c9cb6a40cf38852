// Package child starts and ends the processes snapctl runs: valgrind with
// the target, gdb (with the vgdb it runs), the native target's gdb and the
// plan's workload. Each runs in a process group of its own, is waited for
// in the background, is ended by its group, and is described the same way
// however it went ("was killed by SIGKILL", "exited with status 1").
package child

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say how Start runs a child.
type Options struct {
	// DieWithParent has the kernel send the child SIGKILL when snapctl
	// dies: a snapctl killed with SIGKILL cannot end it. It survives exec,
	// not fork. The kernel sends it when the thread that forked the child
	// ends, not the process (prctl(2), PR_SET_PDEATHSIG), so such children
	// are forked from a thread that lives as long as snapctl (forker).
	DieWithParent bool
	// WaitDelay bounds how long the child's output is still copied once it
	// has exited: a grandchild may hold the pipe (see exec.Cmd.WaitDelay).
	WaitDelay time.Duration
}

// Process is a child that Start runs in a process group of its own.
type Process struct {
	// Name says which tool it is in messages: "gdb", "valgrind", ...
	Name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result, valid once done is closed
}

// Start starts cmd as the leader of a new process group and waits for it
// in the background.
func Start(name string, cmd *exec.Cmd, opts Options) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if opts.DieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if opts.WaitDelay > 0 {
		cmd.WaitDelay = opts.WaitDelay
	}
	start := cmd.Start
	if opts.DieWithParent {
		start = func() error { return forker.start(cmd) }
	}
	if err := start(); err != nil {
		return nil, err
	}
	p := &Process{Name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the child's process id, which is also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the child has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the child and returns Wait's error: nil for exit status
// 0, an *exec.ExitError for any other end.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// State is how the child ended; nil until it has.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// Signaled returns the signal that killed the child, if one did.
func (p *Process) Signaled() (syscall.Signal, bool) {
	return Signaled(p.State())
}

// Ended says how the child ended, as Describe does.
func (p *Process) Ended() string { return Describe(p.State()) }

// Signal sends sig to the child's process group: the child and whatever
// it started without a group of its own. Once the child has been reaped,
// it goes only to the members left in its group (SignalLeft), never by
// number.
func (p *Process) Signal(sig syscall.Signal) {
	if !p.Exited() {
		// Not reaped before Wait returned (or only just: the number is
		// given out again only after the kernel's cycle of process ids
		// comes round to it).
		syscall.Kill(-p.Pid(), sig)
		return
	}
	SignalLeft(p.Pid(), sig)
}

// SignalLeader sends sig to the child alone, and to nothing once it has
// been reaped.
func (p *Process) SignalLeader(sig syscall.Signal) { p.cmd.Process.Signal(sig) }

// SignalLeft sends sig to the processes left in the process group whose
// leader, pgid, has been reaped. The group's number stays taken while one
// of them lives; once none does, the kernel gives the number to a new
// process, and a program that leads a group of its own (every program gdb
// starts does) then carries it: kill(-pgid) long after the reap, as a run
// that ends minutes after its workload did, would kill that program. So
// the members are found in /proc, and none is signalled when a process
// with the leader's number exists: the number has been given again, and
// the group it named had nobody left.
func SignalLeft(pgid int, sig syscall.Signal) {
	for _, pid := range groupLeft(pgid) {
		syscall.Kill(pid, sig)
	}
}

// groupLeft lists the processes in process group pgid, whose leader has
// been reaped.
func groupLeft(pgid int) []int {
	if _, err := os.Stat("/proc/" + strconv.Itoa(pgid)); err == nil {
		return nil
	}
	want := strconv.Itoa(pgid)
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and
		// parentheses, the last ')' ends it.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(data[i+1:]))
		if len(fields) > 2 && fields[2] == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Kill sends SIGKILL to the child's process group.
func (p *Process) Kill() { p.Signal(syscall.SIGKILL) }

// Stop ends the child: each of sigs in turn goes to its process group (0
// only waits), and the next follows when the child has not exited within
// grace. After the last, Stop waits for the child, then kills what is
// left in its group.
func (p *Process) Stop(grace time.Duration, sigs ...syscall.Signal) {
	defer p.Kill()
	for _, sig := range sigs {
		if sig != 0 {
			p.Signal(sig)
		}
		select {
		case <-p.done:
			return
		case <-time.After(grace):
		}
	}
	<-p.done
}

// Group records children so that all can be killed at once, from any
// goroutine (the second Ctrl-C).
type Group struct {
	mu    sync.Mutex
	procs []*Process
}

// Add records p.
func (g *Group) Add(p *Process) {
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
}

// Kill sends SIGKILL to every child's process group.
func (g *Group) Kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		p.Kill()
	}
}

// Describe says how a process ended: "was killed by SIGKILL", "exited with
// status 1"; "ended" when nothing is known.
func Describe(st *os.ProcessState) string {
	if st == nil {
		return "ended"
	}
	if sig, ok := Signaled(st); ok {
		return "was killed by " + SignalName(sig)
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}

// Signaled returns the signal that ended a process, if one did.
func Signaled(st *os.ProcessState) (syscall.Signal, bool) {
	if st == nil {
		return 0, false
	}
	ws, ok := st.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}

// StateOf returns the state in a Wait error, nil when there is none.
func StateOf(err error) *os.ProcessState {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState
	}
	return nil
}

// signalNames are the names of the signals a child is likely to die of.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGSYS: "SIGSYS", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

// SignalName is a signal's name, "SIGSEGV", or "signal N" for one without.
func SignalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// forker forks the children that die with snapctl. Go ends an OS thread
// whose goroutine exits while locked to it, as the goroutines that ptrace
// a process do (native's rescue and trap removal, the guardian's hold),
// and a child forked earlier from that thread, by whatever goroutine ran
// there then, would be sent its parent-death signal at that moment: a
// valgrind killed at its start, a workload killed mid-run
// (docs/facts.md, fact 122). The forker's goroutine stays locked to
// its thread and never exits, so that thread ends only with snapctl.
var forker = startForker()

type forkRequest struct {
	cmd  *exec.Cmd
	done chan error
}

type forkThread struct{ requests chan forkRequest }

func startForker() *forkThread {
	f := &forkThread{requests: make(chan forkRequest)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as snapctl
		for r := range f.requests {
			r.done <- r.cmd.Start()
		}
	}()
	return f
}

// start starts cmd from the forker's thread.
func (f *forkThread) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	f.requests <- forkRequest{cmd, done}
	return <-done
}
