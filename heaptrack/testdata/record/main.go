// Command record runs a program natively under heaptrack's preload
// library with package heaptrack reading its stream to the end, and
// prints what the stream held and what the recording cost snapctl: for
// measuring heaptrack's overhead and snapctl's memory (issue 21).
//
//	go run ./heaptrack/testdata/record PROGRAM [ARGS...]
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/heaptrack"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: record PROGRAM [ARGS...]")
		os.Exit(2)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	tools, err := heaptrack.FindTools("")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "record-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	start := time.Now()
	rec, err := heaptrack.Start(tools, filepath.Join(dir, "fifo"))
	if err != nil {
		return err
	}
	defer rec.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), tools.Env(rec.FIFO())...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	ran := time.Since(start)
	s, err := rec.Finish(ctx, 0)
	if err != nil {
		return err
	}
	rep := rec.Replayer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Printf("events %d, live at exit %d bytes in %d blocks, %d sites\n", rep.Events, s.HeapBytes, rep.LiveBlocks, len(s.Tree.Children))
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	fmt.Printf("program %.2fs, stream read %.2fs after it; snapctl peak RSS %s, Go heap in use %d KiB\n",
		ran.Seconds(), time.Since(start).Seconds()-ran.Seconds(), vmHWM(), ms.HeapInuse>>10)
	fmt.Printf("cpu: snapctl %.2fs, program and heaptrack_interpret %.2fs\n", cpu(self), cpu(kids))
	return nil
}

func cpu(r syscall.Rusage) float64 {
	return float64(r.Utime.Sec+r.Stime.Sec) + float64(r.Utime.Usec+r.Stime.Usec)/1e6
}

// vmHWM is this process's peak resident set.
func vmHWM() string {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:"))
		}
	}
	return "?"
}
