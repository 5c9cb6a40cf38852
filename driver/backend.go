package driver

import (
	"context"
	"fmt"
	"strings"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/runjson"
)

// backend is the seam between a session and the way it measures memory:
// how the target is started under gdb, which tool options that needs,
// what command takes a stop's measurement and how what it wrote is read
// into the stop. Massif (massif.go) is the first implementation and the
// default; native (native.go) runs the program under gdb alone and reads
// the kernel's and glibc's figures.
type backend interface {
	// name is the plan's and run.json's "backend".
	name() string
	// launch starts the target and gdb and connects them. The target
	// stays stopped until start; the session inserts its breakpoints in
	// between (see setup).
	launch(ctx context.Context, s *session) error
	// start sets the target going once the breakpoints are in.
	start(ctx context.Context, s *session) error
	// measureCommand is the gdb console command that takes a stop's
	// measurement into path, a file whose name ends in ext.
	measureCommand(path string) string
	ext() string
	// failure returns what the measurement command's answer says went
	// wrong, "" when it succeeded.
	failure(r *mi.Result) string
	// keep takes the measurement m, made at stop (numbered, with its
	// time), for the stop: massif stages its file in the run directory
	// and returns where (the taken stop's raw file, compressed and read
	// once the target runs again); native reads it at once and returns "".
	keep(s *session, m measurement, stop *runjson.Stop) (string, error)
	// agentMeasure is the measurement as agent.py's Agent takes it, a
	// Python dict literal.
	agentMeasure() string
	// record reads the measurement of a taken stop, fills the stop and
	// feeds the analysis.
	record(s *session, t *taken) error
	// beforeClose runs before gdb is closed at teardown: the native
	// backend detaches from a process it attached to.
	beforeClose(s *session)
}

// measurement is what a stop's measurement wrote: a file at path, or, for
// the native backend under the agent, the data itself.
type measurement struct {
	path string
	data []byte
}

// Backend names, for the plan's "backend" and --backend.
const (
	BackendMassif = "massif"
	BackendNative = "native"
)

// newBackend returns the backend named in a plan or on the command line.
func newBackend(name string) (backend, error) {
	switch name {
	case "", BackendMassif:
		return massifBackend{}, nil
	case BackendNative:
		return &nativeBackend{}, nil
	}
	return nil, fmt.Errorf("unknown backend %q: expected %s or %s", name, BackendMassif, BackendNative)
}

// pyDict returns a Python dict literal of string and bool values, in the
// order given.
func pyDict(kv ...any) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		v := "False"
		switch x := kv[i+1].(type) {
		case string:
			v = gdb.PyString(x)
		case bool:
			if x {
				v = "True"
			}
		}
		parts = append(parts, gdb.PyString(kv[i].(string))+": "+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
