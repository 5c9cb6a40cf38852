package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// The agent is a Python script that snapctl loads into gdb (agent.py). A
// plan breakpoint with nothing to do but the snapshot, which is most of
// them, is the agent's: gdb takes the snapshot and the stacks itself and
// resumes the target without a *stopped record, and snapctl reads what it
// recorded from a file. A stop over MI costs a round trip, and gdb writes
// the stop and the breakpoint's new hit count one byte per write(): 1,500
// stops take 1.5 times as long as a gdb script that only takes the
// snapshots, against 1.0 to 1.2 with the agent (bench/stops.sh). Breakpoints with
// commands or around_call, and every breakpoint when gdb has no Python,
// stop over MI.

const (
	agentRecords = "agent.jsonl"
	// agentBusy is where the agent marks the stop it is in (see
	// agent.overdue).
	agentBusy = "agent-busy"
	agentBp   = "agent-breakpoint.json"
	// agentPoll is how often the loop reads the agent's records while
	// nothing else happens: the status line and the analysis keep up, and
	// snapshots do not pile up in the private directory.
	agentPoll = 100 * time.Millisecond
)

// agent is gdb's agent as the run sees it: agent.py's Agent in gdb, which
// takes the stops of the breakpoints it inserted, and the reading side of
// its records, whose stops it hands to the recorder in the order they
// were taken.
type agent struct {
	gdb  *gdb.Conn
	rec  *recorder
	priv string // the private directory, where its files are
	// failed says what a record of a failure means for the run: gdb's
	// agent failed, or the backend's measurement did (failure).
	failed func(st *bpState, rec *agentRecord) error
	// diskFull names a full file system as the cause of an error.
	diskFull func(error) error
	f        *os.File
	partial  []byte // a record not yet whole
	buf      []byte // the batch read, kept for the next
	// busy is the agent's busy file; mark is what it said at the last
	// look, a stop under way since at least since, or "" between stops.
	busy  *os.File
	mark  string
	since time.Time
}

// agentOwns reports whether the agent can take bp's stops: nothing in
// them resumes the target or needs the MI client.
func agentOwns(bp *plan.Breakpoint) bool {
	return !bp.AroundCall && len(bp.Commands) == 0
}

// startAgent loads the agent into gdb when gdb has Python and a plan
// breakpoint can use it. It leaves s.agent nil otherwise.
func (s *session) startAgent(ctx context.Context) error {
	if s.opts.NoAgent || !slices.ContainsFunc(s.rec.order, func(st *bpState) bool { return agentOwns(st.bp) }) {
		return nil
	}
	python, why, err := s.gdb.LoadAgent(ctx, s.priv.dir)
	switch {
	case err != nil:
		return err
	case !python:
		return nil
	case why != "":
		agentUnusable(s.opts.Warn, why)
		return nil
	}
	records := filepath.Join(s.priv.dir, agentRecords)
	if err := os.WriteFile(records, nil, 0o600); err != nil {
		return fmt.Errorf("creating the agent's records: %w", err)
	}
	busy := filepath.Join(s.priv.dir, agentBusy)
	if err := os.WriteFile(busy, nil, 0o600); err != nil {
		return fmt.Errorf("creating the agent's busy file: %w", err)
	}
	f, err := os.Open(records)
	if err != nil {
		return fmt.Errorf("opening the agent's records: %w", err)
	}
	bf, err := os.Open(busy)
	if err != nil {
		f.Close()
		return fmt.Errorf("opening the agent's busy file: %w", err)
	}
	r, err := s.gdb.Do(ctx, gdb.Console(gdb.PythonTry(agentNew(records, s.priv.dir, s.backend.AgentMeasure()))))
	if err != nil {
		f.Close()
		bf.Close()
		return fmt.Errorf("loading gdb's agent: %w", err)
	}
	if why := gdb.LoadFailure(r); why != "" {
		f.Close()
		bf.Close()
		agentUnusable(s.opts.Warn, why)
		return nil
	}
	s.useAgent(f, bf)
	s.m.GdbAgent = true
	return nil
}

// agentUnusable says why the agent does not run: a gdb whose Python is
// broken still drives the run over MI.
func agentUnusable(warn io.Writer, why string) {
	fmt.Fprintf(warn, "warning: gdb's Python cannot load snapctl's agent (%s); every stop goes over GDB/MI, which is slower\n", why)
}

// agentNew is the Python that creates the agent, snapctl_agent, from
// agent.py's definitions: it records into records, marks its stops in
// snapdir's busy file and takes its measurements into snapdir as
// measure, the backend's AgentMeasure, says.
func agentNew(records, snapdir, measure string) string {
	return "snapctl_agent = Agent(" + gdb.PyString(records) + ", " + gdb.PyString(snapdir) + ", " + gdb.PyString(filepath.Join(snapdir, agentBusy)) + ", " +
		measure + ")\n"
}

// CheckAgent reports whether the gdb at path can load snapctl's agent, for
// snapctl doctor: nil when it can, else what gdb or its Python said. gdb
// reads agent.py and every backend's part, as the runs do, and creates
// the agent with the default backend's measurement.
func CheckAgent(ctx context.Context, gdbPath string) error {
	parts := make(map[string][]gdb.Script)
	for _, b := range backends {
		if b.python != nil {
			parts[b.name] = b.python
		}
	}
	return checkAgent(ctx, gdbPath, parts)
}

// checkAgent is CheckAgent with the backends' parts, by bundle.
func checkAgent(ctx context.Context, gdbPath string, parts map[string][]gdb.Script) error {
	dir, err := os.MkdirTemp("", "snapctl-agent-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	read, err := gdb.WriteAgent(dir)
	if err != nil {
		return err
	}
	for _, bundle := range slices.Sorted(maps.Keys(parts)) {
		part, err := gdb.WriteScripts(dir, bundle, parts[bundle])
		if err != nil {
			return err
		}
		read += part
	}
	measure := backends[0].new(backend.Config{Plan: &plan.Plan{}}).AgentMeasure()
	const loaded = "snapctl: agent loaded"
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gdbPath, "--nx", "--batch",
		"-ex", gdb.PythonTry(read+agentNew(filepath.Join(dir, agentRecords), dir, measure)),
		"-ex", gdb.PythonLine("print('"+loaded+"')"))
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	switch _, why, failed := strings.Cut(text, gdb.AgentFailed); {
	case failed:
		// Python's words are the failure's line; the check's own
		// print follows it.
		why, _, _ = strings.Cut(why, "\n")
		return errors.New(strings.TrimSpace(why))
	case strings.Contains(text, loaded):
		return nil
	case text != "":
		// A gdb without Python says so: "Python scripting is not
		// supported in this copy of GDB."
		return errors.New(gdb.LastLine(text))
	case err != nil:
		return err
	}
	return errors.New("gdb printed nothing")
}

// agentSpec is one breakpoint as agent.py's Agent.insert reads it.
type agentSpec struct {
	Location  string `json:"location"`
	Condition string `json:"condition,omitempty"`
	Skip      int    `json:"skip,omitempty"`
	Every     int    `json:"every,omitempty"`
	MaxHits   int    `json:"max_hits,omitempty"`
	Threads   string `json:"threads"` // the plan's threads
	Depth     int    `json:"depth"`   // at most this many frames of backtrace
}

// insert has the agent insert st's breakpoint and records
// gdb's number for it. The breakpoint goes through a file, which spares
// quoting a location and a condition for MI and Python at once.
func (a *agent) insert(ctx context.Context, st *bpState) error {
	data, err := json.Marshal(agentSpec{Location: st.bp.GdbLocation(), Condition: st.bp.GdbCondition(),
		Skip: st.bp.Skip, Every: st.bp.Every, MaxHits: st.bp.HitLimit(), Threads: st.bp.Threads, Depth: gdb.BacktraceDepth})
	if err != nil {
		return err
	}
	path := filepath.Join(a.priv, agentBp)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing the agent's breakpoint: %w", err)
	}
	r, err := a.gdb.Do(ctx, gdb.Python("snapctl_agent.insert("+gdb.PyString(path)+")"))
	if err != nil {
		return insertError(st, err)
	}
	number := gdb.LastLine(r.Console())
	if _, err := strconv.Atoi(number); err != nil {
		return fmt.Errorf("gdb's agent answered %q to inserting breakpoint %q", r.Console(), st.bp.Name)
	}
	a.rec.inserted(st, number, true)
	return nil
}

// agentRecord is one line of the agent's records: a stop it handled, or a
// failure at a hit (then only Bp, Kind and Error are set). The fields are
// the contract of docs/design.md ("The agent's contract").
type agentRecord struct {
	Bp       string  `json:"bp"`
	Hit      int     `json:"hit"`
	Time     float64 `json:"time"`
	Snapshot string  `json:"snapshot"`
	// Done is set at the breakpoint's last hit (max_hits): the agent then
	// stops gdb, and snapctl deletes the breakpoint.
	Done bool `json:"done"`
	// Memory is the native backend's measurement, which comes in the
	// record instead of a file.
	Memory    json.RawMessage `json:"memory"`
	Thread    agentThread     `json:"thread"`
	Backtrace []agentFrame    `json:"backtrace"`
	Threads   []agentThread   `json:"threads"`
	// Frame is the stopped frame when the stop records no backtrace
	// (threads: none).
	Frame *agentFrame `json:"frame"`
	// Kind and Error describe a failure: "snapshot" (valgrind's words),
	// "condition" (gdb's, evaluating the condition) or "agent".
	Kind  string `json:"kind"`
	Error string `json:"error"`
}

type agentThread struct {
	ID       string      `json:"id"`
	TargetID string      `json:"target-id"`
	State    string      `json:"state"`
	Details  string      `json:"details"`
	Frame    *agentFrame `json:"frame"`
}

type agentFrame struct {
	Func     string `json:"func"`
	File     string `json:"file"`
	FullName string `json:"fullname"`
	Line     int    `json:"line"`
	Addr     string `json:"addr"`
	From     string `json:"from"`
}

// frame converts a frame as frameOf converts gdb's MI frames.
func (f agentFrame) frame() runjson.Frame {
	return gdb.NewFrame(runjson.Frame{Function: f.Func, File: f.File, Line: f.Line, FullName: f.FullName, Addr: f.Addr, From: f.From})
}

func (t agentThread) thread() runjson.Thread {
	out := runjson.Thread{ID: t.ID, TargetID: t.TargetID, State: t.State, Details: t.Details}
	if t.Frame != nil {
		f := t.Frame.frame()
		out.Frame = &f
	}
	return out
}

// read reads the records the agent wrote since the last call, keeps
// their snapshots and records their stops. Records are whole lines; a line
// still being written waits for the next call. It returns the error that a
// record describes, the first one, after keeping every stop before it.
//
// The records are read agentBatch bytes at a time, each batch's stops
// flushed before the next is read: the agent goes on taking stops while
// the loop is busy (writing run.json takes longer the more stops it
// lists), and the backlog must not be held in memory at once.
func (a *agent) read() error {
	var failed error
	for {
		// Into the buffer kept from the last batch, after the record
		// cut short at its end.
		need := len(a.partial) + agentBatch
		if cap(a.buf) < need {
			a.buf = make([]byte, 0, need)
		}
		data := append(a.buf[:0], a.partial...)
		n, err := io.ReadFull(a.f, data[len(data):need])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("reading the agent's records: %w", err)
		}
		more := n == agentBatch
		data = data[:len(data)+n]
		end := bytes.LastIndexByte(data, '\n') + 1
		a.partial = append(a.partial[:0], data[end:]...)
		for line := range bytes.Lines(data[:end]) {
			var rec agentRecord
			if err := json.Unmarshal(line, &rec); err != nil {
				// A line cut short by a full file system.
				return a.diskFull(fmt.Errorf("reading the agent's records: %w", err))
			}
			if err := a.stop(&rec); err != nil && failed == nil {
				failed = err
			}
		}
		if err := a.rec.flush(); err != nil {
			return a.diskFull(err)
		}
		if !more {
			return failed
		}
	}
}

// agentBatch is how much of the agent's records agent.read reads at once:
// 50 to 65 stops (a record of `run --sites` takes about 650 B). Their
// stops are held until the batch is flushed: a batch of 128 KiB, 200
// stops and more read back at once whenever the loop was behind, was
// snapctl's memory rising with that backlog (docs/facts.md, fact 130).
const agentBatch = 32 << 10

// stop records one of the agent's stops, as inspectAndSnapshot does
// for a stop over MI.
func (a *agent) stop(rec *agentRecord) error {
	st := a.rec.bps[rec.Bp]
	if st == nil {
		return fmt.Errorf("the agent recorded a stop at breakpoint %s, which is not the plan's", rec.Bp)
	}
	if rec.Kind != "" {
		return a.failed(st, rec)
	}
	if rec.Done != st.bp.Done(rec.Hit) {
		// The hit selection exists in both languages (docs/design.md,
		// "The agent's contract"): a disagreement is snapctl's bug.
		return fmt.Errorf("gdb's agent and snapctl disagree whether hit %d is breakpoint %q's last (agent: %v)", rec.Hit, st.bp.Name, rec.Done)
	}
	st.setHits(rec.Hit)
	stop := &runjson.Stop{Breakpoint: st.bp.Name, Hit: rec.Hit, Phase: runjson.PhaseHit}
	for _, f := range rec.Backtrace {
		stop.Backtrace = append(stop.Backtrace, f.frame())
	}
	if len(stop.Backtrace) > 0 {
		stop.Frame = stop.Backtrace[0]
	} else if rec.Frame != nil {
		stop.Frame = rec.Frame.frame()
	}
	for _, t := range rec.Threads {
		stop.Threads = append(stop.Threads, t.thread())
	}
	stop.Thread = rec.Thread.thread()
	sec, frac := math.Modf(rec.Time)
	return a.rec.number(stop, st, nil, backend.Measurement{Path: rec.Snapshot, Data: rec.Memory}, time.Unix(int64(sec), int64(frac*1e9)))
}

// agentStopped handles gdb's stop at one of the agent's breakpoints, whose
// records have been read: the agent stops the target after the hit that
// finishes the breakpoint, which is deleted here. (After a failed snapshot
// it stops it too, but reading that record ended the run.) Natively, it
// also stops it for a measurement that needs every thread stopped
// (agent.py's Agent.defers), which it takes now, at snapctl's command. The
// target goes on.
//
// The agent also stops the target when it could not write a record (a
// full file system): that ends the run, with the stops recorded so far.
func (s *stopLoop) agentStopped(ctx context.Context, st *bpState) error {
	r, err := s.gdb.Do(ctx, gdb.Python("snapctl_agent.stopped()"))
	if err != nil {
		return fmt.Errorf("measuring at breakpoint %q: %w", st.bp.Name, err)
	}
	if why := gdb.LoadFailure(r); why != "" {
		return diskFull(fmt.Errorf("gdb's agent at breakpoint %q: %s", st.bp.Name, why), s.priv, s.dir)
	}
	if err := s.agent.read(); err != nil {
		return err
	}
	if st.bp.Done(st.hits) {
		if _, err := s.gdb.Do(ctx, gdb.BreakDelete(st.number)); err != nil {
			return fmt.Errorf("deleting breakpoint %q: %w", st.bp.Name, err)
		}
		s.rec.deleted(st)
	}
	return s.cont(ctx)
}

// hits sets the hits of the agent's breakpoints from its counts, and
// whether each is still pending, as countHits does from gdb's for the
// others. Best effort.
func (a *agent) hits(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	r, err := a.gdb.Do(ctx, gdb.Python("snapctl_agent.hits()"))
	if err != nil {
		return
	}
	var hits map[string]struct {
		Times   int  `json:"times"`
		Pending bool `json:"pending"`
	}
	if err := json.Unmarshal([]byte(gdb.LastLine(r.Console())), &hits); err != nil {
		return
	}
	for _, st := range a.rec.order {
		h, ok := hits[st.number]
		if !ok || !st.agent {
			continue
		}
		// A location no library loaded during the run defined.
		st.sum.Unresolved = h.Pending
		if !st.sum.Deleted {
			st.setTimes(h.Times)
		}
	}
}

// close closes the records file, after copying it to trace, "" for none
// (the run directory's copy with --trace: the agent's stops are not in
// the MI transcript).
func (a *agent) close(trace string, warn io.Writer) {
	a.f.Close()
	a.busy.Close()
	if trace == "" {
		return
	}
	if data, err := os.ReadFile(filepath.Join(a.priv, agentRecords)); err == nil {
		if err := os.WriteFile(trace, data, 0o644); err != nil {
			fmt.Fprintf(warn, "warning: keeping the agent's records: %v\n", err)
		}
	}
}

// useAgent makes the agent whose records are read from records, with its
// busy file busy, the session's.
func (s *session) useAgent(records, busy *os.File) {
	s.agent = &agent{gdb: s.gdb, rec: s.rec, priv: s.priv.dir, failed: s.agentFailed, diskFull: func(err error) error { return diskFull(err, s.priv.dir, s.out.dir) }, f: records, busy: busy}
	s.rec.agentFirst = s.agent.read
	s.watch.agent = s.agent
}

// agentFailed is what a record of a failure at a hit of st means for the
// run: the backend's measurement failed, gdb could not evaluate the
// breakpoint's condition (an event; the run goes on), or gdb's agent
// failed.
func (s *session) agentFailed(st *bpState, rec *agentRecord) error {
	switch rec.Kind {
	case "snapshot":
		return &ToolError{Tool: s.backend.Tool(), Msg: fmt.Sprintf("snapshot at breakpoint %q failed", st.bp.Name), Tail: rec.Error}
	case "condition":
		s.rec.event(runjson.Event{Kind: runjson.EventConditionError,
			Message: fmt.Sprintf("breakpoint %q: gdb cannot evaluate its condition: %s", st.bp.Name, rec.Error)})
		return nil
	default:
		if gdb.LostTarget(rec.Error) {
			// valgrind or vgdb died under the agent's stop.
			return s.watch.targetLost(rec.Error)
		}
		return fmt.Errorf("gdb's agent failed at breakpoint %q: %s", st.bp.Name, rec.Error)
	}
}
