package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// reader is a snapctl reader command started on its own, for the tests
// that feed it odd files and signal it while it reads.
type reader struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	cancel         context.CancelFunc
}

// startReader starts the snapctl binary with args; stdin may be nil. A
// reader that has not ended after 20 seconds is killed, and the test fails.
func startReader(t *testing.T, stdin io.Reader, args ...string) *reader {
	t.Helper()
	ctx, cancel := testenv.Context(20 * time.Second)
	r := &reader{cancel: cancel}
	r.cmd = exec.CommandContext(ctx, snapctlBinary(t), args...)
	r.cmd.Stdin = stdin
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	r.cmd.WaitDelay = time.Second
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			r.cmd.Wait()
		}
		cancel()
	})
	return r
}

// wait returns the reader's exit code; a reader killed by the test's
// deadline fails the test.
func (r *reader) wait(t *testing.T) int {
	t.Helper()
	err := r.cmd.Wait()
	r.cancel()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.Exited()) {
		t.Fatalf("snapctl %v did not end by itself: %v\nstderr:\n%s", r.cmd.Args[1:], err, r.stderr.String())
	}
	return r.cmd.ProcessState.ExitCode()
}

// oddFiles makes the files a reader must refuse or read bounded: a
// directory, /dev/zero, a sparse file of a terabyte (zeros, no newline),
// and a gzip stream that inflates to 64 MiB of zeros.
func oddFiles(t *testing.T) map[string]string {
	dir := t.TempDir()
	huge := filepath.Join(dir, "huge.massif")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, 1<<40); err != nil {
		t.Fatal(err)
	}
	// At gzip's fastest level: the same 64 MiB inflated, in a fraction
	// of the default level's time (over a second of processor time
	// under the race detector).
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write(make([]byte, 64<<20))
	zw.Close()
	bomb := filepath.Join(dir, "bomb.massif.gz")
	if err := os.WriteFile(bomb, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"directory": sub, "/dev/zero": "/dev/zero", "huge": huge, "gzip bomb": bomb}
}

// show, diff and export refuse a directory and a device before reading,
// and read a huge file or a gzip bomb only up to MaxLineLength: each ends
// at once with exit code 1 and says why.
func TestReadersRefuseOddFiles(t *testing.T) {
	t.Parallel()
	good := recordedMassif + "leak.massif"
	odd := oddFiles(t)
	wants := map[string]string{
		"directory": odd["directory"] + " is a directory, not a regular file or a pipe",
		"/dev/zero": "/dev/zero is a character device, not a regular file or a pipe",
		"huge":      odd["huge"] + ":1: a line longer than 4 MiB: not a massif file",
		"gzip bomb": odd["gzip bomb"] + ":1: a line longer than 4 MiB: not a massif file",
	}
	for name, path := range odd {
		for _, args := range [][]string{
			{"show", path},
			{"show", path + "#peak"},
			{"diff", good, path},
			{"diff", path, good},
			{"export", "--format", "folded", path, "-o", "-"},
		} {
			t.Run(name+"/"+strings.Join(args[:len(args)-1], " "), func(t *testing.T) {
				t.Parallel()
				start := time.Now()
				r := startReader(t, nil, args...)
				code := r.wait(t)
				if code != exitFailure {
					t.Errorf("exit code %d, want %d\nstderr:\n%s", code, exitFailure, r.stderr.String())
				}
				if msg := oneLine(t, r.stderr.String()); !strings.Contains(msg, wants[name]) {
					t.Errorf("message %q, want it to say %q", msg, wants[name])
				}
				if d := time.Since(start); d > testenv.Scaled(10*time.Second) {
					t.Errorf("took %v", d)
				}
			})
		}
	}
	// Standard input is read bounded too.
	t.Run("stdin /dev/zero", func(t *testing.T) {
		zero, err := os.Open("/dev/zero")
		if err != nil {
			t.Fatal(err)
		}
		defer zero.Close()
		r := startReader(t, zero, "show", "-")
		if code := r.wait(t); code != exitFailure {
			t.Errorf("exit code %d, want %d\nstderr:\n%s", code, exitFailure, r.stderr.String())
		}
		if msg := oneLine(t, r.stderr.String()); !strings.Contains(msg, "<stdin>:1: a line longer than 4 MiB") {
			t.Errorf("message %q does not say the line is too long", msg)
		}
	})
}

// compare refuses a run.json that is not a regular file (a FIFO without a
// writer, /dev/zero, a directory) or is larger than a run.json can be, at
// once, with exit code 5: a reader of a FIFO no longer waits for a writer
// that never comes.
func TestCompareRefusesOddRunJSON(t *testing.T) {
	t.Parallel()
	good := t.TempDir()
	manifest := `{"schema": "` + runjson.Schema + `", "status": "completed", "breakpoints": [], "stops": [], "suspects": []}`
	if err := os.WriteFile(filepath.Join(good, "run.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		make func(path string) error
		want string
	}{
		{"FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "run.json is a FIFO, not a regular file"},
		{"/dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "run.json is a character device, not a regular file"},
		{"directory", func(p string) error { return os.Mkdir(p, 0o755) }, "run.json is a directory, not a regular file"},
		{"huge", func(p string) error {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
			return os.Truncate(p, 1<<40)
		}, "run.json is larger than 256 MiB, too large for a run.json"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := tt.make(filepath.Join(dir, "run.json")); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{good, dir}, {dir, good}} {
				r := startReader(t, nil, append([]string{"compare"}, args...)...)
				if code := r.wait(t); code != exitInput {
					t.Errorf("compare %v: exit code %d, want %d\nstderr:\n%s", args, code, exitInput, r.stderr.String())
				}
				if msg := oneLine(t, r.stderr.String()); !strings.Contains(msg, tt.want) {
					t.Errorf("compare %v: message %q, want it to say %q", args, msg, tt.want)
				}
			}
		})
	}
	// A symlink to a regular run.json is fine.
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(good, "run.json"), filepath.Join(linked, "run.json")); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := snapctlCmd(t, "compare", good, linked); code != exitOK {
		t.Errorf("compare through a symlink: exit code %d\n%s", code, stderr)
	}
}

// A reader waiting on a pipe whose writer never finishes ends at the first
// SIGINT, SIGTERM or SIGHUP with exit code 130, whichever reader it is and
// wherever it waits: for a FIFO's writer, in the middle of the file, on
// standard input.
func TestReadersEndOnSignal(t *testing.T) {
	t.Parallel()
	header := "desc: (none)\ncmd: ./leak\ntime_unit: i\n"
	for _, tt := range []struct {
		name   string
		sig    syscall.Signal
		writer bool // a writer opens the FIFO and writes the header
		args   func(fifo string) []string
	}{
		{"show/no writer/SIGINT", syscall.SIGINT, false, func(f string) []string { return []string{"show", f} }},
		{"show/mid-file/SIGTERM", syscall.SIGTERM, true, func(f string) []string { return []string{"show", f} }},
		{"diff/mid-file/SIGHUP", syscall.SIGHUP, true, func(f string) []string { return []string{"diff", recordedMassif + "leak.massif", f} }},
		{"export/mid-file/SIGTERM", syscall.SIGTERM, true, func(f string) []string {
			return []string{"export", "--format", "folded", f, "-o", "-"}
		}},
		{"show stdin/mid-file/SIGINT", syscall.SIGINT, true, func(string) []string { return []string{"show", "-"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "massif.fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			args := tt.args(fifo)
			var stdin io.Reader
			// reading says that snapctl has begun to read, and has set up
			// its signals before (main.go): it has opened the FIFO, or
			// waits in open(2) for a writer, or has read the header from
			// standard input.
			reading := func(pid int) bool {
				fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
				for _, fd := range fds {
					if target, _ := os.Readlink(fd); target == fifo {
						return true
					}
				}
				return !tt.writer && testenv.InSyscall(pid, "openat")
			}
			if args[1] == "-" {
				pr, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer pr.Close()
				defer pw.Close()
				pw.WriteString(header)
				stdin = pr
				reading = func(int) bool {
					var n int32
					_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, pr.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
					return errno == 0 && n == 0
				}
			}
			r := startReader(t, stdin, args...)
			if tt.writer && stdin == nil {
				// Opening for writing returns once snapctl has opened the
				// FIFO for reading.
				w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				w.WriteString(header)
			}
			waitCaught(t, r.cmd.Process.Pid, tt.sig)
			for deadline := testenv.NewDeadline(time.Minute); !reading(r.cmd.Process.Pid); time.Sleep(5 * time.Millisecond) {
				if deadline.Passed() {
					t.Fatal("snapctl did not begin to read in a minute")
				}
			}
			if err := r.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			code := r.wait(t)
			if d := time.Since(sent); d > testenv.Scaled(3*time.Second) {
				t.Errorf("snapctl took %v to end after %v", d, tt.sig)
			}
			if code != exitInterrupted {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", code, exitInterrupted, r.stderr.String())
			}
			if msg := oneLine(t, r.stderr.String()); !strings.HasSuffix(msg, "interrupted") {
				t.Errorf("message %q does not say snapctl was interrupted", msg)
			}
		})
	}
}

// A FIFO with a writer is read like a file, and so is a shell's <(...):
// pipes are for the massif readers what they are for cat.
func TestReadersReadPipes(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(recordedMassif + "leak.massif")
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "massif.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.Write(data)
		w.Close()
	}()
	code, stdout, stderr := snapctlCmd(t, "show", fifo)
	if code != exitOK || !strings.Contains(stdout, "massif file "+fifo) {
		t.Errorf("show FIFO: exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	testenv.MustHave(t, "bash")
	out, err := exec.Command("bash", "-c", `"$0" show <(cat "$1")`, snapctlBinary(t), recordedMassif+"leak.massif").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "snapshots, ") {
		t.Errorf("show <(cat file): %v\n%s", err, out)
	}
}

// waitCaught waits until process pid catches sig: before, the signal
// would end it by its default action, not by snapctl's handling.
func waitCaught(t *testing.T, pid int, sig syscall.Signal) {
	t.Helper()
	bit := uint64(1) << (uint(sig) - 1)
	for deadline := testenv.NewDeadline(10 * time.Second); !deadline.Passed(); time.Sleep(10 * time.Millisecond) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if mask, ok := strings.CutPrefix(line, "SigCgt:\t"); ok {
				if v, err := strconv.ParseUint(mask, 16, 64); err == nil && v&bit != 0 {
					return
				}
			}
		}
	}
	t.Fatalf("process %d does not catch %v after 10s", pid, sig)
}
