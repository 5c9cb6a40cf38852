package arenas

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
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
		deadline := time.Now().Add(2 * time.Minute)
		for proc.Stat(pid).State != 'T' {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the fixture never stopped", r)
			}
			time.Sleep(2 * time.Millisecond)
		}
		l, err := LayoutOf(pid)
		if err != nil {
			t.Skipf("glibc's layout: %v", err)
		}
		mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Read(mem, l)
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
