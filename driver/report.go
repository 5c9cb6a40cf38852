package driver

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"

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
}

func (t *thinned) add(p snapshots.StopPoint) {
	if t.n%t.step == 0 {
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
	t.last = p
}

// all returns the stops kept, the last one always among them.
func (t *thinned) all() []snapshots.StopPoint {
	if n := len(t.points); n > 0 && t.points[n-1].Seq != t.last.Seq {
		return append(t.points, t.last)
	}
	return t.points
}

// timelineStop is what timeline reads of a spooled stop (runjson.Stop):
// only the fields the page draws, so that reading every stop of a long
// run back does not decode and drop the backtraces and threads of each
// (garbage that grows with the stops, docs/facts.md, fact 123).
type timelineStop struct {
	Seq        int    `json:"seq"`
	Breakpoint string `json:"breakpoint"`
	Hit        int    `json:"hit"`
	Phase      string `json:"phase"`
	Time       string `json:"time"`
	Thread     struct {
		ID       string `json:"id"`
		TargetID string `json:"target_id"`
	} `json:"thread"`
	Snapshot       string          `json:"snapshot"`
	HeapBytes      int64           `json:"heap_bytes"`
	HeapExtraBytes int64           `json:"heap_extra_bytes"`
	StacksBytes    int64           `json:"stacks_bytes"`
	Memory         *runjson.Memory `json:"memory"`
}

// timeline reads the spooled stops into the page's points (at most
// timelinePoints per breakpoint) and diffs the first and last hit
// snapshot of every breakpoint. A snapshot that cannot be read leaves its
// breakpoint without a growth graph: the page is a view, and run.json
// already says what went wrong.
func (s *session) timeline() ([]snapshots.StopPoint, []snapshots.Growth, error) {
	byBp := make(map[string]*thinned)
	var order []string
	// The file of the last kept snapshot of each breakpoint and phase:
	// a stop's same_as_seq names it (see session.remember).
	type phaseKey struct{ bp, phase string }
	lastFile := make(map[phaseKey]string)
	type ends struct {
		first, last         int
		firstFile, lastFile string
	}
	series := make(map[string]*ends)
	err := s.rec.stops.each(func(line []byte) error {
		var st timelineStop
		if err := json.Unmarshal(line, &st); err != nil {
			return fmt.Errorf("reading spooled stop: %w", err)
		}
		thread := st.Thread.ID
		if st.Thread.TargetID != "" {
			thread += " (" + st.Thread.TargetID + ")"
		}
		p := snapshots.StopPoint{Seq: st.Seq, Breakpoint: st.Breakpoint, Hit: st.Hit, Phase: st.Phase,
			Time: st.Time, Thread: thread, HeapBytes: st.HeapBytes, HeapExtraBytes: st.HeapExtraBytes, StacksBytes: st.StacksBytes}
		if m := st.Memory; m != nil {
			p.Memory = &snapshots.MemoryPoint{RSSBytes: m.RSSBytes, HeapInUseBytes: m.HeapInUseBytes, HeapFreeBytes: m.HeapFreeBytes,
				Arenas: m.Arenas, TrimReleasedBytes: m.TrimReleasedBytes}
		}
		th := byBp[st.Breakpoint]
		if th == nil {
			th = &thinned{step: 1}
			byBp[st.Breakpoint] = th
			order = append(order, st.Breakpoint)
		}
		th.add(p)
		k := phaseKey{st.Breakpoint, st.Phase}
		file := st.Snapshot
		if file == "" {
			file = lastFile[k]
		} else {
			lastFile[k] = file
		}
		if st.Phase != "hit" {
			return nil
		}
		if e := series[st.Breakpoint]; e != nil {
			e.last, e.lastFile = st.Seq, file
		} else {
			series[st.Breakpoint] = &ends{st.Seq, st.Seq, file, file}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var points []snapshots.StopPoint
	for _, bp := range order {
		points = append(points, byBp[bp].all()...)
	}
	// In the order taken, as the page lists the breakpoints.
	sort.Slice(points, func(i, j int) bool { return points[i].Seq < points[j].Seq })
	var growth []snapshots.Growth
	for _, bp := range s.plan.Breakpoints {
		e := series[bp.Name]
		if e == nil || e.first == e.last {
			continue
		}
		if root := s.backend.Growth(e.firstFile, e.lastFile); root != nil {
			growth = append(growth, snapshots.Growth{Breakpoint: bp.Name, FromSeq: e.first, ToSeq: e.last, Root: root})
		}
	}
	return points, growth, nil
}
