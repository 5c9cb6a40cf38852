package driver

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// stopTimeout bounds the actions at one stop, on either path: the plan's
// stop_timeout.
func (s *session) stopTimeout() time.Duration {
	if s.plan.StopTimeout > 0 {
		return s.plan.StopTimeout
	}
	return plan.DefaultStopTimeout
}

// overdue reads the agent's busy file and reports the stop that has been
// under way for longer than limit, by the gdb number of its breakpoint
// and how long it has lasted. A stop is timed from the first look that
// found it, at most one poll after it began.
func (a *agent) overdue(now time.Time, limit time.Duration) (bp string, lasted time.Duration, ok bool) {
	buf := make([]byte, 64)
	n, _ := a.busy.ReadAt(buf, 0)
	mark := strings.TrimSpace(string(buf[:n]))
	if mark == "" || mark == "-" {
		a.mark = ""
		return "", 0, false
	}
	if mark != a.mark {
		a.mark, a.since = mark, now
		return "", 0, false
	}
	if lasted = now.Sub(a.since); lasted < limit {
		return "", 0, false
	}
	_, bp, _ = strings.Cut(mark, " ")
	return bp, lasted, true
}

// stallWatch follows what can hold a run up for good without a word
// from gdb: an agent stop that does not end, and gdb, vgdb or valgrind
// stopped by a signal.
type stallWatch struct {
	stopped map[string]time.Time // since when each tool has been seen stopped
}

// checkStalls ends the run when one of the agent's stops has lasted
// longer than the plan's stop_timeout, or gdb, vgdb or valgrind has been
// stopped (SIGSTOP, SIGTSTP) that long. gdb resumes the target after the
// agent's stops without a word to snapctl, and a stopped process says
// nothing either: without this the loop would wait forever.
func (s *session) checkStalls() error {
	now := time.Now()
	limit := s.stopTimeout()
	if s.agent != nil {
		if bp, lasted, ok := s.agent.overdue(now, limit); ok {
			name := "number " + bp
			if st := s.rec.bps[bp]; st != nil {
				name = strconv.Quote(st.bp.Name)
			}
			return s.stalled(fmt.Sprintf("the stop at breakpoint %s has not ended after %v (stop_timeout %v)",
				name, lasted.Round(100*time.Millisecond), limit))
		}
	}
	if s.gdb.Pid() == 0 {
		return nil // a scripted gdb, in tests
	}
	w := &s.watch
	if w.stopped == nil {
		w.stopped = make(map[string]time.Time)
	}
	watched := map[string]int{"gdb": s.gdb.Pid()}
	for _, p := range s.launcher.Processes(s.gdb.Pid()) {
		watched[p.Name] = p.Pid
	}
	for name, pid := range watched {
		if pid == 0 || readProcState(pid).state != 'T' {
			delete(w.stopped, name)
			continue
		}
		since, seen := w.stopped[name]
		if !seen {
			w.stopped[name] = now
			continue
		}
		if lasted := now.Sub(since); lasted >= limit {
			return s.stalled(fmt.Sprintf("the run has not moved for %v (stop_timeout %v)", lasted.Round(100*time.Millisecond), limit))
		}
	}
	return nil
}

// stalled records a stop-stalled event for what, which did not end in
// time, and returns the error that ends the run: it names the process
// that holds the stop up, and says what state each process of the
// backend's is in.
func (s *session) stalled(what string) error {
	d := s.diagnose()
	s.event(runjson.Event{Kind: runjson.EventStopStalled, Message: fmt.Sprintf("%s: %s %s (%s)", what, d.tool, d.why, d.states)})
	return &ToolError{Tool: d.tool, Msg: fmt.Sprintf("%s; %s; %s", d.why, what, d.states)}
}

// procState is what /proc says about a process: its state letter (R, S,
// D, T, t, Z...) and its parent's pid; ok is false once it is gone.
type procState struct {
	pid   int
	state byte
	ppid  int
	ok    bool
}

func readProcState(pid int) procState {
	ps := procState{pid: pid}
	if pid <= 0 {
		return ps
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ps
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return ps
	}
	fields := strings.Fields(string(data[i+2:]))
	if len(fields) < 2 {
		return ps
	}
	ps.state = fields[0][0]
	ps.ppid, _ = strconv.Atoi(fields[1])
	ps.ok = true
	return ps
}

// describe says in a word what state a process is in.
func (p procState) describe() string {
	switch {
	case !p.ok || p.state == 'X':
		return "gone"
	case p.state == 'Z':
		return "exited"
	case p.state == 'T':
		return "stopped"
	case p.state == 't':
		return "stopped by a tracer"
	case p.state == 'R':
		return "running"
	case p.state == 'D':
		return "in uninterruptible sleep"
	}
	return "waiting"
}

// diagnosis names the process that holds a stop up.
type diagnosis struct {
	tool   string // "gdb", "vgdb" or "valgrind"
	why    string // "is stopped (...)", "has exited", ...
	states string // the state of each of the three
	// stuck is set when the tool is stopped or gone: no interrupt gets
	// through it to the target.
	stuck bool
}

// diagnose names the process that holds a stop up and why, and lists the
// state of the processes the backend runs (launcher.Processes), then
// gdb's. A process that is stopped (SIGSTOP, SIGTSTP) or gone is the
// culprit, in that order; else the one gdb waits for the answers of
// when it is busy; else gdb, which runs the stop while the others wait.
func (s *session) diagnose() diagnosis {
	if s.gdb.Pid() == 0 {
		// A scripted gdb, in tests: no process to look at.
		return diagnosis{tool: "gdb", why: "did not answer in time", states: "gdb scripted"}
	}
	type proc struct {
		name string
		ps   procState
	}
	var procs []proc
	busy := proc{}
	for _, p := range s.launcher.Processes(s.gdb.Pid()) {
		procs = append(procs, proc{p.Name, readProcState(p.Pid)})
		if p.Answers {
			busy = procs[len(procs)-1]
		}
	}
	procs = append(procs, proc{"gdb", readProcState(s.gdb.Pid())})
	var list []string
	for _, p := range procs {
		d := p.ps.describe()
		if p.ps.ok {
			d = fmt.Sprintf("%s %d %s", p.name, p.ps.pid, d)
		} else {
			d = p.name + " " + d
		}
		list = append(list, d)
	}
	states := strings.Join(list, ", ")
	for _, p := range procs {
		switch {
		case !p.ps.ok || p.ps.state == 'Z' || p.ps.state == 'X':
			return diagnosis{tool: p.name, why: "has exited", states: states, stuck: true}
		case p.ps.state == 'T':
			return diagnosis{tool: p.name, why: "is stopped (it was sent SIGSTOP or SIGTSTP)", states: states, stuck: true}
		}
	}
	if busy.ps.state == 'R' || busy.ps.state == 'D' {
		return diagnosis{tool: busy.name, why: "does not answer gdb", states: states}
	}
	return diagnosis{tool: "gdb", why: "does not finish the stop", states: states}
}
