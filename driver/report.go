package driver

import (
	"fmt"
	"io"

	"github.com/snapctl/snapctl/snapshots"
)

// WriteText prints the run's text report: the stops and the growing sites.
func WriteText(w io.Writer, res *Result) error {
	m := res.Manifest
	fmt.Fprintf(w, "snapctl run: %s (%s)\n", m.Target.Argv[0], m.Status)
	for _, b := range m.Breakpoints {
		fmt.Fprintf(w, "  breakpoint %s (%s): %d hits, %d snapshots\n", b.Name, b.Location, b.Hits, b.Snapshots)
	}
	for _, st := range m.Stops {
		fmt.Fprintf(w, "  #%d %s hit %d %s: heap %s\n", st.Seq, st.Breakpoint, st.Hit, st.Phase, snapshots.FormatBytes(st.HeapBytes))
	}
	fmt.Fprintf(w, "run directory: %s\n", res.Dir)
	return nil
}
