package snapshots

import (
	"errors"
	"fmt"
	"sort"
)

// Change says how a site's bytes changed between two snapshots.
type Change string

// The kinds of change. Hidden and Revealed exist because massif folds the
// sites under its --threshold into "in K places, below massif's threshold"
// buckets: a site that disappears while the other snapshot has such a
// bucket where the site was (under the same parent frame, or above it) may
// only have shrunk below the threshold, so it is Hidden, not Vanished; a
// site that appears while the earlier snapshot had such a bucket is
// Revealed, not New. Their after (hidden) or before (revealed) is unknown
// and given as 0.
const (
	ChangeGrown     Change = "grown"
	ChangeShrunk    Change = "shrunk"
	ChangeUnchanged Change = "unchanged"
	ChangeNew       Change = "new"
	ChangeVanished  Change = "vanished"
	ChangeHidden    Change = "hidden"
	ChangeRevealed  Change = "revealed"
)

// SiteDelta is one row of a diff: a call site (or function, or stack, as
// grouped) with its bytes on both sides.
type SiteDelta struct {
	Frame Frame `json:"frame"`
	// Stack runs from the site outwards (site first, then its callers),
	// along the call path whose bytes changed most. In run.json it is
	// left out and StackID names it in the document's stack table
	// (StackTable).
	Stack   []Frame `json:"stack,omitempty"`
	StackID *int    `json:"stack_id,omitempty"`
	// Library are the library frames between the allocator and the site,
	// the allocator's caller first; empty when the allocator's caller is
	// the site itself.
	Library []Frame `json:"library,omitempty"`
	Before  int64   `json:"before"`
	After   int64   `json:"after"`
	Delta   int64   `json:"delta"`
	Change  Change  `json:"change"`
	// Stacks counts the call paths merged into this row when there are
	// several (Stack is the one whose bytes changed most); 0 otherwise.
	Stacks int `json:"stacks,omitempty"`
	// SiteBlocks holds the live blocks on both sides when both snapshots
	// carry block counts (xtmemory files), else nil.
	*SiteBlocks
}

// SiteBlocks is a site's number of live blocks on both sides of a diff.
type SiteBlocks struct {
	BeforeBlocks int64 `json:"before_blocks"`
	AfterBlocks  int64 `json:"after_blocks"`
	DeltaBlocks  int64 `json:"delta_blocks"`
}

// SnapshotRef names the snapshot on one side of a diff.
type SnapshotRef struct {
	File      string `json:"file"`
	Snapshot  int    `json:"snapshot"`
	HeapBytes int64  `json:"heap_bytes"`
}

// Diff is the difference between two snapshots, per site. The driver fills
// Kind, Breakpoint, FromSeq and ToSeq for run.json; `snapctl diff` fills
// From and To.
type Diff struct {
	Kind       string       `json:"kind,omitempty"` // "between-hits" or "within-call"
	Breakpoint string       `json:"breakpoint,omitempty"`
	FromSeq    int          `json:"from_seq,omitempty"`
	ToSeq      int          `json:"to_seq,omitempty"`
	From       *SnapshotRef `json:"from,omitempty"`
	To         *SnapshotRef `json:"to,omitempty"`
	// BeforeBytes and AfterBytes are the snapshots' mem_heap_B, DeltaBytes
	// their difference.
	BeforeBytes int64 `json:"before_bytes"`
	AfterBytes  int64 `json:"after_bytes"`
	DeltaBytes  int64 `json:"delta_bytes"`
	// SitesDeltaBytes is the sum of the deltas of every site, listed or not.
	// BelowThresholdDeltaBytes is the change of the below-threshold
	// buckets that belong to no site; FilteredDeltaBytes the change of the
	// allocations dropped by ignore and focus patterns. Together they make
	// up the change of the trees' totals, which is DeltaBytes.
	SitesDeltaBytes          int64 `json:"sites_delta_bytes"`
	BelowThresholdDeltaBytes int64 `json:"below_threshold_delta_bytes"`
	FilteredDeltaBytes       int64 `json:"filtered_delta_bytes"`
	// UnchangedSites counts the sites left out of Sites because their bytes
	// did not change (see Options.Unchanged).
	UnchangedSites int `json:"unchanged_sites"`
	// Sites are sorted by the size of their change, largest first.
	Sites []SiteDelta `json:"sites"`
}

// ErrNoTree is returned for a snapshot that has totals only.
var ErrNoTree = errors.New("snapshot has no allocation tree")

// DiffSnapshots compares two detailed snapshots per site. It is what
// `snapctl diff` and the driver's within-call diffs use; a series of hits
// uses Series, which keeps only one summary at a time.
func DiffSnapshots(a, b *Snapshot, opts Options) (*Diff, error) {
	if err := checkTree(a); err != nil {
		return nil, fmt.Errorf("diffing: first %w", err)
	}
	if err := checkTree(b); err != nil {
		return nil, fmt.Errorf("diffing: second %w", err)
	}
	frames := NewFrameTable()
	ta, _ := HeapTreeOf(a, frames)
	tb, _ := HeapTreeOf(b, frames)
	return DiffHeapTrees(ta, tb, opts), nil
}

// DiffHeapTrees is DiffSnapshots for snapshots read with ReadHeapTree.
func DiffHeapTrees(a, b *HeapTree, opts Options) *Diff {
	an := newAnalyzer(opts)
	an.detectWrappers(a)
	an.detectWrappers(b)
	return an.diff(an.summarize(a), an.summarize(b))
}

// SnapshotError says which snapshot could not be used.
type SnapshotError struct {
	Index int
	Err   error
}

func (e *SnapshotError) Error() string { return fmt.Sprintf("snapshot %d: %v", e.Index, e.Err) }
func (e *SnapshotError) Unwrap() error { return e.Err }

func checkTree(s *Snapshot) error {
	if s == nil {
		return fmt.Errorf("snapshot: %w", ErrNoTree)
	}
	if s.Tree == nil {
		return &SnapshotError{Index: s.Index, Err: ErrNoTree}
	}
	return nil
}

// diff compares two summaries made by the same analyzer.
func (an *analyzer) diff(a, b *summary) *Diff { return an.diffKeys(a, b, nil) }

// diffKeys is diff that also calls each, if not nil, with the key and row
// of every site, listed or not; the row of a site that is not listed and
// whose bytes did not change has no Stack and no Library.
func (an *analyzer) diffKeys(a, b *summary, each func(key string, s *SiteDelta)) *Diff {
	d := &Diff{
		BeforeBytes:              a.heapBytes,
		AfterBytes:               b.heapBytes,
		DeltaBytes:               b.heapBytes - a.heapBytes,
		BelowThresholdDeltaBytes: b.belowBytes - a.belowBytes,
		FilteredDeltaBytes:       b.filteredBytes - a.filteredBytes,
		Sites:                    []SiteDelta{},
	}
	add := func(key string, ea, eb *siteSum) {
		var s SiteDelta
		// The stack and library frames are made only for the rows that
		// need them (see below): most sites of a big heap do not change.
		named, other := eb, ea
		switch {
		case ea != nil && eb != nil:
			s = SiteDelta{Frame: an.frames[eb.frame], Before: ea.bytes, After: eb.bytes}
			switch {
			case s.After > s.Before:
				s.Change = ChangeGrown
			case s.After < s.Before:
				s.Change = ChangeShrunk
			default:
				s.Change = ChangeUnchanged
			}
		case ea != nil:
			named, other = ea, nil
			s = SiteDelta{Frame: an.frames[ea.frame], Before: ea.bytes, Change: ChangeVanished}
			if b.hiddenIn(ea) {
				s.Change = ChangeHidden
			}
		default:
			s = SiteDelta{Frame: an.frames[eb.frame], After: eb.bytes, Change: ChangeNew}
			if a.hiddenIn(eb) {
				s.Change = ChangeRevealed
			}
		}
		s.Delta = s.After - s.Before
		if a.blocks && b.blocks {
			s.SiteBlocks = &SiteBlocks{}
			if ea != nil {
				s.BeforeBlocks = ea.blocks
			}
			if eb != nil {
				s.AfterBlocks = eb.blocks
			}
			s.DeltaBlocks = s.AfterBlocks - s.BeforeBlocks
		}
		switch {
		case ea != nil && eb != nil:
			s.Stacks = eb.stacks(ea)
		case ea != nil:
			s.Stacks = ea.stacks(nil)
		default:
			s.Stacks = eb.stacks(nil)
		}
		if s.Stacks < 2 {
			s.Stacks = 0
		}
		d.SitesDeltaBytes += s.Delta
		listed := an.opts.Unchanged || !(s.Change == ChangeUnchanged || (s.Before == 0 && s.After == 0))
		if listed || s.Delta != 0 {
			// each gets a row's frames only when its bytes changed.
			s.Library, s.Stack = an.library(named), an.heaviest(named, other)
		}
		if each != nil {
			each(key, &s)
		}
		if !listed {
			d.UnchangedSites++
			return
		}
		d.Sites = append(d.Sites, s)
	}
	for k, ea := range a.sites {
		add(k, ea, b.sites[k])
	}
	for k, eb := range b.sites {
		if a.sites[k] == nil {
			add(k, nil, eb)
		}
	}
	sortSiteDeltas(d.Sites)
	return d
}

func sortSiteDeltas(s []SiteDelta) {
	sort.Slice(s, func(i, j int) bool {
		if a, b := absBytes(s[i].Delta), absBytes(s[j].Delta); a != b {
			return a > b
		}
		if s[i].After != s[j].After {
			return s[i].After > s[j].After
		}
		if !sameSiteFrame(s[i].Frame, s[j].Frame) {
			return frameLess(s[i].Frame, s[j].Frame)
		}
		return stackLess(s[i].Stack, s[j].Stack)
	})
}

func sameSiteFrame(a, b Frame) bool {
	return a.Function == b.Function && a.File == b.File && a.Line == b.Line && a.Object == b.Object && a.Offset == b.Offset
}

func stackLess(a, b []Frame) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if !sameSiteFrame(a[i], b[i]) {
			return frameLess(a[i], b[i])
		}
	}
	return len(a) < len(b)
}
