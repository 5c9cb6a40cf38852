package driver

import (
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/child"
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

// startWorkload starts the plan's workload, once the target runs with its
// breakpoints in place, in the target's directory and environment plus
// SNAPCTL_TARGET_PID, in a process group of its own. Its end arrives on
// s.workloadDone.
func (s *session) startWorkload(stdout, stderr io.Writer) error {
	argv := s.plan.Workload
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.cwd
	cmd.Env = append(append(s.childEnv(), s.plan.Target.Env...), "SNAPCTL_TARGET_PID="+strconv.Itoa(s.pid()))
	cmd.Stdout, cmd.Stderr = stdout, stderr
	proc, err := child.Start("workload", cmd, child.Options{DieWithParent: true, WaitDelay: 2 * time.Second})
	if err != nil {
		return &WorkloadError{Argv: argv, Err: err}
	}
	s.groups.Add(proc)
	s.workload, s.workloadDone = proc, proc.Done()
	return nil
}

// workloadEnded ends the target once the workload has ended: a workload
// that failed makes the run fail, with its error, once the target is gone.
// A workload that ends after snapctl began to end the target (end_run_after)
// was ended with it, by snapctl or by losing its server: how it exited is
// not a failure of the run.
func (s *session) workloadEnded() {
	s.workloadDone = nil
	if s.ending != "" {
		return
	}
	if err := s.workload.Wait(); err != nil {
		s.endErr = &WorkloadError{Argv: s.plan.Workload, Err: err}
		s.endTarget("the workload failed")
		return
	}
	s.endTarget("the workload finished")
}

// stopWorkload ends a workload still running when the run ends: SIGTERM to
// its group, SIGKILL after the grace period.
func (s *session) stopWorkload() {
	if s.workload == nil || s.workloadDone == nil {
		return
	}
	s.workload.Stop(s.opts.Grace, syscall.SIGTERM, syscall.SIGKILL)
	s.workloadDone = nil
}

// endTarget ends the target on snapctl's own account (why says what
// happened): SIGTERM now, SIGKILL after endGrace. A target ended this way
// completes the run normally. A workload still running ends with the
// target: SIGTERM to its process group now, SIGKILL at teardown.
func (s *session) endTarget(why string) {
	if s.ending != "" || s.pid() == 0 {
		return
	}
	also := ""
	if s.workloadDone != nil {
		s.workload.Signal(syscall.SIGTERM)
		also = "; snapctl ends the workload too (SIGTERM)"
	}
	if s.opts.AttachPID != 0 {
		// A process snapctl attached to is not snapctl's to end: the
		// run ends and gdb detaches (see attachedDone).
		s.ending = why
		s.event(runjson.Event{Kind: runjson.EventRunEnded, Message: why + ": snapctl detaches from the process, which goes on running" + also})
		return
	}
	s.ending = why
	s.event(runjson.Event{Kind: runjson.EventTargetEnded, Message: fmt.Sprintf("%s: snapctl ends the target with SIGTERM (SIGKILL after %v)%s", why, endGrace, also)})
	pid := s.pid()
	syscall.Kill(pid, syscall.SIGTERM)
	s.endKill = time.AfterFunc(endGrace, func() { syscall.Kill(pid, syscall.SIGKILL) })
}

// endedBySnapctl reports whether the target's end was snapctl's doing: it
// was told to end, and it died of the signal it was sent. It records the
// signal as the target's.
func (s *session) endedBySnapctl(sig string) bool {
	if s.ending == "" || (sig != "SIGTERM" && sig != "SIGKILL") {
		return false
	}
	s.m.Target.Signal = &sig
	return true
}

// killedAtEnd reports whether valgrind, gone under gdb's feet, died of a
// signal that endTarget sent (SIGKILL after the grace period); the run
// then ends as snapctl meant it to.
func (s *session) killedAtEnd() bool {
	if s.ending == "" || s.launcher.Ended() == nil {
		return false
	}
	if sig, killed := s.launcher.Signaled(s.opts.Grace); killed {
		return s.endedBySnapctl(child.SignalName(sig))
	}
	return false
}

// pid is the target's process id: valgrind's, which runs the program in
// its own process, or the one gdb started or attached to; 0 when unknown.
func (s *session) pid() int {
	return s.launcher.Pid()
}
