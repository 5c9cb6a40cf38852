package proc

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestSelf: the test's own process reads as itself.
func TestSelf(t *testing.T) {
	pid := os.Getpid()
	st := Stat(pid)
	// The process's state is its main thread's, which may sleep while
	// another thread of the test runs this (a loaded machine showed S).
	if !st.OK || st.Pid != pid || st.PPid != os.Getppid() || st.State != 'R' && st.State != 'S' || !st.Alive() {
		t.Errorf("Stat(self) = %+v, want running or sleeping, parent %d", st, os.Getppid())
	}
	status, err := Status(pid)
	if err != nil || status["Pid"] != strconv.Itoa(pid) || status["TracerPid"] != "0" {
		t.Errorf("Status(self) = %v, %v", status["Pid"], err)
	}
	if name := Name(pid); name != "proc.test" {
		t.Errorf("Name(self) = %q, want proc.test", name)
	}
	// The CPU time grows as the process works: ticks of 10 ms, so work
	// until one more is counted.
	sink := 0
	for deadline := time.Now().Add(time.Minute); Stat(pid).CPU <= st.CPU; {
		for i := range 1 << 20 {
			sink += i
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed %d ticks for a minute of work (%d)", st.CPU, sink)
		}
	}
}

// TestZombieAndGone: an exited child not yet waited for is a zombie, not
// alive; once reaped it is gone, its name unknown.
func TestZombieAndGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); Stat(pid).State != 'Z'; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie: %+v", pid, Stat(pid))
		}
	}
	if Alive(pid) {
		t.Errorf("zombie %d reads as alive", pid)
	}
	cmd.Wait()
	if st := Stat(pid); st.OK || Alive(pid) || Name(pid) != "unknown" {
		t.Errorf("reaped child %d: %+v, name %q", pid, st, Name(pid))
	}
	if _, err := Status(pid); err == nil {
		t.Errorf("Status of reaped child %d: no error", pid)
	}
	if st := Stat(0); st.OK {
		t.Errorf("Stat(0) = %+v", st)
	}
}

// TestMapsPathWithSpaces: a library loaded from a directory whose name
// has spaces is one mapping path, as the process sees it, and the
// kernel's " (deleted)" is not part of a path.
func TestMapsPathWithSpaces(t *testing.T) {
	for _, c := range []struct {
		line string
		want Mapping
	}{
		{"7f1c2a000000-7f1c2a001000 r-xp 00001000 fd:01 1234                       /tmp/my dir/lib x.so",
			Mapping{Lo: 0x7f1c2a000000, Hi: 0x7f1c2a001000, Perms: "r-xp", Offset: 0x1000, Path: "/tmp/my dir/lib x.so"}},
		{"55d0c0000000-55d0c0021000 rw-p 00000000 00:00 0                          [heap]",
			Mapping{Lo: 0x55d0c0000000, Hi: 0x55d0c0021000, Perms: "rw-p", Path: "[heap]"}},
		{"7f1c2a000000-7f1c2a001000 r-xp 00000000 fd:01 99 /usr/bin/server (deleted)",
			Mapping{Lo: 0x7f1c2a000000, Hi: 0x7f1c2a001000, Perms: "r-xp", Path: "/usr/bin/server", Deleted: true}},
		{"7ffd1000-7ffd2000 rw-p 00000000 00:00 0",
			Mapping{Lo: 0x7ffd1000, Hi: 0x7ffd2000, Perms: "rw-p"}},
	} {
		got, ok := parseMapping(c.line)
		if !ok || got != c.want {
			t.Errorf("parseMapping(%q) = %+v, %v; want %+v", c.line, got, ok, c.want)
		}
	}
	ms, err := Maps(os.Getpid())
	if err != nil || len(ms) == 0 {
		t.Fatalf("Maps(self): %d mappings, %v", len(ms), err)
	}
	exe, _ := os.Executable()
	found := false
	for _, m := range ms {
		found = found || m.Path == exe
	}
	if !found {
		t.Errorf("Maps(self) does not map %s", exe)
	}
}

// Auxv reads this process's auxiliary vector: its page size (AT_PAGESZ)
// is the one the runtime knows, and a key it lacks is not found.
func TestAuxv(t *testing.T) {
	if v, ok := Auxv(os.Getpid(), 6); !ok || v != uint64(os.Getpagesize()) {
		t.Errorf("AT_PAGESZ %d, %v; want %d", v, ok, os.Getpagesize())
	}
	if v, ok := Auxv(os.Getpid(), 1<<40); ok {
		t.Errorf("key 1<<40: %d", v)
	}
}
