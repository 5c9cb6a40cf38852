package gdb

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
)

// Early is the run's gdb, started on the program when the run begins its
// checks, and which does two of them itself: it gives its version
// (-gdb-version, as `gdb --version` would) and says whether every
// breakpoint location resolves in the program. Each gdb costs about 0.1 s
// of CPU to start, and on two cores three at once (the run's, the checking
// one, gdb --version) held the run back by about as much. It only reads
// the program, so nothing is lost if a check fails and it goes. The run
// adopts it (Client) once its checks have passed.
type Early struct {
	dir   string // where it writes agent.py: the run's private directory
	ready chan struct{}
	c     *mi.Client
	err   error
	// version is the first line of gdb's version, "" when unknown.
	version string
	// resolved says that every location but the pending ones resolved
	// in the program, with its condition: the checking gdb is not needed.
	resolved bool
	// sourced says that gdb has read agent.py's definitions, which takes
	// Python: the run need not ask for either again.
	sourced bool
	// adopted is set once the run owns the client.
	adopted bool
}

// EarlyConfig is how the early gdb starts: as the run's gdb would.
type EarlyConfig struct {
	Path string   // gdb's executable
	Args []string // gdb's arguments: the program, after any options
	Cwd  string
	Env  []string
	// StartsProgram says that this gdb will start the program (the
	// native backend); under massif valgrind does.
	StartsProgram bool
	// DieWithParent: gdb dies with snapctl (mi.Options.DieWithParent).
	DieWithParent bool
	// Dir is the run's private directory, where gdb reads agent.py from.
	Dir     string
	Timeout time.Duration // for starting gdb and its checks
	// Breakpoints are the plan's, whose locations it checks.
	Breakpoints []plan.Breakpoint
}

// StartEarly starts gdb in the background as cfg says.
func StartEarly(ctx context.Context, cfg EarlyConfig) *Early {
	e := &Early{dir: cfg.Dir, ready: make(chan struct{})}
	go func() {
		defer close(e.ready)
		e.c, e.err = mi.Start(ctx, mi.Options{Path: cfg.Path, Args: cfg.Args, Dir: cfg.Cwd, Env: cfg.Env, Async: true,
			StartsProgram: cfg.StartsProgram, DieWithParent: cfg.DieWithParent, StartTimeout: cfg.Timeout})
		sctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
		if e.err == nil {
			e.check(sctx, cfg.Breakpoints)
		}
	}()
	return e
}

// check asks gdb for its version and whether each location resolves, as
// agent.py's location_resolves says: through an internal breakpoint,
// which leaves the numbers of the run's breakpoints as they were.
// Anything unclear leaves resolved false, and the checking gdb decides.
// The version comes with reading the agent, from Python, when it can:
// -gdb-version's banner, some 700 bytes, costs gdb a write() per byte.
func (e *Early) check(ctx context.Context, bps []plan.Breakpoint) {
	if read, err := WriteAgent(e.dir); err == nil {
		load := read + "print(gdb.execute('show version', to_string=True).splitlines()[0])\n"
		if r, err := Send(ctx, e.c, Console(PythonTry(load))); err == nil && LoadFailure(r) == "" {
			e.sourced, e.version = true, LastLine(r.Console())
		}
	}
	if e.version == "" {
		if r, err := Send(ctx, e.c, Version()); err == nil {
			e.version, _, _ = strings.Cut(strings.TrimSpace(r.Console()), "\n")
		}
	}
	if !e.sourced {
		return
	}
	var checks []string
	for i := range bps {
		bp := &bps[i]
		if bp.Pending {
			continue // resolved, or refused, once a library loads it
		}
		checks = append(checks, "location_resolves("+PyString(bp.GdbLocation())+", "+PyString(bp.GdbCondition())+")")
	}
	if len(checks) > 0 {
		r, err := Send(ctx, e.c, Python("print(all(["+strings.Join(checks, ", ")+"]))"))
		if err != nil || strings.TrimSpace(r.Console()) != "True" {
			return
		}
	}
	e.resolved = true
}

// Version is the first line of the early gdb's version, "" when it did
// not start.
func (e *Early) Version() string {
	if e == nil {
		return ""
	}
	<-e.ready
	return e.version
}

// LocationsResolved reports whether the early gdb found every location.
func (e *Early) LocationsResolved() bool {
	if e == nil {
		return false
	}
	<-e.ready
	return e.resolved
}

// Client returns the early gdb for the run to use, nil when it did
// not start (the run then starts its own, which says why).
func (e *Early) Client() *mi.Client {
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

// NoStart is the error of an early gdb that did not start in time on
// this machine (a *mi.StartTimeoutError), nil otherwise: a gdb started
// again would fare no better.
func (e *Early) NoStart() error {
	if e == nil {
		return nil
	}
	<-e.ready
	var st *mi.StartTimeoutError
	if errors.As(e.err, &st) {
		return e.err
	}
	return nil
}

// AgentSourced reports whether the early gdb has read agent.py.
func (e *Early) AgentSourced() bool {
	if e == nil {
		return false
	}
	<-e.ready
	return e.sourced
}

// CloseUnused ends the early gdb unless the run adopted it.
func (e *Early) CloseUnused() {
	if e == nil {
		return
	}
	<-e.ready
	if e.c != nil && !e.adopted {
		e.c.Close()
		e.adopted = true
	}
}
