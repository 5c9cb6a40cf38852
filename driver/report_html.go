package driver

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

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
	opts := snapshots.HTMLOptions{Facts: runFacts(res), MaxSites: shownSites, MaxFrames: res.MaxFrames()}
	if measuredNothing(res.Manifest) {
		opts.Facts = append([]snapshots.Fact{{Label: "Verdict", Value: "nothing measured: " + whyNothing(res.Manifest)}}, opts.Facts...)
		opts.NoSites = true
	} else if s.native == nil {
		if more := moreDiffs(res); more != "" {
			opts.Notes = append(opts.Notes, more)
		}
	} else {
		// A run that did not complete says so first, then the verdicts,
		// as in the other reports; per-site diffs are massif's.
		var lead []snapshots.Fact
		for i, v := range nativeVerdicts(res.Manifest) {
			label := "Verdict"
			if i == 0 && res.Manifest.Status != runjson.StatusCompleted {
				label = "Run"
			}
			lead = append(lead, snapshots.Fact{Label: label, Value: v})
		}
		opts.Facts = append(lead, opts.Facts...)
		opts.NoSites = true
		opts.Notes = append(opts.Notes,
			fmt.Sprintf("run.json's diffs hold the %s between consecutive measurements of a breakpoint (and within around_call's calls) as memory_delta; the charts draw every measurement.", plural(res.Diffs, "change")),
			"The native backend measures resident memory and glibc's allocator at each stop; per-site diffs are massif's job: rerun with --backend massif for the call sites.")
	}
	return writeFileAtomicFunc(filepath.Join(s.dir, htmlFile), func(w io.Writer) error {
		return snapshots.RenderReportHTML(w, &rep, opts)
	})
}

// shownSites is how many sites report.html lists per diff.
const shownSites = 20

// runFacts is the header of report.html: what ran and how it ended.
func runFacts(res *Result) []snapshots.Fact {
	m := res.Manifest
	facts := []snapshots.Fact{
		{Label: "Command", Value: strings.Join(m.Target.Argv, " ")},
		{Label: "Status", Value: string(m.Status) + exitNote(m)},
	}
	if m.Error != "" {
		facts = append(facts, snapshots.Fact{Label: "Error", Value: m.Error})
	}
	facts = append(facts, snapshots.Fact{Label: "Stops", Value: strconv.Itoa(res.Stops)})
	if m.Native != nil && m.Native.TrimProbe {
		facts = append(facts, snapshots.Fact{Label: "native.trim_probe", Value: "on: every stop called malloc_trim(0) after measuring"})
	}
	for _, b := range m.Breakpoints {
		value := fmt.Sprintf("%s: %s, %s%s", b.Location, plural(b.Hits, "hit"), plural(b.Snapshots, "snapshot"), unchangedNote(b))
		if m.Backend == BackendNative {
			value = b.Location + ": " + nativeBreakpoint(m, b)
		}
		facts = append(facts, snapshots.Fact{Label: "Breakpoint " + b.Name, Value: value})
	}
	return facts
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
		var st runjson.Stop
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
	for _, name := range s.an.order {
		e := series[name]
		if e == nil || e.first == e.last {
			continue
		}
		first, err1 := s.snapshotTree(e.firstFile)
		last, err2 := s.snapshotTree(e.lastFile)
		if err1 != nil || err2 != nil {
			continue
		}
		growth = append(growth, snapshots.Growth{Breakpoint: name, FromSeq: e.first, ToSeq: e.last,
			Root: snapshots.GrowthFlameTrees(first, last, s.an.opts)})
	}
	return points, growth, nil
}

// snapshotTree reads the tree of a kept snapshot file, its first
// snapshot's (an xtmemory file's curB).
func (s *session) snapshotTree(file string) (*snapshots.HeapTree, error) {
	if file == "" {
		return nil, fmt.Errorf("no snapshot file")
	}
	f, err := os.Open(filepath.Join(s.dir, file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return snapshots.ReadFirstTree(f, file, s.frameTable())
}
