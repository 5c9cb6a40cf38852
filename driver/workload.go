package driver

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// endGrace is how long a target that snapctl ends (after its workload, or
// after end_run_after snapshots) has between SIGTERM and SIGKILL: a server
// usually shuts down cleanly on SIGTERM.
const endGrace = 5 * time.Second

// WorkloadError reports a plan workload that could not start or exited
// with a failure. The target's snapshots up to then are kept.
type WorkloadError struct {
	Argv []string
	Err  error
}

func (e *WorkloadError) Error() string {
	why := e.Err.Error()
	if st := child.StateOf(e.Err); st != nil {
		why = child.Describe(st)
	}
	return fmt.Sprintf("workload %q failed: %s", strings.Join(e.Argv, " "), why)
}

func (e *WorkloadError) Unwrap() error { return e.Err }

// ending is how the run ends the target on its own account: the plan's
// workload, whose end ends the run, and end_run_after. A target ended
// this way completes the run normally; a process snapctl attached to is
// left running, and the run ends.
type ending struct {
	plan *plan.Plan
	opts *Options
	// pid is the target's process id, 0 while unknown; target is the
	// manifest's record of the target, which says when snapctl's signal
	// ended it; event records an event.
	pid    func() int
	target *runjson.Target
	event  func(runjson.Event)
	// workload is the plan's workload; done receives its end and is nil
	// once that has been handled (or when there is none).
	workload *child.Process
	done     <-chan struct{}
	// why says why snapctl is ending the target (end), "" until it does;
	// kill sends the SIGKILL after the grace period; err is the run's
	// error once the target has ended (a failed workload).
	why  string
	kill *time.Timer
	err  error
	// start starts a workload that waits for the target's ports (see
	// wantsPorts), until startBy at the latest; nil when none waits.
	start   func()
	startBy time.Time
}

// portWait bounds how long a workload that names SNAPCTL_TARGET_PORTS
// waits for a target that snapctl started to listen: a server under
// valgrind can take many seconds to open its port.
const portWait = 30 * time.Second

// wantsPorts reports whether the workload's command line names
// SNAPCTL_TARGET_PORTS: such a workload drives a server through its
// ports, so it starts once the server listens (or portWait has passed),
// not as the server starts, when it has none yet.
func wantsPorts(argv []string) bool {
	for _, a := range argv {
		if strings.Contains(a, "SNAPCTL_TARGET_PORTS") {
			return true
		}
	}
	return false
}

// startWhenListening keeps start to run by the stop loop's poll once the
// target listens on a TCP port.
func (e *ending) startWhenListening(start func()) {
	e.start, e.startBy = start, time.Now().Add(portWait)
}

// poll starts the waiting workload once the target listens, portWait has
// passed, or the target is gone; the stop loop calls it as it polls.
func (e *ending) poll() {
	if e.start == nil {
		return
	}
	if pid := e.pid(); pid != 0 && len(listeningPorts(pid)) == 0 && time.Now().Before(e.startBy) {
		return
	}
	start := e.start
	e.start = nil
	start()
}

// startWorkload starts the plan's workload, once the target runs with its
// breakpoints in place, in the target's directory and environment plus
// SNAPCTL_TARGET_PID and SNAPCTL_TARGET_PORTS, in a process group of its
// own. Its end arrives on e.done.
func (e *ending) startWorkload(cwd string, env []string, groups *child.Group, stdout, stderr io.Writer) error {
	argv := e.plan.Workload
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = cwd
	pid := e.pid()
	cmd.Env = append(append(env, e.plan.Target.Env...), "SNAPCTL_TARGET_PID="+strconv.Itoa(pid), "SNAPCTL_TARGET_PORTS="+portList(listeningPorts(pid)))
	cmd.Stdout, cmd.Stderr = stdout, stderr
	proc, err := child.Start("workload", cmd, child.Options{DieWithParent: true, WaitDelay: 2 * time.Second})
	if err != nil {
		return &WorkloadError{Argv: argv, Err: err}
	}
	groups.Add(proc)
	e.workload, e.done = proc, proc.Done()
	return nil
}

// workloadEnded ends the target once the workload has ended: a workload
// that failed makes the run fail, with its error, once the target is gone.
// A workload that ends after snapctl began to end the target (end_run_after)
// was ended with it, by snapctl or by losing its server: how it exited is
// not a failure of the run.
func (e *ending) workloadEnded() {
	e.done = nil
	if e.why != "" {
		return
	}
	if err := e.workload.Wait(); err != nil {
		e.err = &WorkloadError{Argv: e.plan.Workload, Err: err}
		e.end("the workload failed")
		return
	}
	e.end("the workload finished")
}

// stop ends what is left of the ending when the run ends: the SIGKILL
// still to come, and a workload still running, SIGTERM to its group and
// SIGKILL after the grace period.
func (e *ending) stop() {
	if e.kill != nil {
		e.kill.Stop()
	}
	if e.workload == nil || e.done == nil {
		return
	}
	e.workload.Stop(e.opts.Grace, syscall.SIGTERM, syscall.SIGKILL)
	e.done = nil
}

// end ends the target on snapctl's own account (why says what
// happened): SIGTERM now, SIGKILL after endGrace. A target ended this way
// completes the run normally. A workload still running ends with the
// target: SIGTERM to its process group now, SIGKILL at teardown.
func (e *ending) end(why string) {
	if e.why != "" || e.pid() == 0 {
		return
	}
	also := ""
	if e.done != nil {
		e.workload.Signal(syscall.SIGTERM)
		also = "; snapctl ends the workload too (SIGTERM)"
	}
	if e.opts.AttachPID != 0 {
		// A process snapctl attached to is not snapctl's to end: the
		// run ends and gdb detaches (see attachedDone).
		e.why = why
		e.event(runjson.Event{Kind: runjson.EventRunEnded, Message: why + ": snapctl detaches from the process, which goes on running" + also})
		return
	}
	e.why = why
	e.event(runjson.Event{Kind: runjson.EventTargetEnded, Message: fmt.Sprintf("%s: snapctl ends the target with SIGTERM (SIGKILL after %v)%s", why, endGrace, also)})
	// Through a pidfd (Go's process handle): the SIGKILL endGrace later
	// cannot reach a process that took the target's number after gdb
	// reaped it (docs/facts.md, fact 158).
	target, err := os.FindProcess(e.pid())
	if err != nil {
		return
	}
	target.Signal(syscall.SIGTERM)
	e.kill = time.AfterFunc(endGrace, func() { target.Signal(syscall.SIGKILL) })
}

// bySnapctl reports whether the target's end was snapctl's doing: it
// was told to end, and it died of the signal it was sent. It records the
// signal as the target's.
func (e *ending) bySnapctl(sig string) bool {
	if e.why == "" || (sig != "SIGTERM" && sig != "SIGKILL") {
		return false
	}
	e.target.Signal = &sig
	return true
}

// listeningPorts returns the TCP ports (IPv4 and IPv6) process pid
// listens on, in order: the sockets of its descriptors (/proc/PID/fd)
// that its network namespace's tables (/proc/PID/net/tcp, tcp6) list in
// state LISTEN. A port a server has not opened yet is not there.
func listeningPorts(pid int) []int {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if ino, ok := strings.CutPrefix(link, "socket:["); ok && err == nil {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	seen := map[int]bool{}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			port, err := strconv.ParseUint(hexPort, 16, 16)
			if !ok || err != nil || seen[int(port)] {
				continue
			}
			seen[int(port)] = true
			ports = append(ports, int(port))
		}
	}
	sort.Ints(ports)
	return ports
}

// portList is ports as SNAPCTL_TARGET_PORTS holds them: separated by
// spaces, "" for none.
func portList(ports []int) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, " ")
}
