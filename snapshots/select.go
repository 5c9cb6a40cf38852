package snapshots

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SplitSpec splits a snapshot reference "FILE#SEL" into the file path and
// the selector: "x.out#3" gives ("x.out", "3"), "x.out#peak" gives
// ("x.out", "peak"), "x.out" gives ("x.out", ""). A '#' followed by a path
// separator belongs to the path.
func SplitSpec(spec string) (path, sel string) {
	i := strings.LastIndexByte(spec, '#')
	if i < 0 || strings.ContainsRune(spec[i+1:], '/') {
		return spec, ""
	}
	return spec[:i], spec[i+1:]
}

// Select picks one snapshot of f:
//
//	""      the last detailed (or peak) snapshot; the only snapshot of a
//	        `monitor detailed_snapshot` file; in an xtmemory file the curB
//	        event (bytes currently allocated)
//	"N"     the snapshot numbered N (snapshot=N)
//	"peak"  the peak snapshot
//	"curB"  in an xtmemory file, the tree of that event
//
// The error names the file and says what it holds instead.
func (f *File) Select(sel string) (*Snapshot, error) {
	switch sel {
	case "":
		for _, s := range f.Snapshots {
			if s.Event == eventBytes {
				return s, nil
			}
		}
		for i := len(f.Snapshots) - 1; i >= 0; i-- {
			if f.Snapshots[i].Kind != TreeEmpty {
				return f.Snapshots[i], nil
			}
		}
		return nil, fmt.Errorf("massif file %s has no detailed snapshot among its %d (run massif with --detailed-freq=1, or pick one with %s#N for totals only)", f.Name, len(f.Snapshots), f.Name)
	case "peak":
		for _, s := range f.Snapshots {
			if s.Kind == TreePeak {
				return s, nil
			}
		}
		return nil, fmt.Errorf("massif file %s has no peak snapshot", f.Name)
	}
	if n, err := strconv.Atoi(sel); err == nil {
		for _, s := range f.Snapshots {
			if s.Index == n {
				return s, nil
			}
		}
		return nil, fmt.Errorf("massif file %s has no snapshot %d (%s)", f.Name, n, f.indexRange())
	}
	var events []string
	for _, s := range f.Snapshots {
		if s.Event == sel {
			return s, nil
		}
		if s.Event != "" {
			events = append(events, s.Event)
		}
	}
	if len(events) > 0 {
		return nil, fmt.Errorf("xtmemory file %s has no event %q (it has %s)", f.Name, sel, strings.Join(events, ", "))
	}
	return nil, fmt.Errorf("massif file %s: bad snapshot selector %q (want a snapshot number or \"peak\")", f.Name, sel)
}

// MergeBlocks merges the live blocks of f's curBk event, if it has one,
// into s when s is its curB event, setting s.Blocks; other snapshots are
// left as they are. It changes s's tree.
func (f *File) MergeBlocks(s *Snapshot) error {
	if s.Blocks || s.Event != eventBytes {
		return nil
	}
	for _, b := range f.Snapshots {
		if b.Event == eventBlocks {
			return mergeBlocks(s, b, f.Name)
		}
	}
	return nil
}

func (f *File) indexRange() string {
	switch len(f.Snapshots) {
	case 0:
		return "it has none"
	case 1:
		return fmt.Sprintf("it has only snapshot %d", f.Snapshots[0].Index)
	}
	return fmt.Sprintf("it has snapshots %d to %d", f.Snapshots[0].Index, f.Snapshots[len(f.Snapshots)-1].Index)
}

// PagesAsHeap reports whether the snapshot was taken with
// --pages-as-heap=yes, whose root reads "(page allocation syscalls) ...".
func (s *Snapshot) PagesAsHeap() bool {
	return s.Tree != nil && strings.HasPrefix(s.Tree.Frame.Function, "(page allocation syscalls)")
}

// ParseSelect reads a massif file and returns it with the snapshot sel
// picks, as File.Select would, keeping in memory the totals of every
// snapshot but the tree of only the one picked (and, in an xtmemory file,
// of every event, so that Profile can merge them). It is how commands that
// need one snapshot of a possibly huge massif.out.PID read it.
func ParseSelect(r io.Reader, name, sel string) (*File, *Snapshot, error) {
	rd := NewReader(r, name, ReadOptions{})
	var snaps []*Snapshot
	var last *Snapshot // the latest detailed snapshot, for sel ""
	n, numErr := strconv.Atoi(sel)
	found := false
	for {
		s, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		switch {
		case s.Event != "":
			// Keep every event's tree.
		case sel == "" && s.Kind != TreeEmpty:
			if last != nil {
				last.Tree = nil
			}
			last = s
		case sel == "peak" && s.Kind == TreePeak:
		case numErr == nil && s.Index == n && !found:
			found = true
		default:
			s.Tree = nil
		}
		snaps = append(snaps, s)
	}
	f := rd.Header()
	f.Snapshots = snaps
	s, err := f.Select(sel)
	if err != nil {
		return nil, nil, err
	}
	return f, s, nil
}
