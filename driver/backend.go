package driver

import (
	"context"
	"fmt"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/massif"
	"github.com/snapctl/snapctl/driver/backend/native"
)

// Backend names, for the plan's "backend" and --backend.
const (
	BackendMassif = massif.Name
	BackendNative = native.Name
)

// backends are the ways a run can measure memory, the default first: a
// backend's package (driver/backend/...) supplies what it measures and
// how it analyses and reports it, and here how it launches the target.
var backends = []struct {
	name   string
	new    func(backend.Config) backend.Backend
	launch func(p *backendPlan) launcher
}{
	{massif.Name, massif.New, newMassifLaunch},
	{native.Name, native.New, newNativeLaunch},
}

// backendPlan is what a launcher is made from.
type backendPlan struct {
	attach int // the process snapctl attach names, 0 when gdb starts it
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
	return 0, fmt.Errorf("unknown backend %q: expected %s or %s", name, BackendMassif, BackendNative)
}

// launcher is how a backend starts the target under gdb and watches it:
// still the session's, since it starts gdb, inserts guards and stops
// processes through the session's state.
type launcher interface {
	// launch starts the target and gdb and connects them. The target
	// stays stopped until start; the session inserts its breakpoints in
	// between (see setup).
	launch(ctx context.Context, s *session) error
	// start sets the target going once the breakpoints are in.
	start(ctx context.Context, s *session) error
	// beforeClose runs before gdb is closed at teardown: the native
	// backend detaches from a process it attached to.
	beforeClose(s *session)
	// local reports whether gdb runs the target as a process of its own
	// (ptrace, /proc), not through a remote stub (valgrind's gdbserver):
	// then gdb may report a hit twice around a signal, the target's
	// threads are in /proc, and scheduler-locking holds.
	local() bool
	// fate says how snapctl left a process it attached to when gdb
	// could not detach from it, "" otherwise.
	fate() string
}
