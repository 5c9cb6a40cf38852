// Command arenas times what reading glibc's arenas from a stopped process
// costs snapctl (internal/arenas), on the fragmented heap of
// driver/testdata/native/frag.c, against mallinfo2() called by the
// program itself on the same heap, and checks that the figures are equal.
// bench/arenas.sh runs it.
//
// Usage: arenas [-reads N] FRAG BLOCKS THREADS
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/arenas"
	"github.com/snapctl/snapctl/internal/proc"
)

var (
	viaFile *bool
	heap    *string
)

func main() {
	reads := flag.Int("reads", 5, "readings of the stopped heap")
	heap = flag.String("heap", "small", "the fixture's heap: small or mixed")
	viaFile = flag.Bool("file", false, "read through /proc/PID/mem only, not process_vm_readv")
	flag.Parse()
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: arenas [-reads N] FRAG BLOCKS THREADS")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), flag.Arg(2), *reads); err != nil {
		fmt.Fprintln(os.Stderr, "arenas:", err)
		os.Exit(1)
	}
}

func run(frag, blocks, threads string, reads int) error {
	cmd := exec.Command(frag, blocks, threads, "1", "-", "stop", *heap)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	pid := cmd.Process.Pid
	lines := bufio.NewScanner(out)
	lines.Scan()
	built := time.Now()
	for proc.Stat(pid).State != 'T' {
		if !proc.Stat(pid).OK {
			return fmt.Errorf("the program ended")
		}
		time.Sleep(time.Millisecond)
	}
	fmt.Printf("heap built in %.2f s\n", time.Since(built).Seconds())
	l, err := arenas.LayoutOf(pid)
	if err != nil {
		return err
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return err
	}
	defer mem.Close()
	var times []time.Duration
	var res arenas.Result
	src := &arenas.Process{Pid: pid, File: mem}
	if *viaFile {
		src.Pid = 0
	}
	r := arenas.NewReader(src)
	defer r.Close()
	for i := 0; i < reads; i++ {
		t0 := time.Now()
		res, err = r.Read(l)
		times = append(times, time.Since(t0))
		if err != nil {
			return err
		}
	}
	syscall.Kill(pid, syscall.SIGCONT)
	lines.Scan()
	m := res.Mallinfo
	got := fmt.Sprintf("round 0 arena %d ordblks %d smblks %d hblks %d hblkhd %d usmblks %d fsmblks %d uordblks %d fordblks %d keepcost %d",
		m.Arena, m.Ordblks, m.Smblks, m.Hblks, m.Hblkhd, m.Usmblks, m.Fsmblks, m.Uordblks, m.Fordblks, m.Keepcost)
	if got != lines.Text() {
		return fmt.Errorf("read:\n%s\nmallinfo2():\n%s", got, lines.Text())
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	fmt.Printf("%d free chunks in %d arenas, %.0f MiB read: median %s, min %s, max %s (%d readings); figures equal mallinfo2()'s\n",
		res.Chunks, res.Arenas, float64(res.BytesRead)/(1<<20), ms(times[len(times)/2]), ms(times[0]), ms(times[len(times)-1]), reads)
	return nil
}
