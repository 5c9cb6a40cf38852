package arenas

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// readStopped runs driver/testdata/native/frag.c with blocks, threads
// and rounds, which stops itself with SIGSTOP after reading mallinfo2()
// in each round; each round it reads the stopped process and checks the
// figures against the line the fixture prints once continued.
func readStopped(t *testing.T, blocks, threads, rounds int) []Result {
	t.Helper()
	bin := testenv.Build(t, "../../driver/testdata/native/frag.c")
	cmd := exec.Command(bin, strconv.Itoa(blocks), strconv.Itoa(threads), strconv.Itoa(rounds), "-", "stop")
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	pid := cmd.Process.Pid
	lines := bufio.NewScanner(out)
	lines.Scan() // "threads N blocks B"
	var results []Result
	for r := 0; r < rounds; r++ {
		deadline := testenv.NewDeadline(2 * time.Minute)
		for proc.Stat(pid).State != 'T' {
			if deadline.Passed() {
				t.Fatalf("round %d: the fixture never stopped", r)
			}
			time.Sleep(2 * time.Millisecond)
		}
		mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err != nil {
			t.Fatal(err)
		}
		g, err := Find(pid, mem, Query{DebugDirs: []string{"/usr/lib/debug"}})
		if err != nil {
			t.Fatal(err)
		}
		if g.Why != "" {
			mem.Close()
			t.Skipf("glibc's layout: %s", g.Why)
		}
		res, err := Read(mem, g.Layout)
		mem.Close()
		if err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		results = append(results, res)
		syscall.Kill(pid, syscall.SIGCONT)
		if !lines.Scan() {
			t.Fatalf("round %d: no line from the fixture", r)
		}
		if got, want := format(r, res.Mallinfo), lines.Text(); got != want || res.Locked != 0 {
			t.Errorf("read (%d locked):\n%s\nmallinfo2() in the program:\n%s", res.Locked, got, want)
		}
		lines.Scan() // "mallinfo2 took T ms cpu C ms"
	}
	return results
}

func format(r int, m Mallinfo) string {
	return fmt.Sprintf("round %d arena %d ordblks %d smblks %d hblks %d hblkhd %d usmblks %d fsmblks %d uordblks %d fordblks %d keepcost %d",
		r, m.Arena, m.Ordblks, m.Smblks, m.Hblks, m.Hblkhd, m.Usmblks, m.Fsmblks, m.Uordblks, m.Fordblks, m.Keepcost)
}

// TestReadEqualsMallinfo2: the figures read from a stopped process are
// mallinfo2()'s, field for field, with one thread and with six (each in
// an arena of its own, and threads that started and exited), on heaps
// whose free halves sit in tcaches, fastbins and bins.
func TestReadEqualsMallinfo2(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ blocks, threads int }{{20000, 1}, {60000, 6}, {300000, 1}} {
		t.Run(fmt.Sprintf("%d-blocks-%d-threads", c.blocks, c.threads), func(t *testing.T) {
			t.Parallel()
			res := readStopped(t, c.blocks, c.threads, 2)
			if least := uint64(c.blocks / 2 * 8 / 10); res[0].Chunks < least || res[0].Arenas < min64(c.threads, 2) {
				t.Errorf("%+v: want at least %d free chunks walked and %d arenas", res[0], least, c.threads)
			}
		})
	}
}

func min64(a, b int) int {
	if a < b {
		return a
	}
	return b
}

// startTLS runs testdata/tls.c, built with flags, with threads threads:
// its pid, mallinfo2's address and every thread's thread pointer.
func startTLS(t *testing.T, threads int, flags ...string) (int, uint64, []uint64) {
	t.Helper()
	bin := testenv.Build(t, "testdata/tls.c", append([]string{"-pthread"}, flags...)...)
	cmd := exec.Command(bin, strconv.Itoa(threads))
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	lines := bufio.NewScanner(out)
	var addrs []uint64
	for len(addrs) < threads+2 && lines.Scan() {
		v, err := strconv.ParseUint(lines.Text(), 0, 64)
		if err != nil {
			t.Fatalf("the fixture's line %q: %v", lines.Text(), err)
		}
		addrs = append(addrs, v)
	}
	if len(addrs) != threads+2 {
		t.Fatalf("the fixture printed %d addresses, want %d", len(addrs), threads+2)
	}
	return cmd.Process.Pid, addrs[0], addrs[1:]
}

// TestFindTcache: the distance Find gives below each thread's thread
// pointer holds the thread's tcache, a chunk of glibc's
// tcache_perthread_struct's size, in a dynamic program of five threads
// and in a static program (its own symbol table, its one TLS block).
func TestFindTcache(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		flags []string
	}{{"dynamic", nil}, {"static", []string{"-static"}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pid, fn, tps := startTLS(t, 4, c.flags...)
			mem := &Process{Pid: pid}
			g, err := Find(pid, mem, Query{Mallinfo2: fn, DebugDirs: []string{"/usr/lib/debug"}})
			if err != nil {
				t.Fatal(err)
			}
			if g.TcacheWhy != "" {
				t.Skipf("the tcaches: %s", g.TcacheWhy)
			}
			for i, tp := range tps {
				p := make([]byte, 8)
				if _, err := mem.ReadAt(p, int64(tp-uint64(g.Tcache))); err != nil {
					t.Fatalf("thread %d: %v", i, err)
				}
				head := make([]byte, 8)
				if _, err := mem.ReadAt(head, int64(le64(p, 0)-8)); err != nil {
					t.Fatalf("thread %d: its tcache at 0x%x: %v", i, le64(p, 0), err)
				}
				size, widths := le64(head, 0)&^7, map[uint64]bool{}
				for _, w := range g.TcacheStruct.Widths {
					widths[w[0]] = true
				}
				if !widths[size] {
					t.Errorf("thread %d: 0x%x below its thread pointer points to a chunk of %d bytes, not a tcache (%v)", i, g.Tcache, size, g.TcacheStruct.Widths)
				}
			}
		})
	}
}

// TestFindWithoutSymbols: without libc's symbol table (no debug file
// where Find looks) neither the arenas nor the tcaches are found, and
// Find says why, naming the package that installs it; the count of
// arenas is unknown.
func TestFindWithoutSymbols(t *testing.T) {
	t.Parallel()
	pid, fn, _ := startTLS(t, 1)
	g, err := Find(pid, &Process{Pid: pid}, Query{Mallinfo2: fn, DebugDirs: []string{t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	want := "cannot be found: no symbol table for libc (install Debian's libc6-dbg, or the distribution's libc debug symbols)"
	if g.Why != "glibc's arenas "+want || g.TcacheWhy != "glibc's per-thread caches "+want || g.NArenas != 0 || g.MainArena != 0 {
		t.Errorf("found %+v", g)
	}
	if _, err := Find(pid, &Process{Pid: pid}, Query{Mallinfo2: 8}); err == nil || !strings.Contains(err.Error(), "maps no file at mallinfo2 (0x8)") {
		t.Errorf("mallinfo2 at 8: %v", err)
	}
}

// BenchmarkFind: what finding glibc's allocator costs a process once
// (libc's debug file's symbol table read, the tcache's distance found).
func BenchmarkFind(b *testing.B) {
	bin := testenv.Build(b, "testdata/tls.c", "-pthread")
	cmd := exec.Command(bin, "1")
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(b))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	lines := bufio.NewScanner(out)
	lines.Scan()
	fn, _ := strconv.ParseUint(lines.Text(), 0, 64)
	pid := cmd.Process.Pid
	for b.Loop() {
		if _, err := Find(pid, &Process{Pid: pid}, Query{Mallinfo2: fn, DebugDirs: []string{"/usr/lib/debug"}}); err != nil {
			b.Fatal(err)
		}
	}
}
