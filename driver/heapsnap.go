package driver

import "strings"

// The heap snapshot taken at every stop (docs/design.md, facts 5, 6, 9 and
// 18).
// Valgrind runs massif with --xtree-memory=allocs, and at a stop
// `monitor xtmemory FILE.ms` writes the bytes (curB) and the live blocks
// (curBk) of every allocation stack into FILE in massif's format (the
// ".ms" in the name selects it); snapshots.ReadHeap reads the file. The
// MI path (inspectAndSnapshot) and gdb's agent (agent.py, given these
// strings when it loads) send the same command.
const (
	xtreeOption     = "--xtree-memory=allocs"
	snapshotMonitor = "monitor xtmemory" // then an absolute path without spaces
	snapshotExt     = ".ms"
	// xtreeReport is the one line valgrind prints on success:
	// "==42== xtree memory report: FILE".
	xtreeReport = "xtree memory report: "
)

// snapshotFailure returns what valgrind said when a snapshot command
// failed, "" when it succeeded: anything but the report line is an error
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
