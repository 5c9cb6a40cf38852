package sites

import (
	"io"
	"os"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/snapshots"
)

// sink keeps the diffs an analysis spools, as run.json's spool would.
type sink struct{ diffs []snapshots.Diff }

func (s *sink) add(v any)             { s.diffs = append(s.diffs, *v.(*snapshots.Diff)) }
func (s *sink) len() int              { return len(s.diffs) }
func (s *sink) all() []snapshots.Diff { return s.diffs }

func newTestAnalysis(p *plan.Plan) (*analysis, *sink) {
	sk := &sink{}
	return newAnalysis(p, p.Valgrind.AllocFns, nil, sk.add), sk
}

const reportFile = "report.md"

// writeText and writeReport render a run's per-site sections as a
// backend does after its header.
func writeText(w io.Writer, o *backend.Outcome, opts snapshots.RenderOptions) error {
	return TextSections(w, o, opts)
}

func writeReport(path string, o *backend.Outcome) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := MarkdownSections(f, o); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
