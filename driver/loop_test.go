package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/valgrind"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// fakeGDB answers the stop loop's MI commands from a script, standing in for
// gdb attached to valgrind: each -exec-continue delivers the next *stopped
// record, and each snapshot command writes an xtmemory file whose heap
// grows by 16 bytes, one block, at keep (leak.c:15).
type fakeGDB struct {
	t      *testing.T
	events chan *mi.Record
	done   chan struct{}
	stops  []string // *stopped records, in MI syntax, one per continue
	// interrupts are the *stopped records delivered, one per
	// -exec-interrupt; none when empty.
	interrupts []string
	// finishes are the *stopped records delivered, one per -exec-finish;
	// none when empty.
	finishes []string
	// fail maps a command line, as sent records it, to the msg of the
	// ^error gdb answers it with.
	fail map[string]string
	// hang holds command lines, as sent records them, that gdb does not
	// answer in time: Send returns once its context ends. Each hangs once.
	hang map[string]bool
	// running is how many -exec-continue gdb refuses, the target running
	// already (an interrupt that did not stop it in time); each delivers
	// the next record of stops all the same, the stop the target comes to.
	running int
	// dieAt is a command line, as sent records it, at which gdb dies with
	// the error dieWith instead of answering.
	dieAt   string
	dieWith error

	mu   sync.Mutex
	sent []string // every command gdb received, snapshotMonitor for a snapshot
	snap int
	gone error // why gdb died, once done is closed
}

func newFakeGDB(t *testing.T, stops ...string) *fakeGDB {
	return &fakeGDB{t: t, events: make(chan *mi.Record, 16), done: make(chan struct{}), stops: stops}
}

func (f *fakeGDB) Events() <-chan *mi.Record { return f.events }
func (f *fakeGDB) Done() <-chan struct{}     { return f.done }

func (f *fakeGDB) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone
}

// die ends gdb with err, as the client reports a gdb that exited: Done is
// closed, Err returns err and every Send fails with it.
func (f *fakeGDB) die(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dieLocked(err)
}

func (f *fakeGDB) dieLocked(err error) {
	if f.gone == nil {
		f.gone = err
		close(f.done)
	}
}

func (f *fakeGDB) Send(ctx context.Context, cmd string, args ...string) (*mi.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	full := strings.Join(append([]string{cmd}, args...), " ")
	// As the client answers once gdb is gone, or for a context already
	// ended: the command is not sent.
	if f.gone != nil {
		return nil, fmt.Errorf("mi: %s: %w", full, f.gone)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mi: %s: %w", full, err)
	}
	mon := `"` + snapshotMonitor + " "
	snapshot := cmd == "-interpreter-exec" && strings.HasPrefix(args[1], mon)
	line := full
	if snapshot {
		line = snapshotMonitor
	}
	f.sent = append(f.sent, line)
	switch {
	case line == f.dieAt:
		f.dieLocked(f.dieWith)
		return nil, fmt.Errorf("mi: %s: %w", full, f.gone)
	case f.hang[line]:
		delete(f.hang, line)
		f.mu.Unlock()
		<-ctx.Done()
		f.mu.Lock()
		return nil, fmt.Errorf("mi: %s: %w", full, ctx.Err())
	case f.fail[line] != "":
		return nil, &mi.Error{Command: full, Msg: f.fail[line]}
	}
	switch cmd {
	case "-thread-info":
		return f.result(`^done,threads=[{id="1",target-id="Thread 42",state="stopped",frame={addr="0x10",func="handle_request",file="leak.c",line="23"}}],current-thread-id="1"`), nil
	case "-stack-list-frames":
		return f.result(`^done,stack=[frame={level="0",addr="0x10",func="handle_request",file="/src/leak.c",fullname="/src/leak.c",line="23"},frame={level="1",addr="0x20",func="main",file="leak.c",line="35"}]`), nil
	case "-gdb-show":
		if line == "-gdb-show scheduler-locking" {
			return f.result(`^done,value="replay"`), nil
		}
	case "-interpreter-exec":
		if snapshot {
			f.snap++
			path := strings.TrimSuffix(strings.TrimPrefix(args[1], mon), `"`)
			n := 16 * f.snap
			event := func(i int, name string, v int) string {
				return fmt.Sprintf("#-----------\nsnapshot=%d\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n"+
					"n1: %d %s\n n1: %d 0x1091E0: keep (leak.c:15)\n  n0: %d 0x109236: main (leak.c:31)\n", i, f.snap, v, v, name, v, v)
			}
			massif := "desc: xtree.produce_report\ncmd: ./leak\ntime_unit: ms\n" +
				event(0, "curB : currently allocated Bytes", n) + event(1, "curBk : currently allocated Blocks", f.snap)
			if err := os.WriteFile(path, []byte(massif), 0o600); err != nil {
				f.t.Error(err)
			}
		}
	case "-exec-interrupt":
		f.deliver(&f.interrupts)
	case "-exec-finish":
		f.deliver(&f.finishes)
		return f.result("^running"), nil
	case "-exec-continue":
		if f.running > 0 {
			f.running--
			f.deliver(&f.stops)
			return nil, &mi.Error{Command: full, Msg: "Cannot execute this command while the selected thread is running."}
		}
		if len(f.stops) == 0 {
			// As gdb answers once the target has exited.
			f.t.Errorf("continue after the last stop")
			return nil, &mi.Error{Command: full, Msg: "The program is not being run."}
		}
		f.deliver(&f.stops)
		return f.result("^running"), nil
	}
	return f.result("^done"), nil
}

// deliver sends the first record of script as an async record, if any.
func (f *fakeGDB) deliver(script *[]string) {
	if len(*script) > 0 {
		f.events <- mustRecord(f.t, (*script)[0])
		*script = (*script)[1:]
	}
}

// SendBatch runs the commands in order, as gdb does.
func (f *fakeGDB) SendBatch(ctx context.Context, cmds []mi.Command) ([]*mi.Result, []error) {
	res := make([]*mi.Result, len(cmds))
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		res[i], errs[i] = f.Send(ctx, c.Name, c.Args...)
	}
	return res, errs
}

func (f *fakeGDB) result(line string) *mi.Result {
	rec, err := mi.ParseRecord([]byte(line))
	if err != nil {
		f.t.Fatalf("%s: %v", line, err)
	}
	return &mi.Result{Class: rec.Class, Results: rec.Results}
}

const hitRecord = `*stopped,reason="breakpoint-hit",disp="keep",bkptno="1",frame={addr="0x10",func="handle_request",file="leak.c",line="23"},thread-id="1",stopped-threads="all"`

// The stop loop against a scripted gdb: every and max_hits decide which
// hits gdb reports (-break-after) and when the breakpoint goes
// (-break-delete), and the hits are numbered as the plan counts them.
func TestLoopEveryMaxHits(t *testing.T) {
	t.Parallel()
	plan := mustPlan(t, "threads: current\nbreakpoints:\n  - name: request\n    location: handle_request\n    every: 2\n    max_hits: 5\n")
	s, fake := fakeSession(t, plan, hitRecord, hitRecord, `*stopped,reason="exited",exit-code="03"`)

	fake.events <- mustRecord(t, hitRecord) // the first hit, already stopped
	err := s.newStopLoop().loop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var hits []int
	var heaps []int64
	for _, stop := range spooled[runjson.Stop](t, s.rec.stops) {
		hits = append(hits, stop.Hit)
		heaps = append(heaps, stop.HeapBytes)
		if stop.Thread.TargetID != "Thread 42" || len(stop.Backtrace) != 2 || stop.Frame.File != "leak.c" {
			t.Errorf("stop %d: thread %+v, backtrace %+v", stop.Seq, stop.Thread, stop.Backtrace)
		}
	}
	if diff := cmp.Diff([]int{1, 3, 5}, hits); diff != "" {
		t.Errorf("hits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{16, 32, 48}, heaps); diff != "" {
		t.Errorf("heap bytes (-want +got):\n%s", diff)
	}
	if c := s.m.Target.ExitCode; c == nil || *c != 3 {
		t.Errorf("exit code %v, want 3 (gdb prints it in octal)", c)
	}
	var control []string
	for _, l := range fake.sent {
		if strings.HasPrefix(l, "-break-") || l == "-exec-continue" {
			control = append(control, l)
		}
	}
	want := []string{
		"-break-after 1 1", "-exec-continue",
		"-break-after 1 1", "-exec-continue",
		"-break-delete 1", "-exec-continue",
	}
	if diff := cmp.Diff(want, control); diff != "" {
		t.Errorf("breakpoint control (-want +got):\n%s", diff)
	}
	if diffs := spooled[snapshots.Diff](t, s.rec.diffs); len(diffs) != 2 || diffs[0].DeltaBytes != 16 {
		t.Errorf("diffs = %+v, want two of +16 B", diffs)
	}
}

// An around_call stop whose call does not return in time is interrupted;
// the stop that the interrupt brings back may be another one that came
// first (a hit of the breakpoint in another thread, the target's exit).
// It is handled as the stop loop would: the hit is recorded, the exit
// ends the run with its exit code, and the target is not resumed after it.
func TestLoopInterruptBringsAnotherStop(t *testing.T) {
	t.Parallel()
	const exited = `*stopped,reason="exited-normally"`
	for _, tc := range []struct {
		name       string
		interrupts []string
		hits       []int
	}{
		{"exit", []string{exited}, []int{1}},
		{"hit then exit", []string{hitRecord, exited}, []int{1, 2}},
		{"own stop", []string{`*stopped,reason="signal-received",signal-name="SIGTRAP",thread-id="1"`}, []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The deadline bounds the hit's snapshot too: long enough
			// for that on a loaded machine, with the race detector.
			plan, err := plan.Parse("plan.yaml", []byte("stop_timeout: 1s\nbreakpoints:\n  - name: request\n    location: handle_request\n    around_call: true\n"))
			if err != nil {
				t.Fatal(err)
			}
			s, fake := fakeSession(t, plan)
			fake.interrupts = tc.interrupts
			if tc.name == "own stop" {
				fake.stops = []string{exited}
			}
			fake.events <- mustRecord(t, hitRecord)
			if err := s.newStopLoop().loop(context.Background()); err != nil {
				t.Fatal(err)
			}
			var hits []int
			for _, stop := range spooled[runjson.Stop](t, s.rec.stops) {
				hits = append(hits, stop.Hit)
			}
			if diff := cmp.Diff(tc.hits, hits); diff != "" {
				t.Errorf("stops by hit (-want +got):\n%s", diff)
			}
			if c := s.m.Target.ExitCode; c == nil || *c != 0 {
				t.Errorf("exit code %v, want 0", c)
			}
		})
	}
}

// fakeSession is a session on a scripted gdb whose stops are given, stopped
// at nothing yet, with the plan's first breakpoint as gdb's number 1.
func fakeSession(t *testing.T, plan *plan.Plan, stops ...string) (*session, *fakeGDB) {
	t.Helper()
	fake := newFakeGDB(t, stops...)
	return scriptedSession(t, plan, fake), fake
}

// scriptedSession is a session on plan whose gdb is the scripted debugger
// d and whose valgrind never exits, with the plan's first breakpoint as
// gdb's number 1: the state the stop loop starts from.
func scriptedSession(t *testing.T, plan *plan.Plan, d gdb.Debugger) *session {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, snapshotDir), 0o755); err != nil {
		t.Fatal(err)
	}
	s := newSession(Options{Timeouts: Timeouts{CommandTimeout: 5e9, Grace: 1}}, plan, backend.Tools{}, "/src/leak", dir)
	s.opts.defaults()
	s.priv.dir = t.TempDir()
	s.gdb = gdb.NewConn(d, 0, s.opts.CommandTimeout, s.rec.note)
	// The script answers at once: an interrupt whose stop it never sends
	// waits 3 s, not up to 60 as on a loaded machine, where the hang
	// guard of runLoop (20 s) ended three such tests.
	s.gdb.SetStretch(func() float64 { return 1 })
	s.watch.gdb = s.gdb
	t.Cleanup(s.rec.closeSpools)
	// A test that ends with the loop, before finish, may leave run.json
	// being written in the background (refreshManifest): wait for it
	// before the run directory goes.
	t.Cleanup(func() { s.refreshed(true) })
	st := s.rec.order[0]
	st.number, st.sum.Number = "1", "1"
	s.rec.bps["1"] = st
	return s
}

// mustPlan parses a plan written in a test.
func mustPlan(t *testing.T, yaml string) *plan.Plan {
	t.Helper()
	p, err := plan.Parse("plan.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// spooled decodes the records of a spool.
func spooled[T any](t *testing.T, sp *spool) []T {
	t.Helper()
	var out []T
	err := sp.each(func(line []byte) error {
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRecord(t *testing.T, line string) *mi.Record {
	t.Helper()
	rec, err := mi.ParseRecord([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestThreadsChanged(t *testing.T) {
	f := func(addr string) *runjson.Frame { return &runjson.Frame{Function: "f", Addr: addr} }
	before := []runjson.Thread{{ID: "1", Frame: f("0x1")}, {ID: "2", TargetID: "Thread 2", Frame: f("0x2"), State: "stopped"}, {ID: "3", Frame: f("0x3")}}
	after := []runjson.Thread{{ID: "1", Frame: f("0x9")}, {ID: "2", TargetID: "Thread 2", Frame: f("0x5"), State: "stopped"}, {ID: "4", Frame: f("0x4")}}
	got := gdb.ThreadsChanged("1", before, after)
	want := []string{"2 (Thread 2): frame changed", "4: new", "3: exited"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := gdb.ThreadsChanged("1", before, before); got != nil {
		t.Errorf("no change: got %v", got)
	}
}

// Breakpoint commands cost no settings round trips at each stop: print
// frame-arguments is set once for the session, to scalars when a
// breakpoint has commands (so that bt shows arguments) and none otherwise.
func TestFrameArgumentsOncePerSession(t *testing.T) {
	p, err := plan.Parse("plan.yaml", []byte("breakpoints:\n  - name: request\n    location: handle_request\n    commands: [bt]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := gdb.FrameArguments(p); got != "scalars" {
		t.Errorf("frameArguments with commands = %q, want scalars", got)
	}
	s, fake := fakeSession(t, p, hitRecord, `*stopped,reason="exited-normally"`)
	fake.events <- mustRecord(t, hitRecord)
	if err := s.newStopLoop().loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, l := range fake.sent {
		if strings.HasPrefix(l, "-gdb-set print frame-arguments") {
			t.Errorf("sent %q at a stop", l)
		}
	}
	if n := len(spooled[runjson.Stop](t, s.rec.stops)); n != 2 {
		t.Errorf("%d stops, want 2", n)
	}
	plain, err := plan.Parse("plan.yaml", []byte("breakpoints:\n  - name: request\n    location: handle_request\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := gdb.FrameArguments(plain); got != "none" {
		t.Errorf("frameArguments without commands = %q, want none", got)
	}
}

// valgrindEnded gives a scripted session a valgrind that has ended: a
// real process that exited with status 0, or that SIGKILL killed.
func valgrindEnded(t *testing.T, s *session, killed bool) {
	t.Helper()
	argv := []string{"true"}
	if killed {
		argv = []string{"sleep", "60"}
	}
	p, err := child.Start("valgrind", exec.Command(argv[0], argv[1:]...), child.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if killed {
		p.Kill()
	}
	p.Wait()
	s.launcher.(*valgrind.Launch).Watch(p)
}

// finishRun ends a scripted session as a run does once its stop loop has
// returned loopErr, and returns run.json as written and the run's error.
func finishRun(t *testing.T, s *session, loopErr error) (*runjson.Manifest, error) {
	t.Helper()
	_, err := s.finish(&Result{Dir: s.out.dir, Manifest: s.m, Plan: s.plan}, loopErr)
	data, rerr := os.ReadFile(filepath.Join(s.out.dir, manifestFile))
	if rerr != nil {
		t.Fatal(rerr)
	}
	var m runjson.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if err := m.ResolveStacks(); err != nil {
		t.Fatal(err)
	}
	return &m, err
}
