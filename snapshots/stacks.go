package snapshots

import (
	"fmt"
	"strconv"
	"strings"
)

// StackTable numbers distinct stacks, so that a document holding many
// diffs (run.json) stores each stack once and refers to it by its index:
// a run of 50 diffs over 1,000 sites 20 frames deep repeats the same
// stacks in every diff. Frames are compared as they are written out
// (function, file, line, object, offset), not by address.
type StackTable struct {
	ids    map[string]int
	stacks [][]Frame
	key    strings.Builder
}

// NewStackTable returns an empty table.
func NewStackTable() *StackTable {
	return &StackTable{ids: make(map[string]int)}
}

// ID returns the index of stack in the table, adding it when it is new.
func (t *StackTable) ID(stack []Frame) int {
	t.key.Reset()
	for _, f := range stack {
		t.key.WriteString(f.Function)
		t.key.WriteByte(0)
		t.key.WriteString(f.File)
		t.key.WriteByte(0)
		t.key.WriteString(strconv.Itoa(f.Line))
		t.key.WriteByte(0)
		t.key.WriteString(f.Object)
		t.key.WriteByte(0)
		t.key.WriteString(strconv.FormatUint(f.Offset, 16))
		t.key.WriteByte(1)
	}
	key := t.key.String()
	if id, ok := t.ids[key]; ok {
		return id
	}
	id := len(t.stacks)
	t.ids[key] = id
	stored := make([]Frame, len(stack))
	for i, f := range stack {
		f.Addr = ""
		stored[i] = f
	}
	t.stacks = append(t.stacks, stored)
	return id
}

// Stacks returns every stack, indexed by ID. The caller must not modify
// them.
func (t *StackTable) Stacks() [][]Frame {
	if t.stacks == nil {
		return [][]Frame{}
	}
	return t.stacks
}

// Len is the number of distinct stacks.
func (t *StackTable) Len() int { return len(t.stacks) }

// InternSites returns sites with each Stack replaced by its StackID in t.
// sites itself is not modified: the reports still print the stacks.
func (t *StackTable) InternSites(sites []SiteDelta) []SiteDelta {
	out := make([]SiteDelta, len(sites))
	for i, s := range sites {
		id := t.ID(s.Stack)
		s.Stack, s.StackID = nil, &id
		out[i] = s
	}
	return out
}

// InternSuspects is InternSites for suspects.
func (t *StackTable) InternSuspects(suspects []Suspect) []Suspect {
	out := make([]Suspect, len(suspects))
	for i, s := range suspects {
		id := t.ID(s.Stack)
		s.Stack, s.StackID = nil, &id
		out[i] = s
	}
	return out
}

// ResolveStack returns the stack a StackID names in stacks, the table of a
// document read back (run.json "stacks"); id nil gives stack, the inline
// one.
func ResolveStack(stacks [][]Frame, id *int, stack []Frame) ([]Frame, error) {
	if id == nil {
		return stack, nil
	}
	if *id < 0 || *id >= len(stacks) {
		return nil, fmt.Errorf("stack_id %d: the table has %d stacks", *id, len(stacks))
	}
	return stacks[*id], nil
}
