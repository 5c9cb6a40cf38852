package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
)

// earlyGDB is the session's gdb, started on the program when Run begins
// its checks, and which does two of them itself: it gives its
// version (-gdb-version, as `gdb --version` would) and says whether every
// breakpoint location resolves in the program. Each gdb costs about 0.1 s
// of CPU to start, and on two cores three at once (the session's, the
// checking one, gdb --version) held the run back by about as much. It only
// reads the program, so nothing is lost if a check fails and it goes. The
// session takes it over with the private directory that its environment
// marks (runMark).
type earlyGDB struct {
	priv    string
	release func()
	ready   chan struct{}
	c       *mi.Client
	err     error
	// version is the first line of gdb's version, "" when unknown.
	version string
	// resolved says that every location but the pending ones resolved
	// in the program, with its condition: the checking gdb is not needed.
	resolved bool
	// sourced says that gdb has read agent.py's definitions, which takes
	// Python: the session need not ask for either again.
	sourced bool
	// handed is set once the session owns priv and release; adopted once
	// it owns the client.
	handed, adopted bool
}

// startEarlyGDB starts gdb on binary in the background, with the
// environment and working directory the session would give it. It
// returns nil when the private directory cannot be made: the session then
// makes its own and says why.
func startEarlyGDB(ctx context.Context, gdbPath, binary string, plan *plan.Plan, opts *Options) *earlyGDB {
	priv, release, err := newPrivateDir()
	if err != nil {
		return nil
	}
	e := &earlyGDB{priv: priv, release: release, ready: make(chan struct{})}
	env := append(opts.childEnv(), runMark(priv))
	args := []string{binary}
	if plan.Backend == BackendNative {
		// This gdb starts the target; under massif valgrind does.
		env = append(env, plan.Target.Env...)
		args = append(slices.Clip(unmarkProgram), binary)
	}
	go func() {
		defer close(e.ready)
		sctx, cancel := context.WithTimeout(ctx, opts.CommandTimeout)
		defer cancel()
		e.c, e.err = mi.Start(sctx, mi.Options{Path: gdbPath, Args: args, Dir: plan.Target.Cwd, Env: env, Async: true,
			StartsProgram: plan.Backend == BackendNative})
		if e.err == nil {
			e.check(sctx, plan)
		}
	}()
	return e
}

// check asks gdb for its version and whether each location resolves, as
// agent.py's location_resolves says: through an internal breakpoint,
// which leaves the numbers of the session's breakpoints as they were.
// Anything unclear leaves resolved false, and the checking gdb decides.
// The version comes with reading the agent, from Python, when it can:
// -gdb-version's banner, some 700 bytes, costs gdb a write() per byte.
func (e *earlyGDB) check(ctx context.Context, plan *plan.Plan) {
	script := filepath.Join(e.priv, gdb.AgentScript)
	if err := os.WriteFile(script, []byte(gdb.AgentSource), 0o600); err == nil {
		load := gdb.AgentRead(script) + "print(gdb.execute('show version', to_string=True).splitlines()[0])\n"
		if r, err := e.c.Send(ctx, "-interpreter-exec", "console", mi.Quote(gdb.PythonTry(load))); err == nil && gdb.LoadFailure(r) == "" {
			e.sourced, e.version = true, gdb.LastLine(r.Console())
		}
	}
	if e.version == "" {
		if r, err := e.c.Send(ctx, "-gdb-version"); err == nil {
			e.version, _, _ = strings.Cut(strings.TrimSpace(r.Console()), "\n")
		}
	}
	if !e.sourced {
		return
	}
	var checks []string
	for i := range plan.Breakpoints {
		bp := &plan.Breakpoints[i]
		if bp.Pending {
			continue // resolved, or refused, once a library loads it
		}
		checks = append(checks, "location_resolves("+gdb.PyString(bp.GdbLocation())+", "+gdb.PyString(bp.GdbCondition())+")")
	}
	if len(checks) > 0 {
		r, err := e.c.Send(ctx, "-interpreter-exec", "console", mi.Quote("python print(all(["+strings.Join(checks, ", ")+"]))"))
		if err != nil || strings.TrimSpace(r.Console()) != "True" {
			return
		}
	}
	e.resolved = true
}

// gdbVersion is the first line of the early gdb's version, "" when it did
// not start.
func (e *earlyGDB) gdbVersion() string {
	if e == nil {
		return ""
	}
	<-e.ready
	return e.version
}

// locationsResolved reports whether the early gdb found every location.
func (e *earlyGDB) locationsResolved() bool {
	if e == nil {
		return false
	}
	<-e.ready
	return e.resolved
}

// client returns the early gdb for the session to use, nil when it did
// not start (the session then starts its own, which says why).
func (e *earlyGDB) client() *mi.Client {
	if e == nil {
		return nil
	}
	<-e.ready
	if e.err != nil {
		return nil
	}
	e.adopted = true
	return e.c
}

// agentSourced reports whether the early gdb has read agent.py.
func (e *earlyGDB) agentSourced() bool {
	if e == nil {
		return false
	}
	<-e.ready
	return e.sourced
}

// closeUnused ends the early gdb unless the session adopted it.
func (e *earlyGDB) closeUnused() {
	if e == nil {
		return
	}
	<-e.ready
	if e.c != nil && !e.adopted {
		e.c.Close()
		e.adopted = true
	}
}

// discard ends the early gdb and removes the private directory, unless
// the session took them over: Run's checks failed.
func (e *earlyGDB) discard() {
	if e == nil || e.handed {
		return
	}
	e.closeUnused()
	e.release()
	os.RemoveAll(e.priv)
}
