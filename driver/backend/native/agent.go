package native

import (
	_ "embed"

	"github.com/snapctl/snapctl/driver/gdb"
)

// Python is the native backend's part of gdb's agent (driver/gdb/agent.py),
// read into the agent's namespace after it, in this order (a file's names
// are defined before a later file's code runs as gdb reads it): calls into
// the stopped program (calls.py: gdb's and the ptrace engine's), glibc's
// arenas as snapctl finds them (arena.py), jemalloc's statistics,
// heaptrack's cut, the stop's measurement and the agent's hooks for
// native stops (measure.py), and hits counted once across gdb's step over
// a breakpoint (stepover.py). Each file has its unit tests beside it
// (agent/*_test.py, run by .ci/run).
var Python = []gdb.Script{
	{Name: "native-calls.py", Source: agentCalls},
	{Name: "native-arena.py", Source: agentArena},
	{Name: "native-jemalloc.py", Source: agentJemalloc},
	{Name: "native-heaptrack.py", Source: agentHeaptrack},
	{Name: "native-measure.py", Source: agentMeasure},
	{Name: "native-stepover.py", Source: agentStepover},
}

//go:embed agent/calls.py
var agentCalls string

//go:embed agent/arena.py
var agentArena string

//go:embed agent/jemalloc.py
var agentJemalloc string

//go:embed agent/heaptrack.py
var agentHeaptrack string

//go:embed agent/measure.py
var agentMeasure string

//go:embed agent/stepover.py
var agentStepover string
