package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/runjson"
)

// The session's gdb: starting it, setting it up for the stop loop,
// inserting the plan's breakpoints and reading their hit counts.

// startGDB starts gdb with args (the binary), in MI mode with async
// execution, with environment env.
func (s *session) startGDB(ctx context.Context, args, env []string) error {
	var trace io.Writer
	var traceOut *os.File
	if s.opts.Trace {
		f, err := os.Create(filepath.Join(s.out.dir, traceFile))
		if err != nil {
			return fmt.Errorf("creating the MI transcript: %w", err)
		}
		traceOut, trace = f, f
	}
	starts := s.backend.Traits().GDBStarts && s.opts.AttachPID == 0
	if starts {
		args = append(slices.Clip(unmarkProgram), args...)
	}
	c, err := mi.Start(ctx, mi.Options{
		Path:         s.prog.tools["gdb"],
		Args:         args,
		Dir:          s.prog.cwd,
		Env:          env,
		Trace:        trace,
		Async:        true,
		StartTimeout: s.opts.CommandTimeout,
		// The backend's gdb runs the program, unless it attaches.
		StartsProgram: starts,
		// Under valgrind's tools gdb dies with snapctl, as valgrind
		// does.
		DieWithParent: !s.backend.Traits().GDBStarts && s.opts.AttachPID == 0,
	})
	if err != nil {
		if traceOut != nil {
			traceOut.Close()
		}
		return &ToolError{Tool: "gdb", Msg: "cannot start", Err: err}
	}
	s.useGDB(c, traceOut)
	return nil
}

// useGDB makes c the session's gdb; traceOut, if any, is its transcript,
// closed with it.
func (s *session) useGDB(c *mi.Client, traceOut *os.File) {
	var trace io.Closer
	if traceOut != nil {
		trace = traceOut
	}
	s.gdb = gdb.Open(c, trace, s.opts.CommandTimeout, s.rec.note)
	s.watch.gdb = s.gdb
	if p := c.Process(); p != nil {
		s.kids.group.Add(p)
	}
}

// adoptEarlyGDB makes the early gdb the session's when it started, and
// reports whether it did.
func (s *session) adoptEarlyGDB() bool {
	if s.priv.early == nil {
		return false
	}
	c := s.priv.early.Client()
	if c == nil {
		return false
	}
	s.useGDB(c, nil)
	if s.priv.early.AgentSourced() {
		s.gdb.AgentLoaded()
	}
	return true
}

// targetEnded reports whether the target has ended, as the stop loop
// recorded it in m: it exited or a signal killed it. Teardown is told once,
// when the loop is over.
func targetEnded(m *runjson.Manifest) bool {
	return m.Target.ExitCode != nil || m.Target.Signal != nil
}

// setup runs the session's gdb settings and the plan's gdb init
// commands, loads gdb's agent and inserts the breakpoints in the target
// the backend launched.
func (s *session) setup(ctx context.Context) error {
	// gdb reads every argument of the stopped frame from the target to
	// print it with each stop, and snapctl does not use them; breakpoint
	// commands such as bt and frame do. The mode is set once for the
	// session (see frameArguments); the plan's init commands may override
	// it.
	if _, err := s.gdb.Do(ctx, gdb.Set("print", "frame-arguments", gdb.FrameArguments(s.plan))); err != nil {
		return fmt.Errorf("setting up gdb: %w", err)
	}
	// Unwinding a stack reads it a line of gdb's target memory cache at a
	// time, one round trip through vgdb each: 64-byte lines (the default)
	// take 13 reads for a 24-frame stack. But gdb also makes one read()
	// system call per byte it receives from vgdb, and a line travels as
	// two hex digits per byte: 1 KiB lines cost more than the round trips
	// they save for the few frames of a typical stop (bench/stops.sh:
	// 0.26 ms a stop). 256-byte lines balance the two for backtraces. A
	// stop that reads none still reads one line of stack, for the stopped
	// frame, and there gdb's 64 bytes are the cheapest. A line never spans
	// two pages, so it is readable whenever its first byte is.
	if gdb.ReadsBacktraces(s.plan) {
		if _, err := s.gdb.Do(ctx, gdb.Set("dcache", "line-size", "256")); err != nil {
			return fmt.Errorf("setting up gdb: %w", err)
		}
	}
	for _, line := range s.plan.Gdb.Init {
		if _, err := s.gdb.Do(ctx, gdb.Console(line)); err != nil {
			return fmt.Errorf("gdb init command %q: %w", line, err)
		}
	}
	if err := s.startAgent(ctx); err != nil {
		return err
	}
	counter := s.counter()
	for _, st := range s.rec.order {
		st.sum.Counted = countedGDB
		if counter != nil {
			if why := counter.Counting(st.bp); why == "" {
				st.counting = true
			} else {
				st.sum.CountedWhy = why
			}
		}
		if s.agent != nil && agentOwns(st.bp) && !st.counting {
			if err := s.agent.insert(ctx, st); err != nil {
				return s.insertFailed(err)
			}
			continue
		}
		args := gdb.InsertArgs(st.bp, true)
		if st.counting {
			// The first hit stops, skipped or not: the counting
			// passes to the launcher there (takeOver).
			b := *st.bp
			b.Skip = 0
			args = gdb.InsertArgs(&b, true)
		}
		r, err := s.gdb.Do(ctx, gdb.BreakInsert(args...))
		if err != nil {
			return s.insertFailed(insertError(st, err))
		}
		st.number = r.String("bkpt.number")
		st.sum.Number = st.number
		st.resolved = !gdb.PendingResult(r)
		st.resolvedAtStart = st.resolved
		s.rec.bps[st.number] = st
		if st.counting && !st.resolved {
			// gdb 13 disables a pending breakpoint that has a
			// condition when its library loads; the condition
			// comes if the counting stays gdb's (takeOver).
			continue
		}
		if err := s.newHitsOnly(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// finalHits reads from gdb how often each breakpoint was hit, however the
// run ended: with every > 1 gdb's ignore count swallows the hits after
// the last snapshot, and a run ended by Ctrl-C or --timeout was hit after
// its last snapshot too. gdb is asked even when the run's context has
// ended, with a deadline of its own.
func (s *session) finalHits(ctx context.Context) {
	defer s.kernelHits()
	if s.gdb == nil {
		return
	}
	select {
	case <-s.gdb.Done():
		return
	default:
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// The agent counts its own breakpoints: -break-list's table, which
	// gdb writes a byte at a time, is for the others.
	if s.agent == nil || slices.ContainsFunc(s.rec.order, func(st *bpState) bool { return !st.agent }) {
		s.countHits(hctx)
	}
	if s.agent != nil {
		s.agent.hits(hctx)
	}
}

// countHits sets each breakpoint's hits to the number of times the target
// reached it with its condition true, as gdb counted them: with every > 1,
// gdb's ignore count swallows the hits after the last snapshot, which the
// stop loop never sees. A breakpoint deleted after max_hits keeps the
// loop's count. Best effort: on failure the loop's counts stand.
func (s *session) countHits(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	r, err := s.gdb.Do(ctx, gdb.BreakList())
	if err != nil {
		return
	}
	for _, v := range r.List("BreakpointTable.body") {
		st := s.rec.bps[v.String("number")]
		if st == nil {
			continue
		}
		// A location no library loaded during the run defined.
		st.sum.Unresolved = v.String("addr") == "<PENDING>"
		if st.agent || st.kernel {
			continue
		}
		times, err := strconv.Atoi(v.String("times"))
		if err != nil {
			continue
		}
		// gdb counts the hits under the plan's skip too.
		st.setTimes(times)
	}
}

// counter is the launcher's way to count hits without gdb, nil when it
// has none.
func (s *session) counter() backend.Counter {
	c, _ := s.launcher.(backend.Counter)
	return c
}

// insertFailed is err, the failure to insert a breakpoint, unless the
// launcher's process died meanwhile: valgrind killed as gdb inserts fails
// the insert with gdb's "Error while executing Python code." (the
// agent's) or its like, which is no fault of the plan's.
func (s *session) insertFailed(err error) error {
	if killed := s.launcher.Killed(); killed != nil {
		return killed
	}
	return err
}

// insertError is the error of inserting st's breakpoint into the running
// target: gdb's refusal is the plan's (exit 3, at the location's line);
// anything else, such as gdb dying meanwhile, is not.
func insertError(st *bpState, err error) error {
	var me *mi.Error
	if errors.As(err, &me) {
		return st.bp.LocationError("gdb cannot insert %q in the running target: %s", st.bp.Location, me.Msg)
	}
	return fmt.Errorf("inserting breakpoint %q: %w", st.bp.Name, err)
}
