package memcheck

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/snapshots"
)

// Text prints the terminal report: a massif run's (sites.Text), then how
// the suspects' blocks stand.
func (b *Backend) Text(w io.Writer, o *backend.Outcome, opts snapshots.RenderOptions) error {
	if err := sites.Text(w, o, opts); err != nil {
		return err
	}
	return standings(w, o, "\nHow the suspects' blocks stand (memcheck's leak search at the last stop)\n", "  ")
}

// Markdown writes report.md: a massif run's (sites.Markdown), then how
// the suspects' blocks stand.
func (b *Backend) Markdown(w io.Writer, o *backend.Outcome) error {
	if err := sites.Markdown(w, o); err != nil {
		return err
	}
	if backend.MeasuredNothing(o.Manifest) {
		return nil
	}
	return standings(w, o, "\n## How the suspects' blocks stand\n\nmemcheck's leak search at each breakpoint's last stop, and its change per hit since the first.\n\n", "- ")
}

// HTML gives report.html a massif run's facts and notes, and one note per
// suspect on how its blocks stand.
func (b *Backend) HTML(opts *snapshots.HTMLOptions, o *backend.Outcome) {
	sites.HTML(opts, o)
	for _, s := range suspects(o) {
		opts.Notes = append(opts.Notes, Standing(s))
	}
}

func suspects(o *backend.Outcome) []snapshots.Suspect {
	if o.Report != nil && len(o.Report.Suspects) > 0 {
		return o.Report.Suspects
	}
	return o.Manifest.Suspects
}

// standings writes one line per suspect that has a standing.
func standings(w io.Writer, o *backend.Outcome, title, bullet string) error {
	ss := suspects(o)
	n := 0
	for _, s := range ss {
		if s.Memcheck != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	bw := bufio.NewWriter(w)
	pw := snapshots.PrintableWriter(bw)
	fmt.Fprint(pw, title)
	for _, s := range ss {
		if s.Memcheck != nil {
			fmt.Fprintf(pw, "%s%s\n", bullet, Standing(s))
		}
	}
	return bw.Flush()
}

// Standing says how a suspect's blocks stand: "lose (reach.c:21) at
// checkpoint: definitely lost 2.5 KiB in 80 blocks (+640 B, +20 blocks per
// hit)", each kind it has, and what holds the reachable ones.
func Standing(s snapshots.Suspect) string {
	m := s.Memcheck
	var parts []string
	for _, k := range []struct {
		name string
		k    snapshots.StandingKind
	}{{kindDefinite, m.DefinitelyLost}, {kindIndirect, m.IndirectlyLost}, {kindPossible, m.PossiblyLost}, {kindReachable, m.StillReachable}} {
		if k.k.Blocks == 0 && k.k.BytesPerHit == 0 {
			continue
		}
		blocks := "blocks"
		if k.k.BlocksPerHit == 1 || k.k.BlocksPerHit == -1 {
			blocks = "block"
		}
		parts = append(parts, fmt.Sprintf("%s %s in %s (%s, %s %s per hit)", k.name, snapshots.FormatBytes(k.k.Bytes),
			backend.Plural(int(k.k.Blocks), "block"), snapshots.FormatDelta(k.k.BytesPerHit), signed(k.k.BlocksPerHit), blocks))
	}
	if len(parts) == 0 {
		parts = append(parts, "no live block in memcheck's loss records")
	}
	line := fmt.Sprintf("%s at %s: %s", snapshots.ShortFrame(s.Frame), s.Breakpoint, strings.Join(parts, "; "))
	if m.HeldBy != nil {
		line += "; " + m.HeldBy.Sentence
	}
	return line
}

func signed(f float64) string {
	s := strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
	if f >= 0 {
		return "+" + s
	}
	return s
}
