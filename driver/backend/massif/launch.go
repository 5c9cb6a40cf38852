package massif

import (
	"path/filepath"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/valgrind"
	"github.com/snapctl/snapctl/plan"
)

// massifOut is massif's own profile in the run directory.
const massifOut = "massif.out"

// Tools are the executables massif runs besides gdb: valgrind and vgdb.
var Tools = valgrind.Tools

// RunFiles are the files a massif run writes in the run directory
// besides run.json and the reports, as globs: valgrind's log, massif's
// own profile, the kept snapshots and the staged ones.
var RunFiles = []string{valgrind.Log, massifOut,
	filepath.Join(backend.SnapshotDir, "*.massif"), filepath.Join(backend.SnapshotDir, "*.massif.gz"), filepath.Join(backend.SnapshotDir, ".*"+snapshotExt)}

// NewLauncher returns the launcher of a massif run whose run directory is
// dir: valgrind's massif with its gdbserver (package valgrind).
func NewLauncher(p *plan.Plan, dir string) *valgrind.Launch {
	args := []string{
		// massif's own periodic profile, the heap over time that
		// ms_print and massif-visualizer show.
		"--massif-out-file=" + valgrind.Path(filepath.Join(dir, massifOut)),
	}
	// No --xtree-memory: `monitor xtmemory` builds its tree from the live
	// blocks whenever it is asked, and with allocs valgrind would only
	// write the whole run's tree once more at exit (docs/facts.md, fact
	// 35).
	return valgrind.NewLauncher(p, dir, valgrind.Options{Tool: Name, Args: append(args, toolArgs(p)...)})
}
