package driver

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/massif"
	"github.com/snapctl/snapctl/driver/backend/memcheck"
	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/runjson"
)

// backends are the ways a run can measure memory, the default first: a
// backend's package (driver/backend/...) supplies what it measures and
// how it analyses and reports it, and here how it launches the target.
var backends = []struct {
	name   string
	new    func(backend.Config) backend.Backend
	launch func(s *session) backend.Launcher
	// files are the files the backend writes in the run directory, as
	// globs, which a new run clears.
	files []string
	// tools are the executables the backend runs besides gdb, which the
	// checks find (preflight); traits what it can do, which the run asks
	// before the backend exists (the backend's Traits).
	tools  []string
	traits backend.Traits
	// python is the backend's part of gdb's Python, which its launcher
	// has gdb read and snapctl doctor checks; nil when it has none.
	python []gdb.Script
}{
	{massif.Name, massif.New, func(s *session) backend.Launcher { return massif.NewLauncher(s.plan, s.out.dir) }, massif.RunFiles, massif.Tools, massif.Traits, nil},
	{memcheck.Name, memcheck.New, func(s *session) backend.Launcher { return memcheck.NewLauncher(s.plan, s.out.dir) }, memcheck.RunFiles, memcheck.Tools, memcheck.Traits, memcheck.Python},
	{native.Name, native.New, func(s *session) backend.Launcher {
		return native.NewLauncher(s.backend, s.opts.AttachPID, s.opts.Guard, s.opts.Heaptrack)
	}, nil, nil, native.Traits, native.Python},
}

// newBackend returns the index in backends of the backend named in a plan
// or on the command line.
func newBackend(name string) (int, error) {
	if name == "" {
		return 0, nil
	}
	for i, b := range backends {
		if b.name == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("unknown backend %q: expected %s", name, strings.Join(BackendNames(), ", "))
}

// BackendNames are the backends' names, the default first.
func BackendNames() []string {
	names := make([]string, len(backends))
	for i, b := range backends {
		names[i] = b.name
	}
	return names
}

// BackendTraits are what the backend named can do; ok is false for a
// name no backend has.
func BackendTraits(name string) (t backend.Traits, ok bool) {
	for _, b := range backends {
		if b.name == name || name == "" && b.name == backends[0].name {
			return b.traits, true
		}
	}
	return backend.Traits{}, false
}

// BackendWith is the name of the first backend of the list that has what
// has asks of its traits, "" when none has: the backend --sites and
// snapctl attach imply, and what the run's messages name.
func BackendWith(has func(backend.Traits) bool) string {
	for _, b := range backends {
		if has(b.traits) {
			return b.name
		}
	}
	return ""
}

// attachError says why snapctl attach cannot attach to a process.
type attachError = native.AttachError

// The kinds of attachError.
const (
	attachNoProcess    = native.AttachNoProcess
	attachNotPermitted = native.AttachNotPermitted
	attachTraced       = native.AttachTraced
	attachNoInject     = native.AttachNoInject
)

// checkAttach checks, before gdb starts, that snapctl may attach to
// process pid (see native.CheckAttach).
func checkAttach(pid int) error { return native.CheckAttach(pid) }

// checkInjectable refuses to inject heaptrack into process pid where that
// is known to crash it (see native.CheckInjectable).
func checkInjectable(pid int) error { return native.CheckInjectable(pid) }

// checkAccess returns the executable of process pid, which gdb reads
// (see native.CheckAccess).
func checkAccess(pid int) (string, error) { return native.CheckAccess(pid) }

// launchEnv is what the backend's launcher gets from the session: the
// target's output goes to stdout and stderr.
func (s *session) launchEnv(stdout, stderr io.Writer) *backend.Env {
	env := &backend.Env{
		Private:  s.priv.dir,
		Target:   backend.Target{Argv: s.prog.argv, Cwd: s.prog.cwd, Env: s.plan.Target.Env, Stdout: stdout, Stderr: stderr},
		Children: s.kids.childEnv(),
		Tools:    s.prog.tools,
		Times:    backend.Times{Command: s.opts.CommandTimeout, Ready: s.opts.ReadyTimeout, Stop: s.watch.limit, Grace: s.opts.Grace},
		Run: backend.Run{
			GDB:   s.gdbFor,
			Agent: func(ctx context.Context) (bool, string, error) { return s.gdb.LoadAgent(ctx, s.priv.dir) },
			Group: s.kids.group.Add,
			GDBGone: func(err error) error {
				if s.watch.gdbDied(err) {
					return s.watch.gdbGone()
				}
				return nil
			},
			Explain:           s.watch.explain,
			DiskFull:          func(err error) error { return diskFull(err, s.priv.dir, s.out.dir) },
			LocationsResolved: s.located || s.priv.early != nil && s.priv.early.LocationsResolved(),
			Event:             func(ev runjson.Event) { s.rec.event(ev) },
		},
	}
	if t := s.term.tail(); t != nil {
		env.Console = backend.Console{Tail: t, Drain: func() { s.term.console.Drain(s.opts.Grace) }}
	}
	return env
}

// gdbFor adopts the gdb started during Run's checks, or else starts one
// with args and env, and returns it.
func (s *session) gdbFor(ctx context.Context, args, env []string) (*gdb.Conn, error) {
	if !s.adoptEarlyGDB() {
		if err := s.startGDB(ctx, args, env); err != nil {
			return nil, err
		}
	}
	return s.gdb, nil
}
