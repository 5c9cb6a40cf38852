package snapshots

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ShowOptions tunes the rendering of a whole massif file by Show and
// RenderShow.
type ShowOptions struct {
	// Format is "text" (the default) or "json".
	Format string
	// Threshold, in percent of a snapshot's heap, folds the smaller children
	// of every tree node into one "below the display threshold" line. It
	// changes the display only; 0 shows every line of the file.
	Threshold float64
}

// ShowSchema names the JSON document Show writes with Format "json".
const ShowSchema = "snapctl.show/v1"

// RenderShow writes a whole parsed massif file the way ms_print does: the
// totals of every snapshot in a table, and under each detailed one its
// allocation tree with the share of the heap and the bytes of every line.
func RenderShow(w io.Writer, f *File, opts ShowOptions) error {
	sw, err := newShowWriter(w, opts)
	if err != nil {
		return err
	}
	h := *f
	h.Snapshots = nil
	sw.begin(&h)
	for _, s := range f.Snapshots {
		sw.snapshot(s)
	}
	sw.end(&h)
	return sw.flush()
}

// Show is RenderShow reading the file one snapshot at a time from r, so
// that its memory stays proportional to the biggest snapshot.
func Show(w io.Writer, r *Reader, opts ShowOptions) error {
	sw, err := newShowWriter(w, opts)
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		s, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			sw.flush()
			return err
		}
		if first {
			sw.begin(r.Header())
		}
		sw.snapshot(s)
	}
	sw.end(r.Header())
	return sw.flush()
}

// showWriter is one output format of Show.
type showWriter interface {
	begin(h *File)        // the header as known before the first snapshot
	snapshot(s *Snapshot) // every snapshot in file order
	end(h *File)          // the complete header
	flush() error
}

func newShowWriter(w io.Writer, opts ShowOptions) (showWriter, error) {
	if opts.Threshold < 0 || opts.Threshold > 100 {
		return nil, fmt.Errorf("threshold %g%% is not between 0 and 100", opts.Threshold)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	switch opts.Format {
	case "", "text":
		return &showText{w: bw, opts: opts}, nil
	case "json":
		return &showJSON{w: bw, opts: opts}, nil
	}
	return nil, fmt.Errorf("unknown format %q (want text or json)", opts.Format)
}

// showSummary counts what the file held, for the last lines.
type showSummary struct {
	snapshots, detailed int
	peak                *Snapshot // the heap_tree=peak one, if any
	max                 *Snapshot // the biggest heap seen
}

func (sum *showSummary) add(s *Snapshot) {
	sum.snapshots++
	if s.Kind != TreeEmpty {
		sum.detailed++
	}
	if s.Kind == TreePeak {
		sum.peak = &Snapshot{Index: s.Index, HeapBytes: s.HeapBytes}
	}
	if sum.max == nil || s.HeapBytes > sum.max.HeapBytes {
		sum.max = &Snapshot{Index: s.Index, HeapBytes: s.HeapBytes}
	}
}

type showText struct {
	w        *bufio.Writer
	opts     ShowOptions
	buf      []byte
	header   bool // the header lines have been written
	needCols bool // the column header must precede the next row
	sum      showSummary
	unit     string // time unit for the column header
}

func (t *showText) begin(h *File) {
	t.writeHeader(h)
	t.needCols = true
}

func (t *showText) writeHeader(h *File) {
	if h.Desc == "" && h.Cmd == "" && h.TimeUnit == "" {
		return
	}
	t.header = true
	t.unit = h.TimeUnit
	t.w.WriteString("massif file " + h.Name + "\n")
	t.w.WriteString("command:    " + h.Cmd + "\n")
	t.w.WriteString("options:    " + h.Desc + "\n")
	t.w.WriteString("time unit:  " + describeTimeUnit(h.TimeUnit) + "\n\n")
}

func describeTimeUnit(u string) string {
	switch u {
	case "i":
		return "i (instructions executed)"
	case "ms":
		return "ms (milliseconds)"
	case "B":
		return "B (bytes allocated and freed)"
	case "s":
		return "s (seconds)"
	}
	return u
}

func (t *showText) snapshot(s *Snapshot) {
	t.sum.add(s)
	if t.needCols {
		unit := t.unit
		if unit == "" {
			unit = "?"
		}
		t.w.WriteString(fmt.Sprintf("%6s %15s %11s %11s %11s %11s  %s\n",
			"n", "time("+unit+")", "total", "useful", "extra", "stacks", "tree"))
		t.needCols = false
	}
	b := t.buf[:0]
	b = padLeft(b, strconv.Itoa(s.Index), 6)
	b = append(b, ' ')
	tm := s.TimeText
	if tm == "" {
		tm = strconv.FormatInt(s.Time, 10)
	}
	b = padLeft(b, tm, 15)
	count := isCountEvent(s.Event)
	for _, v := range [...]int64{s.HeapBytes + s.HeapExtraBytes + s.StacksBytes, s.HeapBytes, s.HeapExtraBytes, s.StacksBytes} {
		b = append(b, ' ')
		b = padLeft(b, string(appendAmount(nil, v, count)), 11)
	}
	b = append(b, "  "...)
	b = append(b, s.Kind.String()...)
	if s.Event != "" {
		b = append(b, " ("...)
		b = append(b, s.Event...)
		b = append(b, ')')
	}
	b = append(b, '\n')
	t.w.Write(b)
	t.buf = b
	if s.Tree != nil {
		t.tree(s)
		t.w.WriteByte('\n')
		t.needCols = true
	}
}

// tree writes one snapshot's tree:
//
//	100.00% (1016 B) (heap allocation functions) malloc/new/new[], --alloc-fns, etc.
//	->98.43% (1000 B) 0x10916D: make_payload (leak.c:12)
//	| ->98.43% (1000 B) 0x1091A2: handle_request (leak.c:19)
//	|   ->98.43% (1000 B) 0x1091FD: main (leak.c:27)
//	->01.57% (16 B) 0x1091D0: main (leak.c:24)
func (t *showText) tree(s *Snapshot) {
	total := s.Tree.Bytes
	count := isCountEvent(s.Event)
	var prefix []byte
	var walk func(n *Node, last bool, depth int)
	walk = func(n *Node, last bool, depth int) {
		b := t.buf[:0]
		if depth > 0 {
			b = append(b, prefix...)
			b = append(b, "->"...)
		}
		b = appendPercent(b, n.Bytes, total)
		b = append(b, " ("...)
		b = appendAmount(b, n.Bytes, count)
		b = append(b, ") "...)
		b = appendNodeText(b, n)
		b = append(b, '\n')
		t.w.Write(b)
		t.buf = b
		kids, folded, places := foldChildren(n, total, t.opts.Threshold)
		if depth > 0 {
			if last {
				prefix = append(prefix, "  "...)
			} else {
				prefix = append(prefix, "| "...)
			}
		}
		for i, c := range kids {
			walk(c, i == len(kids)-1 && places == 0, depth+1)
		}
		if places > 0 {
			b := append(t.buf[:0], prefix...)
			b = append(b, "->"...)
			b = appendPercent(b, folded, total)
			b = append(b, " ("...)
			b = appendAmount(b, folded, count)
			b = append(b, ") "...)
			b = appendPlaces(b, places)
			b = append(b, "below the display threshold ("...)
			b = strconv.AppendFloat(b, t.opts.Threshold, 'f', 2, 64)
			b = append(b, "%)\n"...)
			t.w.Write(b)
			t.buf = b
		}
		if depth > 0 {
			prefix = prefix[:len(prefix)-2]
		}
	}
	walk(s.Tree, true, 0)
}

// foldChildren splits n's children into those shown and the bytes and
// number of places of those below threshold percent of total. Massif's own
// below-threshold buckets count as their places.
func foldChildren(n *Node, total int64, threshold float64) (kids []*Node, folded int64, places int) {
	if threshold <= 0 {
		return n.Children, 0, 0
	}
	limit := float64(total) * threshold / 100
	for i, c := range n.Children {
		if float64(c.Bytes) >= limit {
			if kids != nil {
				kids = append(kids, c)
			}
			continue
		}
		if kids == nil {
			kids = append(make([]*Node, 0, len(n.Children)), n.Children[:i]...)
		}
		folded += c.Bytes
		if c.Below {
			places += c.Places
		} else {
			places++
		}
	}
	if kids == nil && places == 0 {
		return n.Children, 0, 0
	}
	if places == 1 {
		// One site alone is shown rather than hidden behind a bucket.
		return n.Children, 0, 0
	}
	return kids, folded, places
}

func appendPlaces(b []byte, places int) []byte {
	if places == 1 {
		return append(b, "in 1 place, "...)
	}
	b = append(b, "in "...)
	b = strconv.AppendInt(b, int64(places), 10)
	return append(b, " places, all "...)
}

// appendNodeText writes a tree line's text as massif wrote it.
func appendNodeText(b []byte, n *Node) []byte {
	if n.Below {
		b = appendPlaces(b, n.Places)
		return append(b, "below massif's threshold"...)
	}
	f := &n.Frame
	if f.Addr != "" {
		b = append(b, f.Addr...)
		b = append(b, ": "...)
	}
	b = append(b, f.Function...)
	switch {
	case f.File != "":
		b = append(b, " ("...)
		b = append(b, f.File...)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(f.Line), 10)
		b = append(b, ')')
	case f.Object != "":
		b = append(b, " (in "...)
		b = append(b, f.Object...)
		b = append(b, ')')
	}
	return b
}

// appendPercent writes part as a percentage of total with two decimals,
// zero-padded to two integer digits like ms_print: "98.43%", "01.57%".
func appendPercent(b []byte, part, total int64) []byte {
	p := 0.0
	if total != 0 {
		p = float64(part) * 100 / float64(total)
	}
	if p >= 0 && p < 10 {
		b = append(b, '0')
	}
	b = strconv.AppendFloat(b, p, 'f', 2, 64)
	return append(b, '%')
}

// appendAmount writes bytes in binary units as FormatBytes does, or a
// block count for xtmemory's block events.
func appendAmount(b []byte, n int64, count bool) []byte {
	if count {
		b = strconv.AppendInt(b, n, 10)
		if n == 1 {
			return append(b, " block"...)
		}
		return append(b, " blocks"...)
	}
	return appendBytes(b, n)
}

// appendBytes is FormatBytes without the allocations.
func appendBytes(b []byte, n int64) []byte {
	u := n
	if n < 0 {
		b = append(b, '-')
		u = -n
	}
	if u < 1024 {
		b = strconv.AppendInt(b, u, 10)
		return append(b, " B"...)
	}
	const units = "KMGTPE"
	v := float64(u) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	b = strconv.AppendFloat(b, v, 'f', 1, 64)
	return append(b, ' ', units[i], 'i', 'B')
}

// isCountEvent reports whether an xtmemory event counts blocks, not bytes.
func isCountEvent(event string) bool {
	return strings.HasSuffix(event, "Bk")
}

func padLeft(b []byte, s string, width int) []byte {
	for i := len(s); i < width; i++ {
		b = append(b, ' ')
	}
	return append(b, s...)
}

func (t *showText) end(h *File) {
	if !t.header {
		// heaptrack writes its header after the snapshots.
		t.writeHeader(h)
	}
	sum := &t.sum
	fmt.Fprintf(t.w, "%d snapshots, %d detailed", sum.snapshots, sum.detailed)
	if sum.peak != nil {
		fmt.Fprintf(t.w, ", peak at snapshot %d (%s)", sum.peak.Index, FormatBytes(sum.peak.HeapBytes))
	}
	if sum.max != nil && sum.max.HeapBytes > 0 {
		fmt.Fprintf(t.w, ", largest heap at snapshot %d (%s)", sum.max.Index, FormatBytes(sum.max.HeapBytes))
	}
	t.w.WriteByte('\n')
}

func (t *showText) flush() error { return t.w.Flush() }
