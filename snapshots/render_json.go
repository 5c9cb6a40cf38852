package snapshots

import (
	"encoding/json"
	"errors"
	"io"
)

// DiffSchema names the document `snapctl diff --format json` prints.
const DiffSchema = "snapctl.diff/v1"

// DiffDocument is what `snapctl diff --format json` prints: the schema
// name and the Diff's fields (from, to, delta_bytes, sites, ...).
type DiffDocument struct {
	Schema string `json:"schema"`
	*Diff
}

// RenderDiffJSON writes d as a snapctl.diff/v1 document, indented, with
// C++ names kept readable (no \u003c escapes).
func RenderDiffJSON(w io.Writer, d *Diff) error {
	if d == nil {
		return errors.New("rendering diff: no diff")
	}
	return writeAnalysisJSON(w, DiffDocument{Schema: DiffSchema, Diff: d})
}

// RenderReportJSON writes the diffs and suspects of a run, as run.json
// holds them: {"diffs": [...], "suspects": [...]}.
func RenderReportJSON(w io.Writer, r *Report) error {
	if r == nil {
		r = &Report{}
	}
	doc := *r
	if doc.Diffs == nil {
		doc.Diffs = []*Diff{}
	}
	if doc.Suspects == nil {
		doc.Suspects = []Suspect{}
	}
	return writeAnalysisJSON(w, doc)
}

func writeAnalysisJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
