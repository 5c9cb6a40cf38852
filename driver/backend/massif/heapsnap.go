package massif

import "strings"

// The heap snapshot taken at every stop (docs/facts.md, facts 5, 6, 9, 18
// and 35). With the plan's valgrind.blocks (the default), `monitor
// xtmemory FILE.ms` writes the bytes (curB) and the live blocks (curBk)
// of every allocation stack into FILE in massif's format (the ".ms" in
// the name selects it). With blocks: false, `monitor detailed_snapshot
// FILE` writes the bytes tree alone, half as much, with massif's heap
// extra bytes. snapshots.ReadHeapTree reads either file. The MI path
// (inspectAndSnapshot) and gdb's agent (agent.py, given these strings
// when it loads) send the same command.
const (
	snapshotMonitor = "monitor xtmemory" // then an absolute path without spaces
	// bytesMonitor is the snapshot command under valgrind.blocks: false.
	bytesMonitor = "monitor detailed_snapshot"
	snapshotExt  = ".ms"
	// xtreeReport is the one line valgrind prints on success:
	// "==42== xtree memory report: FILE".
	xtreeReport = "xtree memory report: "
)

// SnapshotMonitor and Ext are the snapshot command and its file's
// extension, for tests that play gdb.
const (
	SnapshotMonitor = snapshotMonitor
	Ext             = snapshotExt
	XtreeReport     = xtreeReport
)

// snapshotFailure returns what valgrind said when a snapshot command
// failed, "" when it succeeded: anything but xtmemory's report line
// (detailed_snapshot prints nothing on success, fact 5) is an error
// (`error: cannot take snapshot before execution has started`, `command
// 'x' not recognised`), and the MI result is ^done either way.
func snapshotFailure(out string) string {
	var bad []string
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.Contains(line, xtreeReport) {
			bad = append(bad, line)
		}
	}
	return strings.Join(bad, "\n")
}
