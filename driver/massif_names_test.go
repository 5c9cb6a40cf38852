package driver

import (
	"github.com/snapctl/snapctl/driver/backend/massif"
	"github.com/snapctl/snapctl/driver/backend/sites"
)

// The massif backend's names the fake gdb and the run directory's checks
// use.
const (
	snapshotMonitor = massif.SnapshotMonitor
	snapshotExt     = massif.Ext
	xtreeReport     = massif.XtreeReport
)

var snapshotName = sites.SnapshotName

// valgrind's files in the run directory.
const (
	valgrindLog = "valgrind.log"
	massifOut   = "massif.out"
)
