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
	// Threshold, in percent of a snapshot's heap, folds the children of a
	// tree node that are smaller into one "below the display threshold"
	// line. It changes the display only; 0 shows every line of the file.
	Threshold float64
}

// ShowSchema names the JSON document Show writes with Format "json".
const ShowSchema = "snapctl.show/v1"

// RenderShow writes a whole parsed massif file the way ms_print does: the
// totals of every snapshot in a table, and under each detailed one its
// allocation tree with the share of the heap and the bytes of every line.
func RenderShow(w io.Writer, f *File, opts ShowOptions) error {
	h := *f
	h.Snapshots = nil
	sw, err := newShowWriter(w, opts, func() *File { return &h })
	if err != nil {
		return err
	}
	for _, s := range f.Snapshots {
		sw.snapshot(s)
	}
	sw.end(&h)
	return sw.flush()
}

// Show is RenderShow reading the file one snapshot at a time from r, so
// that its memory stays proportional to the biggest snapshot. As text, it
// renders tree lines as the Reader checks them, without building trees at
// all; it writes the same bytes as RenderShow, except that a header that
// comes after the snapshots (heaptrack's) is printed at the end.
func Show(w io.Writer, r *Reader, opts ShowOptions) error {
	sticky := &stickyWriter{w: w}
	sw, err := newShowWriter(sticky, opts, r.Header)
	if err != nil {
		return err
	}
	if v, ok := sw.(treeVisitor); ok {
		r.visitor = v
		defer func() { r.visitor = nil }()
	}
	for {
		s, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			sw.flush()
			return err
		}
		sw.snapshot(s)
		if sticky.err != nil {
			// The reader went away (show | head): stop parsing.
			return sticky.err
		}
	}
	sw.end(r.Header())
	return sw.flush()
}

// stickyWriter remembers the first write error, so Show can stop early.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// showWriter is one output format of Show.
type showWriter interface {
	snapshot(s *Snapshot) // every snapshot in file order
	end(h *File)          // with the complete header
	flush() error
}

// newShowWriter returns the writer for opts.Format; header gives the header
// as known when the first snapshot is written.
func newShowWriter(w io.Writer, opts ShowOptions, header func() *File) (showWriter, error) {
	if !(opts.Threshold >= 0 && opts.Threshold <= 100) { // also NaN
		return nil, fmt.Errorf("threshold %g%% is not between 0 and 100", opts.Threshold)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	switch opts.Format {
	case "", "text":
		return &showText{w: bw, opts: opts, header: header}, nil
	case "json":
		return &showJSON{w: bw, opts: opts, header: header}, nil
	}
	return nil, fmt.Errorf("unknown format %q (want text or json)", opts.Format)
}

// showSummary counts what the file held, for the last line.
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

// showText writes the text form. Trees reach it line by line, as a
// treeVisitor: straight from the Reader in Show, from a walk of the nodes in
// RenderShow, so both print the same bytes.
type showText struct {
	w        *bufio.Writer
	opts     ShowOptions
	header   func() *File
	begun    bool // the header has been considered
	printed  bool // the header lines have been written
	needCols bool // the column header must precede the next row
	sum      showSummary
	unit     string // time unit for the column header
	buf      []byte
	text     []byte // frame text of a node being walked

	// The tree being written.
	total  int64
	count  bool    // xtmemory block counts, not bytes
	limit  float64 // lines below this many bytes fold
	levels []showLevel
	prefix []byte // the "| " and "  " of the open levels
	skip   int    // lines deeper than this belong to a folded line; -1: none
}

// showLevel is an open node of the tree being written, at depth index.
type showLevel struct {
	prefix int   // length of its children's prefix in showText.prefix
	folded int64 // bytes of its children folded by the threshold
	places int
}

func (t *showText) start() {
	if t.begun {
		return
	}
	t.begun = true
	t.writeHeader(t.header())
	t.needCols = true
}

func (t *showText) writeHeader(h *File) {
	if h.Desc == "" && h.Cmd == "" && h.TimeUnit == "" {
		return
	}
	t.printed = true
	t.unit = h.TimeUnit
	t.w.WriteString("massif file " + Printable(h.Name) + "\n")
	t.w.WriteString("command:    " + Printable(h.Cmd) + "\n")
	t.w.WriteString("options:    " + Printable(h.Desc) + "\n")
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

// snapshot writes a snapshot's row and, from its nodes, its tree. A
// snapshot whose tree the Reader streamed to beginTree is only counted.
func (t *showText) snapshot(s *Snapshot) {
	t.sum.add(s)
	if s.Tree == nil && s.Kind != TreeEmpty {
		return
	}
	t.row(s)
	if s.Tree != nil {
		t.beginTree(s)
		t.walk(s.Tree, 0, true)
		t.endTree()
	}
}

func (t *showText) row(s *Snapshot) {
	t.start()
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
}

// walk feeds the nodes under n to line as the Reader would.
func (t *showText) walk(n *Node, depth int, last bool) {
	l := treeLine{depth: depth, last: last, kids: len(n.Children), bytes: n.Bytes, below: n.Below, places: n.Places}
	if depth == 0 {
		l.text = append(t.text[:0], n.Frame.Function...)
	} else if !n.Below {
		l.text = appendNodeText(t.text[:0], n)
	}
	t.text = l.text
	t.line(&l)
	for i, c := range n.Children {
		t.walk(c, depth+1, i == len(n.Children)-1)
	}
}

// beginTree starts a tree; its root line comes next. A streamed snapshot's
// row is written here, before its tree lines.
func (t *showText) beginTree(s *Snapshot) {
	if s.Tree == nil {
		t.row(s)
	}
	t.count = isCountEvent(s.Event)
	t.levels = t.levels[:0]
	t.skip = -1
}

// line writes one tree line like ms_print:
//
//	100.00% (1016 B) (heap allocation functions) malloc/new/new[], --alloc-fns, etc.
//	->98.43% (1000 B) 0x10916D: make_payload (leak.c:12)
//	| ->98.43% (1000 B) 0x1091A2: handle_request (leak.c:19)
//	|   ->98.43% (1000 B) 0x1091FD: main (leak.c:27)
//	->01.57% (16 B) 0x1091D0: main (leak.c:24)
//
// With a threshold, a child smaller than the threshold is not written; its
// bytes are added to its parent's folded line, written after the parent's
// last child.
func (t *showText) line(l *treeLine) {
	if l.depth == 0 {
		t.total = l.bytes
		t.limit = float64(l.bytes) * t.opts.Threshold / 100
		b := appendPercent(t.buf[:0], l.bytes, l.bytes)
		b = append(b, " ("...)
		b = appendAmount(b, l.bytes, t.count)
		b = append(b, ") "...)
		b = appendPrintableBytes(b, l.text)
		b = append(b, '\n')
		t.w.Write(b)
		t.buf = b
		t.prefix = t.prefix[:0]
		t.levels = append(t.levels[:0], showLevel{})
		return
	}
	if t.skip >= 0 && l.depth > t.skip {
		return
	}
	t.skip = -1
	t.close(l.depth)
	parent := &t.levels[l.depth-1]
	if t.opts.Threshold > 0 && float64(l.bytes) < t.limit {
		parent.folded += l.bytes
		if l.below {
			parent.places += l.places
		} else {
			parent.places++
		}
		t.skip = l.depth
		return
	}
	b := append(t.buf[:0], t.prefix[:parent.prefix]...)
	b = append(b, "->"...)
	b = appendPercent(b, l.bytes, t.total)
	b = append(b, " ("...)
	b = appendAmount(b, l.bytes, t.count)
	b = append(b, ") "...)
	if l.below {
		b = appendPlaces(b, l.places)
		b = append(b, "below massif's threshold"...)
	} else {
		b = appendPrintableBytes(b, l.text)
	}
	b = append(b, '\n')
	t.w.Write(b)
	t.buf = b
	t.prefix = t.prefix[:parent.prefix]
	if l.last {
		t.prefix = append(t.prefix, "  "...)
	} else {
		t.prefix = append(t.prefix, "| "...)
	}
	t.levels = append(t.levels, showLevel{prefix: len(t.prefix)})
}

// close ends the levels at depth and deeper, writing their folded lines.
func (t *showText) close(depth int) {
	for len(t.levels) > depth {
		lv := t.levels[len(t.levels)-1]
		t.levels = t.levels[:len(t.levels)-1]
		if lv.places == 0 {
			continue
		}
		b := append(t.buf[:0], t.prefix[:lv.prefix]...)
		b = append(b, "->"...)
		b = appendPercent(b, lv.folded, t.total)
		b = append(b, " ("...)
		b = appendAmount(b, lv.folded, t.count)
		b = append(b, ") "...)
		b = appendPlaces(b, lv.places)
		b = append(b, "below the display threshold ("...)
		b = strconv.AppendFloat(b, t.opts.Threshold, 'f', 2, 64)
		b = append(b, "%)\n"...)
		t.w.Write(b)
		t.buf = b
	}
}

func (t *showText) endTree() {
	t.close(0)
	t.w.WriteByte('\n')
	t.needCols = true
}

// foldChildren splits n's children into those shown and the bytes and
// number of places of those below threshold percent of total, as the text
// form folds them. Massif's own below-threshold buckets count as their
// places.
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
	if kids == nil {
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

// appendNodeText writes a tree line's text as massif wrote it, with control
// characters escaped (see Printable).
func appendNodeText(b []byte, n *Node) []byte {
	if n.Below {
		b = appendPlaces(b, n.Places)
		return append(b, "below massif's threshold"...)
	}
	f := &n.Frame
	if f.Addr != "" {
		b = appendPrintable(b, f.Addr, false)
		b = append(b, ": "...)
	}
	b = appendPrintable(b, f.Function, false)
	switch {
	case f.File != "":
		b = append(b, " ("...)
		b = appendPrintable(b, f.File, false)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(f.Line), 10)
		b = append(b, ')')
	case f.Object != "":
		b = append(b, " (in "...)
		b = appendPrintable(b, f.Object, false)
		if f.Offset != 0 {
			b = append(b, "+0x"...)
			b = strconv.AppendUint(b, f.Offset, 16)
		}
		b = append(b, ')')
	}
	return b
}

// appendPercent writes part as a percentage of total with two decimals,
// zero-padded to two integer digits like ms_print: "98.43%", "01.57%".
// Integer arithmetic keeps it cheap on million-line trees.
func appendPercent(b []byte, part, total int64) []byte {
	if total == 0 {
		return append(b, "00.00%"...)
	}
	neg := (part < 0) != (total < 0)
	if part < 0 {
		part = -part
	}
	if total < 0 {
		total = -total
	}
	var q int64 // hundredths of a percent, rounded half up
	if part <= 1<<48 && total <= 1<<61 {
		q = (part*20000 + total) / (2 * total)
	} else {
		q = int64(float64(part)*10000/float64(total) + 0.5)
	}
	if neg && q != 0 {
		b = append(b, '-')
	}
	if q < 1000 {
		b = append(b, '0')
	}
	b = strconv.AppendInt(b, q/100, 10)
	return append(b, '.', byte('0'+q%100/10), byte('0'+q%10), '%')
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

// appendBytes is FormatBytes without its allocations and, below 2^53
// bytes, without floating point: the same digits, rounded half to even as
// strconv rounds the exact quotient.
func appendBytes(b []byte, n int64) []byte {
	u := uint64(n)
	if n < 0 {
		b = append(b, '-')
		u = uint64(-n)
	}
	if u < 1024 {
		b = strconv.AppendUint(b, u, 10)
		return append(b, " B"...)
	}
	const units = "KMGTPE"
	i := 0
	d := uint64(1024)
	for u/d >= 1024 && i < len(units)-1 {
		d *= 1024
		i++
	}
	if u >= 1<<53 {
		b = strconv.AppendFloat(b, float64(u)/float64(d), 'f', 1, 64)
		return append(b, ' ', units[i], 'i', 'B')
	}
	q, r := u*10/d, u*10%d
	if 2*r > d || (2*r == d && q%2 == 1) {
		q++
	}
	b = strconv.AppendUint(b, q/10, 10)
	return append(b, '.', byte('0'+q%10), ' ', units[i], 'i', 'B')
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
	t.start()
	if !t.printed {
		// heaptrack writes its header after the snapshots.
		t.writeHeader(h)
	}
	if !t.needCols {
		t.w.WriteByte('\n') // after a row, as after a tree
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
