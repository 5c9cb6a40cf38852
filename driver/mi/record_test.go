package mi_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
)

var record = flag.Bool("record", false, "record the MI transcripts of testdata/mi anew")

// transcriptDir holds the recorded MI sessions that the parser tests read.
var transcriptDir = filepath.Join("..", "..", "testdata", "mi")

// recorder runs one gdb session whose trace becomes a transcript.
type recorder struct {
	t     *testing.T
	name  string
	trace bytes.Buffer
	c     *mi.Client
}

func newRecorder(t *testing.T, name, comment string, opt mi.Options) *recorder {
	r := &recorder{t: t, name: name}
	fmt.Fprintf(&r.trace, "# %s\n# Recorded with gdb 13.1 (Debian 12) by `go test ./driver/mi -run TestRecordTranscripts -record`.\n", comment)
	opt.Trace = &r.trace
	r.c = startGDB(t, opt)
	return r
}

func (r *recorder) send(command string, args ...string) *mi.Result {
	r.t.Helper()
	return send(r.t, r.c, command, args...)
}

// try runs a command that may fail; the transcript keeps the ^error.
func (r *recorder) try(command string, args ...string) {
	r.t.Helper()
	ctx, cancel := contextWithTimeout(30 * time.Second)
	defer cancel()
	r.c.Send(ctx, command, args...)
}

func (r *recorder) wait(typ mi.Type, class string) *mi.Record {
	r.t.Helper()
	return waitEvent(r.t, r.c, typ, class)
}

// resume runs a command that resumes the target and waits for the target
// to stop again. Waiting for *running first skips stops reported before.
func (r *recorder) resume(command string, args ...string) *mi.Record {
	r.t.Helper()
	r.send(command, args...)
	r.wait(mi.TypeExec, "running")
	return r.wait(mi.TypeExec, "stopped")
}

func (r *recorder) save() {
	r.t.Helper()
	r.c.Close()
	path := filepath.Join(transcriptDir, r.name)
	if err := os.WriteFile(path, r.trace.Bytes(), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("wrote %s", path)
}

// TestRecordTranscripts records the sessions of testdata/mi. It runs only
// with -record: the transcripts are committed, and the parser tests must
// not change when gdb's output does.
func TestRecordTranscripts(t *testing.T) {
	if !*record {
		t.Skip("run with -record to record the transcripts anew")
	}
	testenv.NoLeftovers(t)
	prog := fixture(t, "prog.c")

	t.Run("native", func(t *testing.T) {
		r := newRecorder(t, "native.mi", "prog.c run natively under gdb: breakpoint, frames, threads, finish, exit.", mi.Options{})
		r.send("-file-exec-and-symbols", prog)
		r.send("-break-insert", "grow")
		r.try("-break-insert", "nosuch")
		r.try("-no-such-command")
		r.send("-interpreter-exec", "console", `"echo caf\303\251 \033[1mbold\033[0m \"q\" tab\there\n"`)
		r.resume("-exec-run")
		r.send("-stack-list-frames")
		r.send("-thread-info")
		r.resume("-exec-finish")
		r.send("-break-condition", "1", "n == 100")
		r.resume("-exec-continue")
		r.send("-thread-info")
		r.send("-stack-list-frames")
		r.send("-break-delete", "1")
		r.resume("-exec-continue")
		r.save()
	})

	t.Run("overload", func(t *testing.T) {
		cxx := fixture(t, "overload.cc")
		for _, iface := range []string{"mi3", "mi2"} {
			r := newRecorder(t, "overload-"+iface+".mi", "A breakpoint with two locations (overload.cc) in "+iface+".",
				mi.Options{Args: []string{"--interpreter=" + iface}})
			r.send("-file-exec-and-symbols", cxx)
			r.send("-break-insert", "twice")
			r.send("-break-list")
			r.save()
		}
	})

	t.Run("vgdb", func(t *testing.T) {
		v := startValgrind(t, prog)
		r := newRecorder(t, "vgdb.mi", "prog.c under valgrind massif, reached through vgdb; its --vgdb-prefix and paths were private temporary ones.", mi.Options{Async: true})
		r.send("-file-exec-and-symbols", prog)
		r.send("-target-select", "remote", v.Target())
		r.send("-interpreter-exec", "console", mi.Quote("monitor detailed_snapshot "+filepath.Join(v.Dir, "early.massif")))
		r.send("-interpreter-exec", "console", mi.Quote("monitor no_such_command"))
		r.send("-break-insert", "malloc")
		r.send("-break-delete", "1")
		r.send("-break-insert", "grow")
		r.resume("-exec-continue")
		r.send("-interpreter-exec", "console", mi.Quote("monitor detailed_snapshot "+filepath.Join(v.Dir, "hit1.massif")))
		r.send("-stack-list-frames")
		r.send("-thread-info")
		r.resume("-exec-finish")
		r.send("-break-condition", "2", "n == 100")
		r.resume("-exec-continue")
		r.send("-thread-info")
		r.send("-break-delete", "2")
		r.resume("-exec-continue")
		r.try("-thread-info")
		r.save()
		v.Wait(t)
	})

	t.Run("exits", func(t *testing.T) {
		exit := fixture(t, "exit.c")
		for _, arg := range []string{"10", "segv"} {
			v := startValgrind(t, exit, arg)
			r := newRecorder(t, "exit-"+arg+".mi", "exit.c "+arg+" under valgrind massif through vgdb: how the target's end looks.", mi.Options{Async: true})
			r.send("-file-exec-and-symbols", exit)
			r.send("-target-select", "remote", v.Target())
			if stop := r.resume("-exec-continue"); stop.String("reason") == "signal-received" {
				r.resume("-exec-continue")
			}
			r.save()
			v.Wait(t)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		r := newRecorder(t, "interrupt.mi", "prog.c spin run natively with mi-async on, stopped by -exec-interrupt.", mi.Options{Async: true})
		r.send("-file-exec-and-symbols", prog)
		r.send("-exec-arguments", "spin")
		r.send("-exec-run")
		r.wait(mi.TypeExec, "running")
		time.Sleep(200 * time.Millisecond)
		r.send("-exec-interrupt")
		r.wait(mi.TypeExec, "stopped")
		r.save()
	})
}
