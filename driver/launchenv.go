package driver

import (
	"context"
	"io"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
)

// launchEnv is what the backend's launcher gets from the session: the
// target's output goes to stdout and stderr.
func (s *session) launchEnv(stdout, stderr io.Writer) *backend.Env {
	env := &backend.Env{
		Private:  s.priv,
		Target:   backend.Target{Argv: s.argv, Cwd: s.cwd, Env: s.plan.Target.Env, Stdout: stdout, Stderr: stderr},
		Children: s.childEnv(),
		Tools:    backend.Tools{GDB: s.tools.gdb, Valgrind: s.tools.valgrind, Vgdb: s.tools.vgdb},
		Times:    backend.Times{Command: s.opts.CommandTimeout, Ready: s.opts.ReadyTimeout, Stop: s.stopTimeout(), Grace: s.opts.Grace},
		Run: backend.Run{
			GDB:   s.gdbFor,
			Agent: func(ctx context.Context) (bool, string, error) { return s.gdb.LoadAgent(ctx, s.priv) },
			Group: s.groups.Add,
			GDBGone: func(err error) error {
				if s.gdbDied(err) {
					return s.gdbGone()
				}
				return nil
			},
			Explain:           s.explain,
			DiskFull:          s.diskFull,
			LocationsResolved: s.early != nil && s.early.LocationsResolved(),
		},
	}
	if t := s.consoleTail(); t != nil {
		env.Console = backend.Console{Tail: t, Drain: func() { s.console.Drain(s.opts.Grace) }}
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
