package massif

import (
	"io"
	"os"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/snapshots"
)

const reportFile = "report.md"

// reporter is the backend as the driver's reports take it.
func reporter() backend.Backend { return New(backend.Config{Plan: &plan.Plan{}}) }

// WriteText and writeReport render a run's reports as the driver does.
func WriteText(w io.Writer, o *backend.Outcome, opts snapshots.RenderOptions) error {
	return reporter().Text(w, o, opts)
}

func writeReport(path string, o *backend.Outcome) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := reporter().Markdown(f, o); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
