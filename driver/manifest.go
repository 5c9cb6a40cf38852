package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// manifestSpools are the spools run.json's lists are streamed from; nil
// for an empty list.
type manifestSpools struct {
	stops, events, diffs *spool
}

// close closes the views of the spools (spool.view).
func (sp manifestSpools) close() {
	sp.stops.closeView()
	sp.events.closeView()
	sp.diffs.closeView()
}

// writeManifest writes run.json atomically, with the stops, events and
// diffs streamed from their spools in between m's other fields. The bytes
// are those json.MarshalIndent would give for the whole manifest, without
// ever holding every stop.
func writeManifest(dir string, m *runjson.Manifest, sp manifestSpools) error {
	mm := *m
	mm.Stops, mm.Events, mm.Diffs = []runjson.Stop{}, []runjson.Event{}, []*snapshots.Diff{}
	if mm.Suspects == nil {
		mm.Suspects = []snapshots.Suspect{}
	}
	if mm.Stacks == nil {
		mm.Stacks = [][]snapshots.Frame{}
	}
	data, err := json.MarshalIndent(&mm, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding run.json: %w", err)
	}
	// The empty lists are the only top-level lines of this form: nested
	// keys are indented further and strings hold no raw newline.
	return writeFileAtomicFunc(filepath.Join(dir, manifestFile), func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 64<<10)
		rest := data
		for _, part := range []struct {
			key string
			sp  *spool
		}{{"stops", sp.stops}, {"events", sp.events}, {"diffs", sp.diffs}} {
			mark := []byte("\n  \"" + part.key + "\": [")
			i := bytes.Index(rest, append(mark, ']'))
			if i < 0 {
				return fmt.Errorf("encoding run.json: no %q list", part.key)
			}
			bw.Write(rest[:i+len(mark)])
			rest = rest[i+len(mark):]
			if err := streamList(bw, part.sp); err != nil {
				return fmt.Errorf("writing run.json %s: %w", part.key, err)
			}
		}
		bw.Write(rest)
		bw.WriteByte('\n')
		return bw.Flush()
	})
}

// streamList writes a spool's records as the elements of a top-level list
// of run.json, indented as json.MarshalIndent indents them.
func streamList(w *bufio.Writer, sp *spool) error {
	var buf bytes.Buffer
	first := true
	err := sp.each(func(line []byte) error {
		buf.Reset()
		if err := json.Indent(&buf, line, "    ", "  "); err != nil {
			return err
		}
		if first {
			w.WriteString("\n    ")
			first = false
		} else {
			w.WriteString(",\n    ")
		}
		_, err := w.Write(buf.Bytes())
		return err
	})
	if err != nil {
		return err
	}
	if !first {
		w.WriteString("\n  ")
	}
	return nil
}
