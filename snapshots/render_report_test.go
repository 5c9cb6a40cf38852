package snapshots

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// cppInsert is the kind of name a C++ service's leak is found at: 480
// characters of demangled template signature.
const cppInsert = "std::pair<std::__detail::_Node_iterator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const, cache::Entry>, false, true>, bool> " +
	"cache::Store<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::shared_ptr<cache::Value>, cache::LruPolicy<std::chrono::duration<long, std::ratio<1l, 1000000000l> > > >::insert_or_assign(" +
	"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, std::shared_ptr<cache::Value>&&, " +
	"std::chrono::time_point<std::chrono::_V2::steady_clock, std::chrono::duration<long, std::ratio<1l, 1000000000l> > >)"

// cppReport is the analysis of a 4-thread C++ service with one leak: the
// suspect gains two blocks of 50 B per command, churn beside it frees
// and allocates 1.5 MiB; a second breakpoint never saw a site change in
// 12 intervals.
func cppReport() *Report {
	site := Frame{Function: cppInsert, File: "store.hpp", Line: 86}
	leak := []Frame{site,
		{Function: "process_get_command(conn*, token_t*, unsigned long, bool)", File: "proto_text.cpp", Line: 412},
		{Function: "dispatch(conn*)", File: "proto_text.cpp", Line: 90},
		{Function: "worker_main(void*)", File: "thread.cpp", Line: 31},
		{Function: "start_thread", File: "pthread_create.c", Line: 442},
		{Function: "clone", File: "clone.S", Line: 100},
	}
	churn := []Frame{{Function: "conn_read(conn*)", File: "conn.cpp", Line: 55},
		{Function: "dispatch(conn*)", File: "proto_text.cpp", Line: 71},
		{Function: "worker_main(void*)", File: "thread.cpp", Line: 31},
	}
	lib := []Frame{{Function: "operator new(unsigned long)", File: "new_op.cc", Line: 50}}
	blocksPerHit, bytesPerBlock, totalBlocks := 2.0, int64(50), int64(66)
	r := &Report{
		Title:       "snapctl run: cached",
		Breakpoints: []string{"command", "idle"},
		Suspects: []Suspect{{Frame: site, Stack: leak, Library: lib, Breakpoint: "command", Pattern: PatternSteady,
			GrowthPerHit: 100, GrowthPerInterval: 100, BlocksPerHit: &blocksPerHit, BytesPerBlock: &bytesPerBlock,
			GrowingIntervals: 33, Intervals: 33, Hits: 33, TotalGrowth: 3300, TotalBlocks: &totalBlocks}},
		Intervals: []IntervalCount{
			{Breakpoint: "command", Kind: "between-hits", Diffs: 33, Unchanged: 0, FromSeq: 1, ToSeq: 46, BeforeBytes: 2936012, AfterBytes: 3045580},
			{Breakpoint: "idle", Kind: "between-hits", Diffs: 12, Unchanged: 12, FromSeq: 2, ToSeq: 45, BeforeBytes: 2936112, AfterBytes: 2939412},
		},
	}
	r.Intervals[0].Largest = &Diff{Kind: "between-hits", Breakpoint: "command", FromSeq: 12, ToSeq: 13, DeltaBytes: 1572964}
	// The churn frees its 1.5 MiB in one interval and takes it again in
	// another, while the leak gains its 100 B in each.
	for i, churnDelta := range []int64{-1572864, 1572864} {
		from := 7 + i*5
		before := int64(4200000)
		if churnDelta > 0 {
			before = 2800000
		}
		delta := churnDelta + 100
		d := &Diff{Kind: "between-hits", Breakpoint: "command", FromSeq: from, ToSeq: from + 1, BeforeBytes: before, AfterBytes: before + delta, DeltaBytes: delta, SitesDeltaBytes: delta,
			Sites: []SiteDelta{
				{Frame: churn[0], Stack: churn, Library: lib, Before: 1572864, After: 0, Delta: churnDelta, Change: ChangeVanished,
					SiteBlocks: &SiteBlocks{BeforeBlocks: 384, AfterBlocks: 0, DeltaBlocks: -384}},
				{Frame: site, Stack: leak, Library: lib, Before: int64(1000 + 500*i), After: int64(1100 + 500*i), Delta: 100, Change: ChangeGrown,
					SiteBlocks: &SiteBlocks{BeforeBlocks: int64(20 + 10*i), AfterBlocks: int64(22 + 10*i), DeltaBlocks: 2}},
			}}
		if churnDelta > 0 {
			d.Sites[0].Before, d.Sites[0].After, d.Sites[0].Change = 0, 1572864, ChangeNew
			d.Sites[0].SiteBlocks = &SiteBlocks{BeforeBlocks: 0, AfterBlocks: 384, DeltaBlocks: 384}
		}
		r.Diffs = append(r.Diffs, d)
	}
	return r
}

// One leak of a C++ service on one screen: its bytes per block, the name
// shortened, each stack once, the intervals counted, churn's diffs
// limited.
func TestRenderReportCppGolden(t *testing.T) {
	r := cppReport()
	for f, ext := range map[Format]string{FormatText: "txt", FormatMarkdown: "md"} {
		var b bytes.Buffer
		if err := RenderReport(&b, r, f, RenderOptions{MaxSites: 10, MaxFrames: 12, MaxDiffs: 3}); err != nil {
			t.Fatal(err)
		}
		checkAnalysisGolden(t, "report-cpp."+ext, b.Bytes())
		if n := strings.Count(b.String(), "process_get_command"); n != 1 {
			t.Errorf("%s: the suspect's stack is printed %d times, want once:\n%s", f, n, b.String())
		}
		// Headlines and table rows shorten the name; report.md's stacks
		// keep it whole, as run.json does.
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.Contains(line, "insert_or_assign(std::") && !strings.HasPrefix(line, "→  ") {
				t.Errorf("%s: the suspect's name is not shortened in %q", f, line)
			}
		}
	}
	var b bytes.Buffer
	if err := RenderReportHTML(&b, r, HTMLOptions{MaxSites: 20, MaxFrames: 12}); err != nil {
		t.Fatal(err)
	}
	checkAnalysisGolden(t, "report-cpp.html", b.Bytes())
	if n := strings.Count(b.String(), "process_get_command"); n != 1 {
		t.Errorf("report.html prints the suspect's stack %d times, want once", n)
	}
	// The suspect's stack is open; the churn's, further down, is not.
	if !strings.Contains(b.String(), `<details open id="s1"><summary>s1: <code>cache::Store&lt;…&gt;::insert_or_assign(…)</code> store.hpp:86</summary>`) ||
		!strings.Contains(b.String(), `<details id="s2"><summary>s2: <code>conn_read(conn*)</code> conn.cpp:55</summary>`) {
		t.Errorf("stacks of report.html:\n%s", b.String())
	}
	// A breakpoint whose intervals changed nothing still has its line.
	if !strings.Contains(b.String(), "<li>12 intervals between hits (stops 2 → 45): heap 2.8 MiB → 2.8 MiB (+3.2 KiB); no site changed in any.</li>") {
		t.Errorf("report.html does not count breakpoint idle's intervals:\n%s", b.String())
	}
}

// A name too long for a line once its templates are folded keeps its
// qualified name and folds its parameters; run.json has it whole.
func TestShortNameLong(t *testing.T) {
	for in, want := range map[string]string{
		cppInsert:    "cache::Store<…>::insert_or_assign(…)",
		"short(int)": "short(int)",
		"a::very::deeply::nested::namespace_that::goes::on::and_on::and_on::and_on::for_ever::and_ever::amen::f(int, int, int)": "…amespace_that::goes::on::and_on::and_on::and_on::for_ever::and_ever::amen::f(…)",
	} {
		got := shortName(in)
		if got != want {
			t.Errorf("shortName(%.40q…) = %q, want %q", in, got, want)
		}
		if n := utf8.RuneCountInString(got); n > maxNameRunes {
			t.Errorf("shortName(%.40q…) has %d runes", in, n)
		}
	}
	if got := ShortFrame(Frame{Function: cppInsert, File: "store.hpp", Line: 86}); got != "cache::Store<…>::insert_or_assign(…) (store.hpp:86)" {
		t.Errorf("ShortFrame = %q", got)
	}
}

// A 2.4 KiB leak beside 1.5 MiB freed by churn: the growth graph is as
// wide as what grew, so the leak's box fills it and carries its
// file:line; the freed bytes get a graph of their own.
func TestFlameSmallLeakBesideChurn(t *testing.T) {
	leak := &FlameNode{Name: "leak_record", Frames: []Frame{{Function: "leak_record", File: "src/leak.c", Line: 29}}, Grown: 2458}
	churn := &FlameNode{Name: "churn", Frames: []Frame{{Function: "churn", File: "src/leak.c", Line: 40}}, Shrunk: 1572864}
	main := &FlameNode{Name: "main", Frames: []Frame{{Function: "main", File: "src/leak.c", Line: 60}}, Grown: 2458, Shrunk: 1572864,
		Children: []*FlameNode{churn, leak}}
	root := &FlameNode{Name: "all", Grown: 2458, Shrunk: 1572864, Children: []*FlameNode{main}}
	r := &Report{Growth: []Growth{{Breakpoint: "request", FromSeq: 1, ToSeq: 9, Root: root}}}
	var b bytes.Buffer
	if err := RenderReportHTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	grown, freed, ok := strings.Cut(page, "<summary>Freed: 1.5 MiB</summary>")
	if !ok {
		t.Fatalf("no graph of the freed bytes:\n%s", page)
	}
	if !strings.Contains(grown, `<h4>Grown: 2.4 KiB</h4>`) ||
		!strings.Contains(grown, `<rect x="0.0" y="36" width="960.0" height="17"/><text x="3.0" y="49">leak_record leak.c:29</text>`) {
		t.Errorf("the leak does not fill the growth graph:\n%s", grown)
	}
	if strings.Contains(grown, "churn leak.c:40") {
		t.Errorf("the churn's box is in the growth graph:\n%s", grown)
	}
	if !strings.Contains(freed, `<rect x="0.0" y="36" width="960.0" height="17"/><text x="3.0" y="49">churn leak.c:40</text>`) {
		t.Errorf("the churn does not fill the graph of freed bytes:\n%s", freed)
	}
}

// +107 KiB on a heap of 2.8 MiB: the chart's axis runs from the lowest
// value drawn to the highest, not from 0, and the page says the change.
func TestHeapChartAxisShowsGrowth(t *testing.T) {
	r := &Report{}
	for i := 0; i < 5; i++ {
		r.Stops = append(r.Stops, StopPoint{Seq: i + 1, Breakpoint: "command", Hit: i + 1, Phase: "hit", HeapBytes: 2936012 + int64(i)*27392})
	}
	var b bytes.Buffer
	if err := RenderReportHTML(&b, r, HTMLOptions{}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<p>Heap 2.8 MiB at stop 1, 2.9 MiB at stop 5 (<strong>+107.0 KiB</strong>).</p>`,
		`<text x="55.0" y="14.0" text-anchor="end">2.9 MiB</text>`,
		`<text x="55.0" y="154.0" text-anchor="end">2.8 MiB</text>`,
		// The first stop at the bottom of the chart, the last at its top.
		`<polyline class="line heap" points="63.0,150.0 225.8,115.0 388.5,80.0 551.2,45.0 714.0,10.0">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the heap chart lacks %s:\n%s", want, page)
		}
	}
}
