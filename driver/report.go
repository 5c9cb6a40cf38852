package driver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// WriteText prints the run's report for the terminal, as its backend
// renders it (massif: the verdict, how the run ended, the stops per
// breakpoint, then the suspects and the diffs with the largest heap
// changes, and how many more diffs run.json holds).
func WriteText(w io.Writer, res *Result, opts snapshots.RenderOptions) error {
	return reporter(res.Manifest).Text(w, res.outcome(), opts)
}

// reporter returns the backend that renders the reports of a run.
func reporter(m *runjson.Manifest) backend.Reporter {
	i, err := newBackend(m.Backend)
	if err != nil {
		i = 0
	}
	return backends[i].new(backend.Config{Plan: &plan.Plan{}})
}

// outcome is the run as the backends' report sections take it.
func (r *Result) outcome() *backend.Outcome {
	return &backend.Outcome{Dir: r.Dir, Manifest: r.Manifest, Report: r.Report, Stops: r.Stops, Diffs: r.Diffs, MaxFrames: r.MaxFrames()}
}

// MaxFrames is the number of callers shown per stack in the run's reports:
// the plan's report.depth (0 shows whole stacks), or its default when the
// Result has no plan.
func (r *Result) MaxFrames() int {
	if r.Plan == nil {
		return plan.DefaultReportDepth
	}
	return r.Plan.Report.Depth
}

// writeReport writes report.md: a summary of the run, then the analysis,
// as the run's backend renders them. It is written through a temporary
// file and a rename, so that a report.md that exists is complete.
func writeReport(path string, res *Result) error {
	return writeFileAtomicFunc(path, func(w io.Writer) error {
		return reporter(res.Manifest).Markdown(w, res.outcome())
	})
}

// htmlFile is report.html in the run directory.
const htmlFile = "report.html"

// writeHTML writes report.html: the report with what only the page draws,
// the heap at every stop and each breakpoint's growth from its first
// snapshot to its last. The stops are read back from the spool and the two
// snapshots of each breakpoint from the run directory, so the session
// holds none of it while the target runs.
func (s *session) writeHTML(res *Result) error {
	rep := *res.Report
	var err error
	rep.Stops, rep.Growth, err = s.timeline()
	if err != nil {
		return err
	}
	opts := snapshots.HTMLOptions{MaxSites: backend.ShownSites, MaxFrames: res.MaxFrames()}
	s.backend.HTML(&opts, res.outcome())
	if backend.MeasuredNothing(res.Manifest) {
		opts.Facts = append([]snapshots.Fact{{Label: "Verdict", Value: "nothing measured: " + backend.WhyNothing(res.Manifest)}}, opts.Facts...)
		opts.NoSites = true
	}
	return writeFileAtomicFunc(filepath.Join(s.out.dir, htmlFile), func(w io.Writer) error {
		return snapshots.RenderReportHTML(w, &rep, opts)
	})
}

// timelinePoints bounds the stops report.html draws per breakpoint: of
// more, every second, fourth... stop is drawn, evenly spaced, and the last
// one, so that snapctl's memory does not grow with the number of stops (a
// chart is 600 pixels wide; run.json has every stop).
const timelinePoints = 2000

// thinned keeps at most timelinePoints of a breakpoint's stops, evenly
// spaced, as they come.
type thinned struct {
	points []snapshots.StopPoint
	step   int // keep every step-th stop
	n      int // stops seen
	last   snapshots.StopPoint
	// lastLine is the last stop's spooled record when skip passed it by
	// undecoded: timeline decodes it once the stops are read.
	lastLine []byte
}

// keeps reports whether add would keep the next stop.
func (t *thinned) keeps() bool { return t.n%t.step == 0 }

func (t *thinned) add(p snapshots.StopPoint) {
	if t.keeps() {
		t.points = append(t.points, p)
		if len(t.points) > timelinePoints {
			kept := t.points[:0]
			for i := 0; i < len(t.points); i += 2 {
				kept = append(kept, t.points[i])
			}
			clear(t.points[len(kept):])
			t.points, t.step = kept, 2*t.step
		}
	}
	t.n++
	t.last, t.lastLine = p, t.lastLine[:0]
}

// skip passes by a stop that add would not keep, its record copied into a
// buffer kept from stop to stop, in case it is the last.
func (t *thinned) skip(line []byte) {
	t.n++
	t.lastLine = append(t.lastLine[:0], line...)
}

// all returns the stops kept, the last one always among them.
func (t *thinned) all() []snapshots.StopPoint {
	if n := len(t.points); n > 0 && t.points[n-1].Seq != t.last.Seq {
		return append(t.points, t.last)
	}
	return t.points
}

// timelineStop is what timeline reads of a spooled stop (runjson.Stop):
// only the fields the page draws, so that reading the stops of a long run
// back does not decode and drop the backtraces and threads of each
// (garbage that grows with the stops, docs/facts.md, fact 123); and each
// as raw JSON into a buffer kept from stop to stop (json.RawMessage
// reuses its own), so that a stop the page does not draw makes no garbage
// at all and one it draws only its point (fact 136).
type timelineStop struct {
	Seq        int             `json:"seq"`
	Breakpoint json.RawMessage `json:"breakpoint"`
	Hit        int             `json:"hit"`
	Phase      json.RawMessage `json:"phase"`
	Time       json.RawMessage `json:"time"`
	Thread     struct {
		ID       json.RawMessage `json:"id"`
		TargetID json.RawMessage `json:"target_id"`
	} `json:"thread"`
	Snapshot       json.RawMessage `json:"snapshot"`
	HeapBytes      int64           `json:"heap_bytes"`
	HeapExtraBytes int64           `json:"heap_extra_bytes"`
	StacksBytes    int64           `json:"stacks_bytes"`
	// Memory is runjson.Memory's figures the page draws; rss_bytes is
	// there whenever the stop has a memory.
	Memory struct {
		RSSBytes          json.RawMessage `json:"rss_bytes"`
		HeapInUseBytes    json.RawMessage `json:"heap_in_use_bytes"`
		HeapFreeBytes     json.RawMessage `json:"heap_free_bytes"`
		Arenas            json.RawMessage `json:"arenas"`
		TrimReleasedBytes json.RawMessage `json:"trim_released_bytes"`
	} `json:"memory"`
}

// read decodes a spooled stop into st, through dec, over what st held.
func (st *timelineStop) read(dec *lineDecoder, line []byte) error {
	m := &st.Memory
	st.Seq, st.Hit, st.HeapBytes, st.HeapExtraBytes, st.StacksBytes = 0, 0, 0, 0, 0
	for _, raw := range []*json.RawMessage{&st.Breakpoint, &st.Phase, &st.Time, &st.Thread.ID, &st.Thread.TargetID, &st.Snapshot,
		&m.RSSBytes, &m.HeapInUseBytes, &m.HeapFreeBytes, &m.Arenas, &m.TrimReleasedBytes} {
		*raw = (*raw)[:0]
	}
	if err := dec.decode(line, st); err != nil {
		return fmt.Errorf("reading spooled stop: %w", err)
	}
	return nil
}

// heldMemory holds a point's memory figures and what they point at: one
// allocation a point.
type heldMemory struct {
	point             snapshots.MemoryPoint
	inUse, free, trim int64
	arenas            int
}

// point is the page's point of the stop st holds, of the breakpoint bp.
func (st *timelineStop) point(bp string) snapshots.StopPoint {
	phase := runjson.PhaseHit
	if raw := rawStringBytes(st.Phase); string(raw) != runjson.PhaseHit {
		phase = string(raw)
	}
	thread := string(rawStringBytes(st.Thread.ID))
	if id := rawStringBytes(st.Thread.TargetID); len(id) > 0 {
		thread += " (" + string(id) + ")"
	}
	p := snapshots.StopPoint{Seq: st.Seq, Breakpoint: bp, Hit: st.Hit, Phase: phase, Time: string(rawStringBytes(st.Time)),
		Thread: thread, HeapBytes: st.HeapBytes, HeapExtraBytes: st.HeapExtraBytes, StacksBytes: st.StacksBytes}
	m := &st.Memory
	rss, ok := rawInt(m.RSSBytes)
	if !ok {
		return p
	}
	h := &heldMemory{}
	h.point.RSSBytes = rss
	if v, ok := rawInt(m.HeapInUseBytes); ok {
		h.inUse, h.point.HeapInUseBytes = v, &h.inUse
	}
	if v, ok := rawInt(m.HeapFreeBytes); ok {
		h.free, h.point.HeapFreeBytes = v, &h.free
	}
	if v, ok := rawInt(m.Arenas); ok {
		h.arenas, h.point.Arenas = int(v), &h.arenas
	}
	if v, ok := rawInt(m.TrimReleasedBytes); ok {
		h.trim, h.point.TrimReleasedBytes = v, &h.trim
	}
	p.Memory = &h.point
	return p
}

// rawInt is the integer a JSON number given raw holds; false for none
// (absent or null).
func rawInt(raw json.RawMessage) (int64, bool) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	return v, err == nil
}

// lineDecoder decodes one spooled record after another through one
// json.Decoder, whose buffer and state are kept from record to record
// (json.Unmarshal makes its state anew for each).
type lineDecoder struct {
	line []byte
	dec  *json.Decoder
}

func (l *lineDecoder) Read(p []byte) (int, error) {
	if len(l.line) == 0 {
		return 0, io.EOF
	}
	n := copy(p, l.line)
	l.line = l.line[n:]
	return n, nil
}

// decode decodes a record, a whole JSON object, into v. A record that is
// not one leaves the decoder failing from then on.
func (l *lineDecoder) decode(line []byte, v any) error {
	if l.dec == nil {
		l.dec = json.NewDecoder(l)
	}
	l.line = line
	return l.dec.Decode(v)
}

// rawString is the string a JSON string given raw holds; "" for none.
func rawString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 {
		json.Unmarshal(raw, &s)
	}
	return s
}

// bpTimeline is what timeline gathers of one breakpoint's stops: the
// points drawn, the last kept snapshot of each phase (a stop's
// same_as_seq names it, see session.remember), and its first and last hit
// with their snapshots, in buffers kept from stop to stop.
type bpTimeline struct {
	name                string
	th                  thinned
	files               []phaseFile
	hits                bool // whether first and last are set
	first, last         int
	firstFile, lastFile []byte
}

type phaseFile struct{ phase, file []byte }

// file notes the stop's snapshot, or returns the last one of its phase
// when it has none.
func (b *bpTimeline) file(phase, snapshot []byte) []byte {
	i := 0
	for i < len(b.files) && !bytes.Equal(b.files[i].phase, phase) {
		i++
	}
	if i == len(b.files) {
		b.files = append(b.files, phaseFile{phase: bytes.Clone(phase)})
	}
	if len(snapshot) > 0 {
		b.files[i].file = append(b.files[i].file[:0], snapshot...)
	}
	return b.files[i].file
}

// timeline reads the spooled stops into the page's points (at most
// timelinePoints per breakpoint) and diffs the first and last hit
// snapshot of every breakpoint. A snapshot that cannot be read leaves its
// breakpoint without a growth graph: the page is a view, and run.json
// already says what went wrong. Only the stops drawn are decoded whole:
// the others cost no allocation, so that what the end of a run makes
// does not grow with its stops (docs/facts.md, fact 136).
func (s *session) timeline() ([]snapshots.StopPoint, []snapshots.Growth, error) {
	byBp := make(map[string]*bpTimeline) // by the breakpoint's raw JSON
	var order []*bpTimeline
	var dec lineDecoder
	var st timelineStop
	hit := []byte(`"` + runjson.PhaseHit + `"`)
	err := s.rec.stops.each(func(line []byte) error {
		if err := st.read(&dec, line); err != nil {
			return err
		}
		b := byBp[string(st.Breakpoint)]
		if b == nil {
			b = &bpTimeline{name: rawString(st.Breakpoint), th: thinned{step: 1}}
			byBp[string(st.Breakpoint)] = b
			order = append(order, b)
		}
		if b.th.keeps() {
			b.th.add(st.point(b.name))
		} else {
			b.th.skip(line)
		}
		file := b.file(st.Phase, rawStringBytes(st.Snapshot))
		if !bytes.Equal(st.Phase, hit) {
			return nil
		}
		if !b.hits {
			b.hits, b.first, b.firstFile = true, st.Seq, bytes.Clone(file)
		}
		b.last, b.lastFile = st.Seq, append(b.lastFile[:0], file...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var points []snapshots.StopPoint
	series := make(map[string]*bpTimeline)
	for _, b := range order {
		if len(b.th.lastLine) > 0 {
			if err := st.read(&dec, b.th.lastLine); err != nil {
				return nil, nil, err
			}
			b.th.last = st.point(b.name)
		}
		points = append(points, b.th.all()...)
		series[b.name] = b
	}
	// In the order taken, as the page lists the breakpoints.
	sort.Slice(points, func(i, j int) bool { return points[i].Seq < points[j].Seq })
	var growth []snapshots.Growth
	for _, bp := range s.plan.Breakpoints {
		e := series[bp.Name]
		if e == nil || !e.hits || e.first == e.last {
			continue
		}
		if root := s.backend.Growth(string(e.firstFile), string(e.lastFile)); root != nil {
			growth = append(growth, snapshots.Growth{Breakpoint: bp.Name, FromSeq: e.first, ToSeq: e.last, Root: root})
		}
	}
	return points, growth, nil
}

// rawStringBytes is the bytes of a JSON string given raw, without its
// quotes, in place when it holds no escape (a snapshot's file name);
// nil for none.
func rawStringBytes(raw json.RawMessage) []byte {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	return []byte(rawString(raw))
}
