package snapshots

import (
	"fmt"
	"strings"
)

// Standing is how a suspect's live blocks stand in memcheck's leak search
// (the memcheck backend): each kind at the breakpoint's last stop and its
// growth per hit between the first and last, and for blocks that are
// still reachable what holds them.
type Standing struct {
	DefinitelyLost StandingKind `json:"definitely_lost"`
	IndirectlyLost StandingKind `json:"indirectly_lost"`
	PossiblyLost   StandingKind `json:"possibly_lost"`
	StillReachable StandingKind `json:"still_reachable"`
	// HeldBy is what holds a sample block of the site, walked back from
	// it at the last stop where the site's reachable blocks grew; nil when
	// none of them is reachable or none grew.
	HeldBy *Holder `json:"held_by,omitempty"`
}

// StandingKind is one kind of memcheck's loss records at a site.
type StandingKind struct {
	Bytes  int64 `json:"bytes"`
	Blocks int64 `json:"blocks"`
	// BytesPerHit and BlocksPerHit are the change from the breakpoint's
	// first stop to its last over the hits between them.
	BytesPerHit  int64   `json:"bytes_per_hit"`
	BlocksPerHit float64 `json:"blocks_per_hit"`
}

// LostPerHit is the bytes per hit the site loses: definitely and
// indirectly lost.
func (s *Standing) LostPerHit() int64 {
	return s.DefinitelyLost.BytesPerHit + s.IndirectlyLost.BytesPerHit
}

// Holder is what keeps a reachable block: the root, and the blocks from
// it down to the sample, grouped by their allocation site.
type Holder struct {
	// Root is nil when the walk found none within its bound.
	Root  *HolderRoot   `json:"root"`
	Chain []HolderChain `json:"chain"`
	// Sentence says it in words: "held by `registry` (reach.c:9) through
	// 29 blocks of keep (reach.c:11)".
	Sentence string `json:"sentence"`
}

// HolderRoot is where a chain of pointers starts: a global variable
// (Kind "global", its name and declaration), a thread's stack ("stack"),
// a register ("register"), or what valgrind said ("other").
type HolderRoot struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// HolderChain is a run of consecutive blocks of one allocation site.
type HolderChain struct {
	Site   Frame `json:"site"`
	Blocks int   `json:"blocks"`
}

// Say is the holder in words.
func (h *Holder) Say() string {
	var b strings.Builder
	switch r := h.Root; {
	case r == nil:
		b.WriteString("held, but no root found within the walk")
	case r.Kind == "global" && r.File != "":
		fmt.Fprintf(&b, "held by `%s` (%s:%d)", r.Name, r.File, r.Line)
	case r.Kind == "global":
		fmt.Fprintf(&b, "held by `%s`", r.Name)
	default:
		fmt.Fprintf(&b, "held by %s", r.Name)
	}
	for i, c := range h.Chain {
		if i == 0 {
			b.WriteString(" through ")
		} else {
			b.WriteString(", then ")
		}
		blocks := "blocks"
		if c.Blocks == 1 {
			blocks = "block"
		}
		fmt.Fprintf(&b, "%d %s of %s", c.Blocks, blocks, ShortFrame(c.Site))
	}
	return b.String()
}
