package snapshots

import (
	"bufio"
	"encoding/json"
	"strconv"
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
	Index          int           `json:"index"`
	Time           int64         `json:"time"`
	TimeText       string        `json:"time_text,omitempty"`
	HeapBytes      int64         `json:"heap_bytes"`
	HeapExtraBytes int64         `json:"heap_extra_bytes"`
	StacksBytes    int64         `json:"stacks_bytes"`
	Kind           string        `json:"kind"`
	Event          string        `json:"event,omitempty"`
	Tree           *showJSONNode `json:"tree,omitempty"`
}

type showJSONNode struct {
	Bytes       int64           `json:"bytes"`
	Function    string          `json:"function,omitempty"` // the root's text only
	Address     string          `json:"address,omitempty"`
	Frame       *Frame          `json:"frame,omitempty"`
	BelowPlaces int             `json:"below_places,omitempty"`
	Children    []*showJSONNode `json:"children,omitempty"`
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
	if s.Tree != nil {
		out.Tree = j.node(s.Tree, s.Tree.Bytes, true)
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
	j.w.Write(data)
}

func (j *showJSON) node(n *Node, total int64, root bool) *showJSONNode {
	out := &showJSONNode{Bytes: n.Bytes}
	switch {
	case root:
		out.Function = n.Frame.Function
	case n.Below:
		out.BelowPlaces = n.Places
	default:
		f := n.Frame
		out.Address, f.Addr = f.Addr, ""
		out.Frame = &f
	}
	kids, folded, places := foldChildren(n, total, j.opts.Threshold)
	for _, c := range kids {
		out.Children = append(out.Children, j.node(c, total, false))
	}
	if places > 0 {
		out.Children = append(out.Children, &showJSONNode{Bytes: folded, BelowPlaces: places})
	}
	return out
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
