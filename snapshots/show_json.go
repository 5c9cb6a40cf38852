package snapshots

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// The JSON document of `snapctl show --format json`, schema
// snapctl.show/v1. Fields may be added, never renamed:
//
//	{
//	  "schema": "snapctl.show/v1",
//	  "file": "massif.out.42",
//	  "snapshots": [
//	    {"index": 0, "time": 0, "heap_bytes": 0, "heap_extra_bytes": 0,
//	     "stacks_bytes": 0, "kind": "detailed",
//	     "tree": {"bytes": 1016, "function": "(heap allocation functions) ...",
//	              "children": [{"bytes": 1000, "address": "0x10916D",
//	                            "frame": {"function": "make_payload", "file": "leak.c", "line": 12},
//	                            "children": [...]},
//	                           {"bytes": 600, "below_places": 3}]}}
//	  ],
//	  "desc": "--threshold=0", "cmd": "./leak", "time_unit": "i"
//	}
//
// "event" names an xtmemory snapshot's event; "time_text" carries a
// fractional time as written. A line folded by --threshold, or massif's own
// below-threshold bucket, has "below_places" and no frame. The header comes
// last because heaptrack writes it after the snapshots.
type showJSONSnapshot struct {
	Index          int    `json:"index"`
	Time           int64  `json:"time"`
	TimeText       string `json:"time_text,omitempty"`
	HeapBytes      int64  `json:"heap_bytes"`
	HeapExtraBytes int64  `json:"heap_extra_bytes"`
	StacksBytes    int64  `json:"stacks_bytes"`
	Kind           string `json:"kind"`
	Event          string `json:"event,omitempty"`
	// The tree is written after these by writeNode.
}

type showJSON struct {
	w      *bufio.Writer
	opts   ShowOptions
	header func() *File
	begun  bool
	count  int
	err    error
}

func (j *showJSON) begin(h *File) {
	j.begun = true
	j.w.WriteString("{\n  \"schema\": " + strconv.Quote(ShowSchema) + ",\n")
	j.w.WriteString("  \"file\": " + jsonString(h.Name) + ",\n")
	j.w.WriteString("  \"snapshots\": [")
}

func (j *showJSON) snapshot(s *Snapshot) {
	if j.err != nil {
		return
	}
	if !j.begun {
		j.begin(j.header())
	}
	out := showJSONSnapshot{
		Index:          s.Index,
		Time:           s.Time,
		TimeText:       s.TimeText,
		HeapBytes:      s.HeapBytes,
		HeapExtraBytes: s.HeapExtraBytes,
		StacksBytes:    s.StacksBytes,
		Kind:           s.Kind.String(),
		Event:          s.Event,
	}
	data, err := json.MarshalIndent(out, "    ", "  ")
	if err != nil {
		j.err = err
		return
	}
	if j.count > 0 {
		j.w.WriteByte(',')
	}
	j.count++
	j.w.WriteString("\n    ")
	if s.Tree == nil {
		j.w.Write(data)
		return
	}
	// The tree is the last field: written by hand after the others, as
	// MarshalIndent would, but in time linear in its depth.
	j.w.Write(bytes.TrimSuffix(data, []byte("\n    }")))
	j.w.WriteString(",\n      \"tree\": ")
	j.writeNode(s.Tree, s.Tree.Bytes, true, 2)
	j.w.WriteString("\n    }")
}

// maxIndent is the deepest nesting that showJSON indents: a deeper node
// is indented as one at this level, so that a tree thousands of frames
// deep makes output proportional to its size, not to the square of its
// depth. JSON readers ignore the difference.
const maxIndent = 64

// indent is the line start of a field at nesting level lvl, as
// MarshalIndent(v, "    ", "  ") writes it.
func indent(lvl int) string {
	return "\n    " + strings.Repeat("  ", min(lvl, maxIndent))
}

// writeNode writes one tree node, its fields at nesting level lvl, and
// its children.
func (j *showJSON) writeNode(n *Node, total int64, root bool, lvl int) {
	w, in := j.w, indent(lvl)
	w.WriteString("{" + in + `"bytes": ` + strconv.FormatInt(n.Bytes, 10))
	switch {
	case root:
		if n.Frame.Function != "" {
			w.WriteString("," + in + `"function": ` + jsonString(n.Frame.Function))
		}
	case n.Below:
		if n.Places != 0 {
			w.WriteString("," + in + `"below_places": ` + strconv.Itoa(n.Places))
		}
	default:
		f := n.Frame
		if f.Addr != "" {
			w.WriteString("," + in + `"address": ` + jsonString(f.Addr))
		}
		fin := indent(lvl + 1)
		w.WriteString("," + in + `"frame": {` + fin + `"function": ` + jsonString(f.Function))
		if f.File != "" {
			w.WriteString("," + fin + `"file": ` + jsonString(f.File))
		}
		if f.Line != 0 {
			w.WriteString("," + fin + `"line": ` + strconv.Itoa(f.Line))
		}
		if f.Object != "" {
			w.WriteString("," + fin + `"object": ` + jsonString(f.Object))
		}
		if f.Offset != 0 {
			w.WriteString("," + fin + `"offset": ` + strconv.FormatUint(f.Offset, 10))
		}
		w.WriteString(in + "}")
	}
	kids, folded, places := foldChildren(n, total, j.opts.Threshold)
	if len(kids) > 0 || places > 0 {
		w.WriteString("," + in + `"children": [`)
		cin := indent(lvl + 1)
		for i, c := range kids {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(cin)
			j.writeNode(c, total, false, lvl+2)
		}
		if places > 0 {
			if len(kids) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(cin)
			j.writeNode(&Node{Bytes: folded, Below: true, Places: places}, total, false, lvl+2)
		}
		w.WriteString(in + "]")
	}
	w.WriteString(indent(lvl-1) + "}")
}

func (j *showJSON) end(h *File) {
	if !j.begun {
		j.begin(h)
	}
	j.w.WriteString("\n  ],\n")
	j.w.WriteString("  \"desc\": " + jsonString(h.Desc) + ",\n")
	j.w.WriteString("  \"cmd\": " + jsonString(h.Cmd) + ",\n")
	j.w.WriteString("  \"time_unit\": " + jsonString(h.TimeUnit) + "\n}\n")
}

func (j *showJSON) flush() error {
	if j.err != nil {
		return j.err
	}
	return j.w.Flush()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
