package memcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// search is a stop's leak search as memcheck.py writes it.
type search struct {
	Records []record `json:"records"`
	Holders []holder `json:"holders"`
}

// record is one of memcheck's loss records: the bytes and blocks of one
// kind allocated at one stack (the allocator's frame first).
type record struct {
	Kind   string            `json:"kind"`
	Bytes  int64             `json:"bytes"`
	Blocks int64             `json:"blocks"`
	Record int               `json:"record"`
	Stack  []snapshots.Frame `json:"stack"`
}

// holder is what holds a sample block of a reachable record.
type holder struct {
	Record int                   `json:"record"`
	Root   *snapshots.HolderRoot `json:"root"`
	Chain  []link                `json:"chain"`
}

// link is a run of blocks of one site in a holder's chain, with its first
// block's allocation stack.
type link struct {
	Site   snapshots.Frame   `json:"site"`
	Blocks int               `json:"blocks"`
	Stack  []snapshots.Frame `json:"stack"`
}

// chain is a holder's chain with each link named as the suspects are:
// the first frame of its stack that is a suspect's site (strdup's block
// is cache_put's), else memcheck.py's first frame past the allocator;
// links of one site that follow each other make one.
func chain(links []link, sites map[siteKey]bool) []snapshots.HolderChain {
	var out []snapshots.HolderChain
	for _, l := range links {
		site := l.Site
		for _, f := range l.Stack {
			if sites[keyOf(f)] {
				site = f
				break
			}
		}
		if n := len(out); n > 0 && keyOf(out[n-1].Site) == keyOf(site) {
			out[n-1].Blocks += l.Blocks
			continue
		}
		out = append(out, snapshots.HolderChain{Site: site, Blocks: l.Blocks})
	}
	return out
}

// The kinds of loss records, as memcheck names them.
const (
	kindDefinite  = "definitely lost"
	kindIndirect  = "indirectly lost"
	kindPossible  = "possibly lost"
	kindReachable = "still reachable"
)

// leaks keeps what the standing of the suspects needs of the stops' leak
// searches: each breakpoint's first and last hit, and the last holder
// found of each reachable stack.
type leaks struct {
	mu     sync.Mutex
	staged map[int]string // by stop
	bps    map[string]*bpLeaks
}

type bpLeaks struct {
	first, last *hitLeaks
	// held is the last holder walked of each stack, by stackKey.
	held map[string]heldAt
}

type hitLeaks struct {
	hit     int
	records []record
}

type heldAt struct {
	stack  []snapshots.Frame
	holder holder
}

func newLeaks() *leaks {
	return &leaks{staged: make(map[int]string), bps: make(map[string]*bpLeaks)}
}

func (l *leaks) stage(seq int, path string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.staged[seq] = path
}

// read keeps a stop's leak search in the run directory, sums it into the
// stop's "leak" and, for a hit, feeds the breakpoint's standing.
func (l *leaks) read(dir string, st *backend.Stop) error {
	stop := st.Stop
	l.mu.Lock()
	staged, ok := l.staged[stop.Seq]
	delete(l.staged, stop.Seq)
	l.mu.Unlock()
	if !ok {
		return nil
	}
	data, err := os.ReadFile(staged)
	if err != nil {
		return fmt.Errorf("reading the leak search of stop %d: %w", stop.Seq, err)
	}
	var s search
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("reading the leak search of stop %d: %w", stop.Seq, err)
	}
	// Kept under its unlisted name, as the stop's snapshot is, until a
	// run.json that lists it is written (the driver's publish): a
	// snapctl killed before then leaves no file run.json does not
	// account for.
	name := strings.TrimSuffix(sites.SnapshotName(stop.Seq, stop.Breakpoint, stop.Hit, stop.Phase), ".massif.gz") + keptLeakExt
	if err := backend.MoveFile(staged, backend.UnlistedPath(dir, name)); err != nil {
		return fmt.Errorf("keeping the leak search of stop %d: %w", stop.Seq, err)
	}
	sum := &runjson.Leak{Records: name}
	for _, r := range s.Records {
		k := leakKind(sum, r.Kind)
		if k != nil {
			k.Bytes += r.Bytes
			k.Blocks += r.Blocks
		}
	}
	stop.Leak = sum
	if stop.Phase == runjson.PhaseReturn {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bps[stop.Breakpoint]
	if b == nil {
		b = &bpLeaks{held: make(map[string]heldAt)}
		l.bps[stop.Breakpoint] = b
	}
	h := &hitLeaks{hit: stop.Hit, records: s.Records}
	if b.first == nil {
		b.first = h
	}
	b.last = h
	for _, hd := range s.Holders {
		for _, r := range s.Records {
			if r.Record == hd.Record {
				b.held[stackKey(r.Stack)] = heldAt{stack: r.Stack, holder: hd}
			}
		}
	}
	return nil
}

// leakKind is the field of the stop's leak that a kind sums into.
func leakKind(l *runjson.Leak, kind string) *runjson.LeakKind {
	switch kind {
	case kindDefinite:
		return &l.DefinitelyLost
	case kindIndirect:
		return &l.IndirectlyLost
	case kindPossible:
		return &l.PossiblyLost
	case kindReachable:
		return &l.StillReachable
	}
	return nil
}

func standingKind(s *snapshots.Standing, kind string) *snapshots.StandingKind {
	switch kind {
	case kindDefinite:
		return &s.DefinitelyLost
	case kindIndirect:
		return &s.IndirectlyLost
	case kindPossible:
		return &s.PossiblyLost
	case kindReachable:
		return &s.StillReachable
	}
	return nil
}

func stackKey(stack []snapshots.Frame) string {
	var b strings.Builder
	for _, f := range stack {
		fmt.Fprintf(&b, "%s\x00%s\x00%d\x00%s\x01", f.Function, f.File, f.Line, f.Object)
	}
	return b.String()
}

// siteKey is a frame as sites are matched: function and file:line.
type siteKey struct {
	function, file string
	line           int
}

func keyOf(f snapshots.Frame) siteKey { return siteKey{f.Function, f.File, f.Line} }

// siteOf is the suspect of sites a record's stack belongs to: its first
// frame, from the allocator outwards, that is one of sites; ok is false
// when none is. A loss record's stack is the xtmemory snapshot's with the
// allocator's frame on top, so the frame the sites' analysis chose as a
// suspect's site is in it.
func siteOf(stack []snapshots.Frame, sites map[siteKey]bool) (siteKey, bool) {
	for _, f := range stack {
		if k := keyOf(f); sites[k] {
			return k, true
		}
	}
	return siteKey{}, false
}

// annotate gives each suspect how its blocks stand: the kinds of the
// loss records of its site at its breakpoint's last hit, their change
// per hit since the first, and the last holder walked of its reachable
// blocks.
func (l *leaks) annotate(suspects []snapshots.Suspect) {
	l.mu.Lock()
	defer l.mu.Unlock()
	byBP := make(map[string]map[siteKey]bool)
	for _, s := range suspects {
		if byBP[s.Breakpoint] == nil {
			byBP[s.Breakpoint] = make(map[siteKey]bool)
		}
		byBP[s.Breakpoint][keyOf(s.Frame)] = true
	}
	for i := range suspects {
		s := &suspects[i]
		b := l.bps[s.Breakpoint]
		if b == nil || b.last == nil {
			continue
		}
		set, site := byBP[s.Breakpoint], keyOf(s.Frame)
		sum := func(h *hitLeaks) *snapshots.Standing {
			st := &snapshots.Standing{}
			for _, r := range h.records {
				if k, ok := siteOf(r.Stack, set); ok && k == site {
					if sk := standingKind(st, r.Kind); sk != nil {
						sk.Bytes += r.Bytes
						sk.Blocks += r.Blocks
					}
				}
			}
			return st
		}
		last, first := sum(b.last), sum(b.first)
		if hits := b.last.hit - b.first.hit; hits > 0 {
			for _, kind := range []string{kindDefinite, kindIndirect, kindPossible, kindReachable} {
				a, z := standingKind(first, kind), standingKind(last, kind)
				z.BytesPerHit = roundDiv(z.Bytes-a.Bytes, int64(hits))
				z.BlocksPerHit = float64(z.Blocks-a.Blocks) / float64(hits)
			}
		}
		for _, h := range b.held {
			if k, ok := siteOf(h.stack, set); ok && k == site && last.StillReachable.Blocks > 0 {
				hd := &snapshots.Holder{Root: h.holder.Root, Chain: chain(h.holder.Chain, set)}
				hd.Sentence = hd.Say()
				if last.HeldBy == nil || len(hd.Chain) > 0 && hd.Root != nil && last.HeldBy.Root == nil {
					last.HeldBy = hd
				}
			}
		}
		s.Memcheck = last
	}
}

// roundDiv is n/d rounded to the nearest whole number.
func roundDiv(n, d int64) int64 {
	if n < 0 {
		return -roundDiv(-n, d)
	}
	return (n + d/2) / d
}
