// Command arenas times what reading glibc's arenas from a stopped process
// costs snapctl (internal/arenas, as at a native stop) on the fragmented
// heap of driver/testdata/native/frag.c, paired, round by round, against
// mallinfo2() called by the program itself on the same heap just before
// (the baseline: glibc walking its own lists in place), and checks that
// the figures are equal field for field. bench/arenas.sh runs it.
//
// Usage: arenas [-rounds N] [-heap small|mixed] [-file] [-cpuprofile F] FRAG BLOCKS THREADS
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/arenas"
	"github.com/snapctl/snapctl/internal/proc"
)

func main() {
	rounds := flag.Int("rounds", 5, "rounds: one reading and one mallinfo2() each")
	heap := flag.String("heap", "small", "the fixture's heap: small or mixed")
	viaFile := flag.Bool("file", false, "read through /proc/PID/mem only, not process_vm_readv")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the readings to this file")
	flag.Parse()
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "arenas:", err)
			os.Exit(1)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if flag.NArg() != 3 {
		fmt.Fprintln(os.Stderr, "usage: arenas [-rounds N] [-heap small|mixed] [-file] FRAG BLOCKS THREADS")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), flag.Arg(1), flag.Arg(2), *heap, *rounds, *viaFile); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "arenas:", err)
		os.Exit(1)
	}
}

func run(frag, blocks, threads, heap string, rounds int, viaFile bool) error {
	cmd := exec.Command(frag, blocks, threads, strconv.Itoa(rounds), "-", "stop", heap)
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
	var r *arenas.Reader
	var ours, theirs, oursCPU, theirsCPU []float64
	var res arenas.Result
	for round := 0; round < rounds; round++ {
		for proc.Stat(pid).State != 'T' {
			if !proc.Stat(pid).OK {
				return fmt.Errorf("the program ended")
			}
			time.Sleep(time.Millisecond)
		}
		if r == nil {
			mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
			if err != nil {
				return err
			}
			defer mem.Close()
			g, err := arenas.Find(pid, mem, arenas.Query{DebugDirs: []string{"/usr/lib/debug"}})
			if err != nil {
				return err
			}
			if g.Why != "" {
				return errors.New(g.Why)
			}
			l := g.Layout
			src := &arenas.Process{Pid: pid, File: mem}
			if viaFile {
				src.Pid = 0
			}
			r = arenas.NewReader(src)
			defer r.Close()
			layout = l
		}
		t0, c0 := time.Now(), cpu()
		res, err = r.Read(layout)
		ours = append(ours, time.Since(t0).Seconds()*1000)
		oursCPU = append(oursCPU, (cpu()-c0)*1000)
		if err != nil {
			return err
		}
		syscall.Kill(pid, syscall.SIGCONT)
		lines.Scan()
		m := res.Mallinfo
		got := fmt.Sprintf("round %d arena %d ordblks %d smblks %d hblks %d hblkhd %d usmblks %d fsmblks %d uordblks %d fordblks %d keepcost %d",
			round, m.Arena, m.Ordblks, m.Smblks, m.Hblks, m.Hblkhd, m.Usmblks, m.Fsmblks, m.Uordblks, m.Fordblks, m.Keepcost)
		if got != lines.Text() {
			return fmt.Errorf("read:\n%s\nmallinfo2():\n%s", got, lines.Text())
		}
		lines.Scan()
		var ms, cms float64
		if _, err := fmt.Sscanf(lines.Text(), "mallinfo2 took %f ms cpu %f ms", &ms, &cms); err != nil {
			return fmt.Errorf("the program's line %q: %v", lines.Text(), err)
		}
		theirs = append(theirs, ms)
		theirsCPU = append(theirsCPU, cms)
	}
	ratios := make([]float64, len(ours))
	for i := range ours {
		ratios[i] = ours[i] / theirs[i]
	}
	fmt.Printf("%d free chunks in %d arenas, %.0f MiB read a reading; figures equal mallinfo2()'s in %d rounds\n",
		res.Chunks, res.Arenas, float64(res.BytesRead)/(1<<20), rounds)
	fmt.Printf("snapctl's reading:       wall %s; cpu %s\n", stats(ours, " ms"), stats(oursCPU, " ms"))
	fmt.Printf("mallinfo2() in process:  wall %s; cpu %s\n", stats(theirs, " ms"), stats(theirsCPU, " ms"))
	fmt.Printf("ratio per round (wall):  %s\n", stats(ratios, ""))
	return nil
}

var layout arenas.Layout

// cpu is this process's user and system time, in seconds: the reading
// runs on one goroutine, and nothing else here works meanwhile.
func cpu() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func stats(v []float64, unit string) string {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	f := "%.1f"
	if unit == "" {
		f = "%.2f"
	}
	return strings.Join([]string{"median " + fmt.Sprintf(f, med) + unit, "min " + fmt.Sprintf(f, s[0]) + unit, "max " + fmt.Sprintf(f, s[len(s)-1]) + unit}, "  ")
}
