package snapshots

import (
	"fmt"
	"io"

	"github.com/google/pprof/profile"
)

// xtEvents maps xtmemory events to pprof sample types. Go's heap profiles
// use the same names, so pprof's -sample_index and -inuse_space/-alloc_space
// switches work on snapctl's profiles.
var xtEvents = []struct {
	event string
	typ   profile.ValueType
}{
	{"totBk", profile.ValueType{Type: "alloc_objects", Unit: "count"}},
	{"totB", profile.ValueType{Type: "alloc_space", Unit: "bytes"}},
	{"curBk", profile.ValueType{Type: "inuse_objects", Unit: "count"}},
	{"curB", profile.ValueType{Type: "inuse_space", Unit: "bytes"}},
	{"totFdBk", profile.ValueType{Type: "freed_objects", Unit: "count"}},
	{"totFdB", profile.ValueType{Type: "freed_space", Unit: "bytes"}},
}

// Profile converts one snapshot into a pprof profile with the sample type
// inuse_space in bytes: one sample per stack that holds bytes of its own,
// leaf first (the allocation site first, then its callers). Below-threshold
// buckets become a frame named BelowFrameName.
//
// A snapshot of an xtmemory file is merged with the other events of the
// same file, so that the profile also carries inuse_objects (curBk) and,
// with --xtree-memory=full, alloc_space, alloc_objects, freed_space and
// freed_objects. f may be nil for a lone snapshot.
//
// Locations are keyed by function, file and line, never by address:
// inlined frames share an address and addresses move between runs, and
// keying by line is what makes `go tool pprof -diff_base` line up two runs.
func Profile(f *File, s *Snapshot) (*profile.Profile, error) {
	if s.Tree == nil {
		return nil, fmt.Errorf("snapshot %d has no allocation tree (heap_tree=%v)", s.Index, s.Kind)
	}
	b := newProfileBuilder(f)
	trees := []*Node{s.Tree}
	if s.Event != "" && f != nil {
		trees = trees[:0]
		for _, e := range xtEvents {
			for _, t := range f.Snapshots {
				if t.Event == e.event && t.Tree != nil {
					b.p.SampleType = append(b.p.SampleType, &profile.ValueType{Type: e.typ.Type, Unit: e.typ.Unit})
					trees = append(trees, t.Tree)
					break
				}
			}
		}
		if len(trees) == 0 {
			return nil, fmt.Errorf("snapshot %d: unknown xtmemory event %q", s.Index, s.Event)
		}
		b.p.DefaultSampleType = "inuse_space"
	} else {
		b.p.SampleType = []*profile.ValueType{{Type: "inuse_space", Unit: "bytes"}}
	}
	for i, t := range trees {
		eachSelfStack(t, func(stack []*Node, self int64) {
			b.add(stack, i, len(trees), self)
		})
	}
	if f != nil {
		b.p.Comments = append(b.p.Comments, fmt.Sprintf("massif file %s snapshot %d", f.Name, s.Index))
	}
	if err := b.p.CheckValid(); err != nil {
		return nil, fmt.Errorf("building profile: %w", err)
	}
	return b.p, nil
}

// RenderPprof writes the snapshot as a gzipped profile.proto, the form
// `go tool pprof` reads.
func RenderPprof(w io.Writer, f *File, s *Snapshot) error {
	p, err := Profile(f, s)
	if err != nil {
		return err
	}
	return p.Write(w)
}

type funcKey struct{ name, file string }

type profileBuilder struct {
	p         *profile.Profile
	mapping   *profile.Mapping
	functions map[funcKey]*profile.Function
	locations map[Frame]*profile.Location
	samples   map[string]*profile.Sample // by location IDs
	key       []byte
}

func newProfileBuilder(f *File) *profileBuilder {
	// One mapping that claims full symbol information, so pprof never tries
	// to symbolize the made-up addresses.
	m := &profile.Mapping{ID: 1, HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true}
	if f != nil {
		m.File = f.Cmd
	}
	return &profileBuilder{
		p: &profile.Profile{
			PeriodType: &profile.ValueType{Type: "space", Unit: "bytes"},
			Period:     1,
			Mapping:    []*profile.Mapping{m},
		},
		mapping:   m,
		functions: make(map[funcKey]*profile.Function),
		locations: make(map[Frame]*profile.Location),
		samples:   make(map[string]*profile.Sample),
	}
}

// add records self bytes (or blocks) for value column col of n on a stack.
func (b *profileBuilder) add(stack []*Node, col, ncols int, self int64) {
	locs := make([]*profile.Location, 0, len(stack)+1)
	for _, n := range stack {
		locs = append(locs, b.location(exportFrame(n)))
	}
	if len(locs) == 0 {
		locs = append(locs, b.location(Frame{Function: UnattributedFrameName}))
	}
	b.key = b.key[:0]
	for _, l := range locs {
		b.key = appendUvarint(b.key, l.ID)
	}
	s, ok := b.samples[string(b.key)]
	if !ok {
		s = &profile.Sample{Location: locs, Value: make([]int64, ncols)}
		b.samples[string(b.key)] = s
		b.p.Sample = append(b.p.Sample, s)
	}
	s.Value[col] += self
}

func (b *profileBuilder) location(fr Frame) *profile.Location {
	fr.Addr = ""
	if l, ok := b.locations[fr]; ok {
		return l
	}
	file := fr.File
	if file == "" {
		file = fr.Object
	}
	k := funcKey{exportName(fr), file}
	fn, ok := b.functions[k]
	if !ok {
		fn = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: k.name, SystemName: k.name, Filename: k.file}
		b.functions[k] = fn
		b.p.Function = append(b.p.Function, fn)
	}
	id := uint64(len(b.p.Location) + 1)
	l := &profile.Location{
		ID:      id,
		Mapping: b.mapping,
		// No address: massif's are not stable between runs, and without one
		// pprof merges two profiles' locations by function and line.
		Line: []profile.Line{{Function: fn, Line: int64(fr.Line)}},
	}
	b.locations[fr] = l
	b.p.Location = append(b.p.Location, l)
	return l
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
