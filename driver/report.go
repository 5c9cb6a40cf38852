package driver

import (
	"io"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// WriteText prints the run's report for the terminal, as its backend
// renders it (massif: the verdict, how the run ended, the stops per
// breakpoint, then the suspects and the diffs with the largest heap
// changes, and how many more diffs run.json holds).
func WriteText(w io.Writer, res *Result, opts snapshots.RenderOptions) error {
	return reporter(res.Manifest).Text(w, res.outcome(), opts)
}

// reporter returns the backend that renders the reports of a run.
func reporter(m *runjson.Manifest) backend.Reporter {
	i, err := newBackend(m.Backend)
	if err != nil {
		i = 0
	}
	return backends[i].new(backend.Config{Plan: &plan.Plan{}})
}

// outcome is the run as the backends' report sections take it.
func (r *Result) outcome() *backend.Outcome {
	return &backend.Outcome{Dir: r.Dir, Manifest: r.Manifest, Report: r.Report, Stops: r.Stops, Diffs: r.Diffs, MaxFrames: r.MaxFrames()}
}

// MaxFrames is the number of callers shown per stack in the run's reports:
// the plan's report.depth (0 shows whole stacks), or its default when the
// Result has no plan.
func (r *Result) MaxFrames() int {
	if r.Plan == nil {
		return plan.DefaultReportDepth
	}
	return r.Plan.Report.Depth
}

// writeReport writes report.md: a summary of the run, then the analysis,
// as the run's backend renders them. It is written through a temporary
// file and a rename, so that a report.md that exists is complete.
func writeReport(path string, res *Result) error {
	return writeFileAtomicFunc(path, func(w io.Writer) error {
		return reporter(res.Manifest).Markdown(w, res.outcome())
	})
}

func plural(n int, word string) string { return backend.Plural(n, word) }
