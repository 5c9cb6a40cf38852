package mi_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/driver/mi"
)

// TestTranscriptsParse parses every line gdb printed in every recorded
// session. The only lines that are not MI are a native inferior's own
// output.
func TestTranscriptsParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(transcriptDir, "*.mi"))
	if err != nil || len(files) < 5 {
		t.Fatalf("transcripts: %v %v", files, err)
	}
	var unparsed []string
	counts := map[mi.Type]int{}
	for _, file := range files {
		tr := loadTranscript(t, filepath.Base(file))
		lines := tr.head
		for _, s := range tr.steps {
			lines = append(lines, s.out...)
		}
		for _, line := range lines {
			r, err := mi.ParseRecord([]byte(line))
			if err != nil {
				unparsed = append(unparsed, filepath.Base(file)+": "+line)
				continue
			}
			counts[r.Type]++
			// mi2's multi-location output comes back in the regular form.
			mi2 := filepath.Base(file) == "overload-mi2.mi"
			if r.Type != mi.TypePrompt && !mi2 && r.MI() != strings.TrimRight(line, " ") && !strings.Contains(line, `\`) {
				t.Errorf("%s: MI() = %q, want the line back", line, r.MI())
			}
		}
	}
	if diff := cmp.Diff([]string{"native.mi: kept 4 blocks"}, unparsed); diff != "" {
		t.Errorf("unparsed lines (-want +got):\n%s", diff)
	}
	for _, typ := range []mi.Type{mi.TypeResult, mi.TypeExec, mi.TypeNotify, mi.TypeConsole, mi.TypeTarget, mi.TypeLog, mi.TypePrompt} {
		if counts[typ] == 0 {
			t.Errorf("no %v record in the transcripts", typ)
		}
	}
}

func TestTranscriptVGDB(t *testing.T) {
	const name = "vgdb.mi"
	s := replaySession(t, name)
	at := func(prefix string, nth int) (*mi.Result, error) {
		i := stepIndex(t, name, prefix, nth)
		return s.results[i], s.errs[i]
	}

	t.Run("connect", func(t *testing.T) {
		r, err := at("-target-select", 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Class != "connected" {
			t.Errorf("class = %q", r.Class)
		}
		if want := "relaying data between gdb and process 15122\n"; !strings.HasPrefix(r.Log(), want) {
			t.Errorf("log = %q, want prefix %q", r.Log(), want)
		}
		stop := s.eventsOf(mi.TypeExec, "stopped")[0]
		if _, ok := stop.Results.Lookup("reason"); ok || stop.String("frame.func") != "_start" || stop.String("thread-id") != "1" {
			t.Errorf("first stop = %s", stop.MI())
		}
		if g := s.eventsOf(mi.TypeNotify, "thread-group-started")[0]; g.String("pid") != "42000" {
			t.Errorf("thread-group-started = %s (vgdb reports a fake pid)", g.MI())
		}
	})

	t.Run("monitor errors", func(t *testing.T) {
		r, err := at("-interpreter-exec console \"monitor detailed_snapshot", 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Class != "done" || r.Target() != "error: cannot take snapshot before execution has started\n" {
			t.Errorf("early snapshot: class %q target %q", r.Class, r.Target())
		}
		r, err = at("-interpreter-exec console \"monitor no_such", 0)
		if err != nil {
			t.Fatal(err)
		}
		want := "command 'no_such_command' not recognised\nIn gdb,     try 'monitor help'\nIn a shell, try 'vgdb help'\n"
		if r.Class != "done" || r.Target() != want || r.Console() != "" || len(r.Streams) != 3 {
			t.Errorf("bad monitor command: class %q target %q streams %v", r.Class, r.Target(), r.Streams)
		}
	})

	t.Run("malloc has 46 locations", func(t *testing.T) {
		r, err := at("-break-insert malloc", 0)
		if err != nil {
			t.Fatal(err)
		}
		locs := r.List("bkpt.locations")
		if r.String("bkpt.addr") != "<MULTIPLE>" || len(locs) != 46 {
			t.Fatalf("bkpt addr %q with %d locations", r.String("bkpt.addr"), len(locs))
		}
		if locs[0].String("number") != "1.1" || locs[0].String("at") != "<malloc@plt>" || locs[45].String("number") != "1.46" {
			t.Errorf("locations: first %s last %s", locs[0].MI(), locs[45].MI())
		}
	})

	t.Run("breakpoint hit and snapshot", func(t *testing.T) {
		r, err := at("-exec-continue", 0)
		if err != nil || r.Class != "running" {
			t.Fatalf("continue: %v %v", r, err)
		}
		hit := s.eventsOf(mi.TypeExec, "stopped")[1]
		for path, want := range map[string]string{
			"reason": "breakpoint-hit", "bkptno": "2", "disp": "keep", "thread-id": "1",
			"stopped-threads": "all", "frame.func": "grow", "frame.line": "15",
			"frame.args.0.value": "16", "frame.fullname": "/work/main/driver/mi/testdata/prog.c",
		} {
			if got := hit.String(path); got != want {
				t.Errorf("stop %s = %q, want %q", path, got, want)
			}
		}
		snap, err := at("-interpreter-exec console \"monitor detailed_snapshot", 1)
		if err != nil || snap.Class != "done" || len(snap.Streams) != 0 {
			t.Errorf("snapshot: %+v %v, want done without streams", snap, err)
		}
	})

	t.Run("frames and threads", func(t *testing.T) {
		r, _ := at("-stack-list-frames", 0)
		frames := r.List("stack")
		if len(frames) != 2 || frames[0].String("func") != "grow" || frames[1].String("func") != "main" || frames[1].String("line") != "36" {
			t.Errorf("frames = %s", r.Results.MI())
		}
		r, _ = at("-thread-info", 0)
		th := r.List("threads")
		if len(th) != 1 || th[0].String("id") != "1" || th[0].String("target-id") != "Thread 15122" ||
			th[0].String("details") != "tid 1 VgTs_Runnable" || r.String("current-thread-id") != "1" {
			t.Errorf("threads = %s", r.Results.MI())
		}
		r, _ = at("-thread-info", 1)
		th = r.List("threads")
		if len(th) != 2 || th[1].String("target-id") != "Thread 15129" || r.String("current-thread-id") != "2" ||
			th[0].String("details") != "tid 1 VgTs_WaitSys" {
			t.Errorf("threads = %s", r.Results.MI())
		}
		if hit := s.eventsOf(mi.TypeExec, "stopped")[3]; hit.String("thread-id") != "2" || hit.String("frame.args.0.value") != "100" {
			t.Errorf("second thread's stop = %s", hit.MI())
		}
		if tc := s.eventsOf(mi.TypeNotify, "thread-created"); len(tc) != 2 || tc[1].String("id") != "2" {
			t.Errorf("thread-created = %v", tc)
		}
	})

	t.Run("finish", func(t *testing.T) {
		fin := s.eventsOf(mi.TypeExec, "stopped")[2]
		for path, want := range map[string]string{
			"reason": "function-finished", "frame.func": "main", "frame.line": "35",
			"gdb-result-var": "$1", "return-value": "0x4a38030 'x' <repeats 16 times>",
		} {
			if got := fin.String(path); got != want {
				t.Errorf("finish %s = %q, want %q", path, got, want)
			}
		}
	})

	t.Run("exit", func(t *testing.T) {
		stops := s.eventsOf(mi.TypeExec, "stopped")
		if len(stops) != 5 || stops[4].MI() != `*stopped,reason="exited-normally"` {
			t.Fatalf("last stop of %d = %s", len(stops), stops[len(stops)-1].MI())
		}
		if g := s.eventsOf(mi.TypeNotify, "thread-group-exited"); len(g) != 1 || g[0].String("exit-code") != "0" {
			t.Errorf("thread-group-exited = %v", g)
		}
		var console []string
		for _, e := range s.events {
			if e.Type == mi.TypeConsole {
				console = append(console, e.Text)
			}
		}
		if last := console[len(console)-1]; last != "[Inferior 1 (Remote target) exited normally]\n" {
			t.Errorf("last console event = %q", last)
		}
		r, err := at("-thread-info", 2)
		if err != nil || r.Get("threads").Kind() != mi.KindList || len(r.List("threads")) != 0 {
			t.Errorf("-thread-info after exit: %v %v, want threads=[]", r, err)
		}
	})

	t.Run("client ends with gdb's output", func(t *testing.T) {
		r, err := at("-gdb-exit", 0)
		if err != nil || r.Class != "exit" {
			t.Errorf("-gdb-exit: %v %v", r, err)
		}
	})
}

func TestTranscriptNative(t *testing.T) {
	const name = "native.mi"
	s := replaySession(t, name)
	at := func(prefix string, nth int) (*mi.Result, error) {
		i := stepIndex(t, name, prefix, nth)
		return s.results[i], s.errs[i]
	}
	_, err := at("-break-insert nosuch", 0)
	var e *mi.Error
	if !errors.As(err, &e) || e.Msg != `Function "nosuch" not defined.` || e.Command != "-break-insert nosuch" || e.Code != "" {
		t.Errorf("-break-insert nosuch: %#v", err)
	}
	if err.Error() != `gdb: -break-insert nosuch: Function "nosuch" not defined.` {
		t.Errorf("message = %q", err.Error())
	}
	_, err = at("-no-such-command", 0)
	if !errors.As(err, &e) || e.Code != "undefined-command" {
		t.Errorf("-no-such-command: %#v", err)
	}
	r, err := at("-interpreter-exec console \"echo", 0)
	if err != nil || r.Console() != "café \x1b[1mbold\x1b[0m \"q\" tab\there\n" {
		t.Errorf("echo: %q %v", r.Console(), err)
	}
	r, _ = at("-thread-info", 1)
	th := r.List("threads")
	if len(th) != 2 || th[0].String("target-id") != "Thread 0x7ffff7dd2740 (LWP 15522)" || th[1].String("id") != "2" {
		t.Errorf("threads = %s", r.Results.MI())
	}
	var unparsed []string
	for _, ev := range s.events {
		if ev.Type == mi.TypeUnparsed {
			unparsed = append(unparsed, ev.Text)
			var se *mi.SyntaxError
			if !errors.As(ev.Err, &se) {
				t.Errorf("unparsed event error = %v", ev.Err)
			}
		}
	}
	if diff := cmp.Diff([]string{"kept 4 blocks"}, unparsed); diff != "" {
		t.Errorf("unparsed events (-want +got):\n%s", diff)
	}
	if stops := s.eventsOf(mi.TypeExec, "stopped"); len(stops) != 4 || stops[3].String("reason") != "exited-normally" || stops[0].String("frame.func") != "grow" {
		t.Errorf("stops = %v", stops)
	}
}

func TestTranscriptOverload(t *testing.T) {
	load := func(name string) []*mi.Record {
		tr := loadTranscript(t, name)
		var out []*mi.Record
		for _, s := range tr.steps {
			for _, l := range s.out {
				r, err := mi.ParseRecord([]byte(l))
				if err != nil {
					t.Fatal(err)
				}
				if r.Type == mi.TypeResult && r.Results.Len() > 0 {
					out = append(out, r)
				}
			}
		}
		return out
	}
	funcs := func(vs []*mi.Value) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.String("func"))
		}
		return out
	}
	want := []string{"twice(int)", "twice(double)"}

	mi3 := load("overload-mi3.mi")
	if len(mi3) != 2 {
		t.Fatalf("mi3: %d results", len(mi3))
	}
	if diff := cmp.Diff(want, funcs(mi3[0].Results.List("bkpt.locations"))); diff != "" {
		t.Errorf("mi3 -break-insert (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, funcs(mi3[1].Results.List("BreakpointTable.body.0.locations"))); diff != "" {
		t.Errorf("mi3 -break-list (-want +got):\n%s", diff)
	}

	mi2 := load("overload-mi2.mi")
	if len(mi2) != 2 {
		t.Fatalf("mi2: %d results", len(mi2))
	}
	all := mi2[0].Results.All("bkpt")
	if len(all) != 3 || all[0].String("addr") != "<MULTIPLE>" {
		t.Fatalf("mi2 bkpt values: %v", all)
	}
	if diff := cmp.Diff(want, funcs(all[1:])); diff != "" {
		t.Errorf("mi2 -break-insert (-want +got):\n%s", diff)
	}
	body := mi2[1].Results.List("BreakpointTable.body")
	if diff := cmp.Diff(want, funcs(body[1:])); diff != "" || len(body) != 3 {
		t.Errorf("mi2 -break-list (-want +got):\n%s", diff)
	}
}

func TestTranscriptInterrupt(t *testing.T) {
	s := replaySession(t, "interrupt.mi")
	stops := s.eventsOf(mi.TypeExec, "stopped")
	if len(stops) != 1 || stops[0].String("reason") != "signal-received" || stops[0].String("signal-name") != "SIGINT" {
		t.Fatalf("stops = %v", stops)
	}
	if _, err := os.Stat(filepath.Join(transcriptDir, "README.md")); err != nil {
		t.Errorf("transcripts must say how they were recorded: %v", err)
	}
}

// TestTranscriptExits pins how a target's end looks through vgdb: gdb
// prints a non-zero exit code in octal ("012" for 10), and a fatal signal
// first stops the target, then ends it.
func TestTranscriptExits(t *testing.T) {
	s := replaySession(t, "exit-10.mi")
	stops := s.eventsOf(mi.TypeExec, "stopped")
	end := stops[len(stops)-1]
	if end.MI() != `*stopped,reason="exited",exit-code="012"` {
		t.Errorf("exit 10: %s", end.MI())
	}
	if code, err := end.Int("exit-code"); err != nil || code != 10 {
		t.Errorf("Int(exit-code) = %d, %v: want 10 (octal)", code, err)
	}
	if g := s.eventsOf(mi.TypeNotify, "thread-group-exited"); len(g) != 1 || g[0].String("exit-code") != "012" {
		t.Errorf("thread-group-exited = %v", g)
	}

	s = replaySession(t, "exit-segv.mi")
	stops = s.eventsOf(mi.TypeExec, "stopped")
	if len(stops) != 3 {
		t.Fatalf("%d stops, want connect, signal, end", len(stops))
	}
	if sig := stops[1]; sig.String("reason") != "signal-received" || sig.String("signal-name") != "SIGSEGV" || sig.String("frame.line") != "9" {
		t.Errorf("signal stop = %s", sig.MI())
	}
	if end := stops[2]; end.MI() != `*stopped,reason="exited-signalled",signal-name="SIGSEGV",signal-meaning="Segmentation fault"` {
		t.Errorf("end = %s", end.MI())
	}
	if g := s.eventsOf(mi.TypeNotify, "thread-group-exited"); len(g) != 1 || g[0].Get("exit-code") != nil {
		t.Errorf("thread-group-exited = %v", g)
	}
}
