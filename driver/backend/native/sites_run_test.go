package native_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// sitesPlan stops at round_done of heaptrack/testdata/sites.c: its four
// threads keep, per round, 4 blocks of 24 to 27 bytes (keep_small), 4
// blocks of 1,000 (keep_table) and grow a buffer each by 64 bytes
// (grow_buffer), and free what scratch allocates.
const sitesPlan = "backend: %s\nnative:\n  sites: true\nbreakpoints:\n  - name: round\n    location: round_done\n"

// massifPlan is sitesPlan under massif, which records the sites itself.
const massifPlan = "backend: massif\nbreakpoints:\n  - name: round\n    location: round_done\n"

// siteFigures are a run's suspects by function: growth per hit, blocks
// per hit and total growth.
func siteFigures(m *runjson.Manifest) map[string]string {
	out := map[string]string{}
	for _, s := range m.Suspects {
		blocks := "?"
		if s.BlocksPerHit != nil {
			blocks = fmt.Sprint(*s.BlocksPerHit)
		}
		out[s.Frame.Function] = fmt.Sprintf("%s:%d %d B/hit %s blocks/hit %d B in all over %d intervals", filepath.Base(s.Frame.File), s.Frame.Line, s.GrowthPerHit, blocks, s.TotalGrowth, s.Intervals)
	}
	return out
}

// TestSitesRun: natively, with heaptrack recording, each of the four
// threads' sites is a suspect with the exact bytes and blocks it keeps
// per round, on both stop paths, next to the native verdict; every stop
// has its snapshot, kept as massif's are.
func TestSitesRun(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../../heaptrack/testdata/sites.c")
	want := map[string]string{
		"keep_table":  "sites.c:20 4000 B/hit 4 blocks/hit 20000 B in all over 5 intervals",
		"keep_small":  "sites.c:19 102 B/hit 4 blocks/hit 510 B in all over 5 intervals",
		"grow_buffer": "sites.c:21 256 B/hit 0 blocks/hit 1280 B in all over 5 intervals",
	}
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var out testenv.Buffer
			res, m, err := runNative(t, driver.Options{NoAgent: p.noAgent, Streams: driver.Streams{Stdout: &out}}, fmt.Sprintf(sitesPlan, "native"), bin, "6")
			if err != nil {
				t.Fatal(err)
			}
			if m.Native == nil || !m.Native.Sites || len(m.Stops) != 6 {
				t.Fatalf("native %+v, %d stops", m.Native, len(m.Stops))
			}
			for _, s := range m.Stops {
				if s.Memory == nil || s.Snapshot == "" {
					t.Fatalf("stop %d: snapshot %q; events %+v", s.Seq, s.Snapshot, m.Events)
				}
				if _, err := os.Stat(filepath.Join(res.Dir, s.Snapshot)); err != nil {
					t.Errorf("stop %d: %v", s.Seq, err)
				}
			}
			if diff := cmp.Diff(want, siteFigures(m)); diff != "" {
				t.Errorf("suspects (-want +got):\n%s", diff)
				for _, s := range m.Stops {
					t.Logf("stop %d hit %d %s %s heap %d", s.Seq, s.Hit, s.Phase, s.Snapshot, s.HeapBytes)
				}
				t.Logf("events %+v", m.Events)
				t.Logf("suspects %+v", m.Suspects)
			}
			if len(m.Verdicts) != 1 || m.Verdicts[0].Verdict != runjson.VerdictLeak {
				t.Errorf("verdicts %+v", m.Verdicts)
			}
			if strings.Contains(m.Verdicts[0].Sentence, "--backend massif") {
				t.Errorf("the verdict sends the user to massif: %s", m.Verdicts[0].Sentence)
			}
		})
	}
}

// TestSitesCutInPlace: with heaptrack recording, gdb stops every thread
// before a breakpoint's stop() runs (its target out of non-stop mode), so
// gdb's agent measures and cuts the stream there, and gdb reports no stop
// to snapctl: at most one of the six, should heaptrack's timer thread
// hold its lock at a stop. Every stop still has the round's exact
// blocks.
func TestSitesCutInPlace(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../testdata/native/leak.c")
	res, m, err := runNative(t, driver.Options{Trace: true}, "backend: native\nnative:\n  sites: true\nbreakpoints:\n  - name: round\n    location: round_done\n", bin, "100")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Stops) != 6 {
		t.Fatalf("%d stops, want 6; events %+v", len(m.Stops), m.Events)
	}
	mi, err := os.ReadFile(filepath.Join(res.Dir, traceFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(mi), `*stopped,reason="breakpoint-hit"`); n > 1 {
		t.Errorf("gdb reported %d of the 6 stops to snapctl, want at most 1: the agent did not cut in place", n)
	}
	line := testenv.LineOf(t, "../../testdata/native/leak.c", "malloc(100)")
	want := map[string]string{"main": fmt.Sprintf("leak.c:%d 10000 B/hit 100 blocks/hit 50000 B in all over 5 intervals", line)}
	if diff := cmp.Diff(want, siteFigures(m)); diff != "" {
		t.Errorf("suspects (-want +got):\n%s\nevents %+v", diff, m.Events)
	}
}

// TestSitesEqualMassifRun: the same program and plan under massif and
// natively with sites give the same suspects, figure for figure.
func TestSitesEqualMassifRun(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack", "valgrind")
	bin := testenv.Build(t, "../../../heaptrack/testdata/sites.c")
	_, native, err := runNative(t, driver.Options{}, fmt.Sprintf(sitesPlan, "native"), bin, "6")
	if err != nil {
		t.Fatal(err)
	}
	res, err := runPlan(t, massifPlan, bin, "6")
	if err != nil {
		t.Fatal(err)
	}
	massif := readManifest(t, res.Dir)
	got, want := siteFigures(native), siteFigures(massif)
	if len(want) != 3 {
		t.Fatalf("massif's suspects: %v", want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sites against massif (-massif +sites):\n%s", diff)
	}
	// The stacks too, frame by frame in the fixture.
	stacks := func(m *runjson.Manifest) []string {
		var out []string
		for _, s := range m.Suspects {
			var fs []string
			for _, f := range s.Stack {
				if filepath.Base(f.File) == "sites.c" {
					fs = append(fs, snapshots.FrameString(f))
				}
			}
			out = append(out, strings.Join(fs, " < "))
		}
		sort.Strings(out)
		return out
	}
	if diff := cmp.Diff(stacks(massif), stacks(native)); diff != "" {
		t.Errorf("stacks (-massif +sites):\n%s", diff)
	}
}

// TestSitesChurn: three threads allocate without pause while main stops
// at check() every few milliseconds (heaptrack/testdata/churn.c), so that
// many stops find a thread inside heaptrack, writing an event, or inside
// pthread_mutex_lock or _unlock on heaptrack's lock: each is let out, and
// every stop's snapshot holds exactly the blocks the threads counted (one
// more per thread that stopped between malloc and its count). The threads
// allocate without pause, so every stop has the same chance of finding
// one inside heaptrack or its lock: 20 stops, each checked exactly, where
// each further stop's cut costs more the longer the run has allocated.
func TestSitesChurn(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../../heaptrack/testdata/churn.c")
	plan := "backend: native\nnative:\n  sites: true\nkeep_snapshots: all\nbreakpoints:\n  - name: check\n    location: check\n    commands: [\"print counts[0] + counts[1] + counts[2]\"]\n"
	res, m, err := runNative(t, driver.Options{}, plan, bin, "20")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Stops) != 20 {
		t.Fatalf("%d stops", len(m.Stops))
	}
	for _, ev := range m.Events {
		// A stop that finds an arena's lock held records resident
		// memory only (allocator-busy); its sites are still cut.
		if ev.Kind != runjson.EventAllocatorBusy {
			t.Errorf("event %+v", ev)
		}
	}
	for _, s := range m.Stops {
		var counted int64
		if len(s.Commands) != 1 {
			t.Fatalf("stop %d: commands %+v", s.Seq, s.Commands)
		}
		if _, err := fmt.Sscanf(s.Commands[0].Output, "$%*d = %d", &counted); err != nil {
			if _, err := fmt.Sscanf(strings.TrimSpace(s.Commands[0].Output[strings.Index(s.Commands[0].Output, "=")+1:]), "%d", &counted); err != nil {
				t.Fatalf("stop %d: %q", s.Seq, s.Commands[0].Output)
			}
		}
		snap := readKept(t, filepath.Join(res.Dir, s.Snapshot))
		var blocks int64
		for _, site := range snap.Tree.Children {
			if site.Frame.Function == "churn_alloc" {
				blocks += site.Blocks
			}
		}
		if blocks < counted || blocks > counted+3 {
			t.Errorf("stop %d: churn_alloc has %d blocks, the threads count %d", s.Seq, blocks, counted)
		}
	}
}

// readKept reads a kept snapshot file (gzipped xtmemory).
func readKept(t *testing.T, path string) *snapshots.Snapshot {
	t.Helper()
	s, err := snapshots.ReadHeap(strings.NewReader(testenv.Gunzip(t, path)), path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSitesAttach: heaptrack injected into a threaded server under load
// when snapctl attaches: each "keep" request keeps 100 bytes at
// keep_request, which is the suspect, +104 B (sizeof (struct record)) and one block per hit, from
// the attach on; the reports say that older blocks are unknown; after the
// detach the server serves on, its code the files', and heaptrack's
// library, still loaded, writes nothing.
func TestSitesAttach(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	for _, guard := range []bool{false, true} {
		t.Run(fmt.Sprintf("guard=%v", guard), func(t *testing.T) {
			t.Parallel()
			sitesAttach(t, guard)
		})
	}
}

// sitesAttach is TestSitesAttach, asked to guard the process or not:
// gdb traces it either way with sites (fact 70).
func sitesAttach(t *testing.T, guard bool) {
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	// Blocks kept before the attach are not the run's.
	for range 3 {
		if _, err := srv.Ask("keep"); err != nil {
			t.Fatal(err)
		}
	}
	var out testenv.Buffer
	plan := "backend: native\nbreakpoints:\n  - name: keep\n    location: keep_request\n    max_hits: 6\n"
	type result struct {
		res *driver.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		opts := driver.Options{Measure: driver.Measure{Sites: true}, Streams: driver.Streams{Stdout: &out}, Attach: driver.Attach{AttachPID: srv.Pid, Guard: guard}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}}
		res, err := runSession(t, opts, plan, "")
		done <- result{res, err}
	}()
	var r result
	for r.res == nil && r.err == nil {
		select {
		case r = <-done:
		case <-time.After(20 * time.Millisecond):
			if _, err := srv.Ask("keep"); err != nil {
				r = <-done
				t.Fatalf("%v (%s); the attach: %v", err, srv.Gone(), r.err)
			}
		}
	}
	if r.err != nil || r.res == nil {
		t.Fatalf("attach: %v", r.err)
	}
	dir := r.res.Dir
	m := readManifest(t, dir)
	if m.Native == nil || !m.Native.Sites || !m.Native.Detached || len(m.Stops) != 6 {
		t.Fatalf("native %+v, %d stops", m.Native, len(m.Stops))
	}
	// With sites, gdb traces the process even when asked to guard it.
	if guard && (len(m.Events) != 1 || m.Events[0].Kind != "attach-unguarded" || !strings.Contains(m.Events[0].Message, "native.sites")) {
		t.Errorf("events %+v, want one attach-unguarded for native.sites", m.Events)
	}
	want := map[string]string{"keep_request": "tcpserver.c:28 104 B/hit 1 blocks/hit 520 B in all over 5 intervals"}
	if diff := cmp.Diff(want, siteFigures(m)); diff != "" {
		t.Errorf("suspects (-want +got):\n%s\nevents %+v\n%s", diff, m.Events, out.String())
	}
	report, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil || !strings.Contains(string(report), "blocks allocated before are not known") {
		t.Errorf("report.md does not say what the attach means for older blocks: %v", err)
	}
	if g := srv.Gone(); g != "" {
		t.Fatal(g)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("breakpoints left in the process: %s", strings.Join(ch, "; "))
	}
	// The library is loaded and idle: its output, snapctl's FIFO, is
	// closed.
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", srv.Pid))
	for _, fd := range fds {
		if target, _ := os.Readlink(fd); strings.HasSuffix(target, "heaptrack.fifo") {
			t.Errorf("the process still holds %s -> %s", fd, target)
		}
	}
	maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", srv.Pid))
	if !strings.Contains(string(maps), "libheaptrack_inject.so") {
		t.Errorf("heaptrack's library is not loaded in the server")
	}
	for range 20 {
		srv.MustServe(t)
	}
	close(stop)
	if answered() == 0 {
		t.Errorf("no request of the load was answered")
	}
}

// TestSitesAttachGdbKilled: gdb killed during attach --sites, the server
// idle: snapctl takes the breakpoints out and stops heaptrack's recording
// itself (a library still writing into snapctl's FIFO would kill the
// server with SIGPIPE once snapctl has gone), and the server serves on,
// "keep" requests and their allocations included.
func TestSitesAttachGdbKilled(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	done := attachInBackground(t, srv.Pid, attachPlan, driver.Options{Measure: driver.Measure{Sites: true}})
	// heaptrack is injected before the plan's breakpoints go in, gdb's
	// own are in from the attach: wait for the library to write into
	// snapctl's FIFO, from the descriptor snapctl moved it to (gdb's
	// calls that move it are done), and for the process to run.
	recording := func() bool {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", srv.Pid))
		for _, fd := range fds {
			n, _ := strconv.Atoi(filepath.Base(fd))
			if target, _ := os.Readlink(fd); strings.HasSuffix(target, "heaptrack.fifo") && n >= 64 {
				return true
			}
		}
		return false
	}
	for deadline := testenv.NewDeadline(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if recording() && !traceStopped(srv.Pid) {
			break
		}
		if deadline.Passed() {
			t.Fatal("heaptrack was not injected")
		}
	}
	gdb := tracer(srv.Pid)
	if gdb == 0 {
		t.Fatal("the server has no tracer")
	}
	// The guardian holds gdb from before the breakpoints go in: killed
	// any time after, gdb stops at its exit (docs/facts.md, fact 133).
	if st, _ := proc.Status(gdb); st["TracerPid"] == "0" || st["TracerPid"] == "" {
		t.Errorf("gdb %d is not held by snapctl's guardian with the breakpoints in", gdb)
	}
	syscall.Kill(gdb, syscall.SIGKILL)
	err := <-done
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("process %d runs on: snapctl removed its ", srv.Pid)) &&
		!strings.Contains(err.Error(), fmt.Sprintf("process %d runs on: snapctl's guardian put back the program's code under its ", srv.Pid)) ||
		!strings.Contains(err.Error(), "snapctl stopped heaptrack's recording in it") {
		t.Fatalf("error %v", err)
	}
	// Enough allocations to fill heaptrack's buffer many times over.
	for range 300 {
		if _, err := srv.Ask("keep"); err != nil {
			t.Fatalf("the server after the attach: %v (%s)", err, srv.Gone())
		}
	}
	srv.MustServe(t)
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("breakpoints left in the process: %s", strings.Join(ch, "; "))
	}
}

// Under native.sites a stop's heap per site reaches the analysis as a
// tree, not as a file read back: keep_snapshots: changed still keeps only
// the files of stops 1 and 3, and the one diff is grow's +32 bytes.
func TestSitesKeepChanged(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../testdata/steady.c")
	res, m, err := runNative(t, driver.Options{}, "backend: native\nnative:\n  sites: true\nkeep_snapshots: changed\nbreakpoints:\n  - name: tick\n    location: tick\n", bin, "5", "3")
	if err != nil {
		t.Fatal(err)
	}
	type stop struct {
		Seq       int
		Snapshot  string
		SameAsSeq int
	}
	var got []stop
	for _, s := range m.Stops {
		got = append(got, stop{s.Seq, s.Snapshot, s.SameAsSeq})
		if s.Memory == nil || s.Memory.SitesMissing != "" {
			t.Errorf("stop %d: memory %+v, want its sites", s.Seq, s.Memory)
		}
	}
	want := []stop{
		{1, "snapshots/0001-tick-1.massif.gz", 0},
		{2, "", 1},
		{3, "snapshots/0003-tick-3.massif.gz", 0},
		{4, "", 3},
		{5, "", 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	names, err := filepath.Glob(filepath.Join(res.Dir, snapshotDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Join(snapshotDir, filepath.Base(names[i]))
	}
	if diff := cmp.Diff([]string{want[0].Snapshot, want[2].Snapshot}, names); diff != "" {
		t.Errorf("files kept (-want +got):\n%s", diff)
	}
	// The kept file reads back as the tree the analysis had: grow's 32
	// bytes in one block from stop 3 on.
	snap, err := snapshots.ReadHeap(strings.NewReader(testenv.Gunzip(t, filepath.Join(res.Dir, want[2].Snapshot))), want[2].Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	var grow *snapshots.Node
	for _, c := range snap.Tree.Children {
		if c.Frame.Function == "grow" {
			grow = c
		}
	}
	if grow == nil || grow.Bytes != 32 || grow.Blocks != 1 {
		t.Errorf("stop 3's kept snapshot: grow %+v, want 32 B in 1 block", grow)
	}
	if b := m.Breakpoints[0]; b.Hits != 5 || b.Snapshots != 5 || b.Unchanged != 3 {
		t.Errorf("breakpoint summary %+v, want 5 hits, 5 snapshots, 3 unchanged", b)
	}
	var sites []*snapshots.Diff
	for _, d := range m.Diffs {
		if len(d.Sites) > 0 {
			sites = append(sites, d)
		}
	}
	if len(sites) != 1 || sites[0].FromSeq != 2 || sites[0].ToSeq != 3 || len(sites[0].Sites) != 1 ||
		sites[0].Sites[0].Frame.Function != "grow" || sites[0].Sites[0].Delta != 32 {
		t.Errorf("diffs with sites %+v, want grow +32 from stop 2 to 3", sites)
	}
}
