package driver

import (
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
	launch func(s *session) backend.Launcher
	// files are the files the backend writes in the run directory, as
	// globs, which a new run clears.
	files []string
}{
	{massif.Name, massif.New, func(s *session) backend.Launcher { return massif.NewLauncher(s.plan, s.dir) }, massif.RunFiles},
	{native.Name, native.New, func(s *session) backend.Launcher { return native.NewLauncher(s.plan, s.opts.AttachPID) }, nil},
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

// AttachError says why snapctl attach cannot attach to a process.
type AttachError = native.AttachError

// The kinds of AttachError.
const (
	AttachNoProcess    = native.AttachNoProcess
	AttachNotPermitted = native.AttachNotPermitted
	AttachTraced       = native.AttachTraced
)

// CheckAttach checks, before gdb starts, that snapctl may attach to
// process pid (see native.CheckAttach).
func CheckAttach(pid int) error { return native.CheckAttach(pid) }

// CheckAccess returns the executable of process pid, which gdb reads
// (see native.CheckAccess).
func CheckAccess(pid int) (string, error) { return native.CheckAccess(pid) }
