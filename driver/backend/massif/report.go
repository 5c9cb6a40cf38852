package massif

import (
	"io"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/snapshots"
)

// Text prints the terminal report: the verdict, how the run ended, the
// stops per breakpoint, then the sites' sections (sites.Text).
func (b *Backend) Text(w io.Writer, o *backend.Outcome, opts snapshots.RenderOptions) error {
	return sites.Text(w, o, opts)
}

// Markdown writes report.md (sites.Markdown).
func (b *Backend) Markdown(w io.Writer, o *backend.Outcome) error { return sites.Markdown(w, o) }

// HTML gives report.html its facts and notes (sites.HTML).
func (b *Backend) HTML(opts *snapshots.HTMLOptions, o *backend.Outcome) { sites.HTML(opts, o) }
