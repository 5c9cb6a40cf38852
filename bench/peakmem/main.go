// Command peakmem runs a command and prints its own peak resident memory,
// the VmHWM of /proc/PID/status, read every 10 ms until the command ends:
// a read, no fork, so the poll costs the measured run next to nothing.
// The command's children (snapctl's valgrind and gdb) are not counted, as
// they would be in its ru_maxrss. bench/large.sh runs it.
//
// Usage: peakmem [-o FILE] COMMAND [ARGS...]
//
// It prints "peak_kib N" on standard error, or into FILE with -o, and
// exits with the command's exit status.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	out := flag.String("o", "", "write the peak to this file instead of standard error")
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: peakmem [-o FILE] COMMAND [ARGS...]") }
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The command gets Ctrl-C from the terminal itself; a SIGTERM sent to
	// us is passed on.
	signal.Ignore(syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "peakmem:", err)
		os.Exit(127)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-term
		cmd.Process.Signal(s)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
	var peak int64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var err error
poll:
	for {
		// Read before waiting, so that the last reading is taken as late
		// as possible; a zombie's status has no VmHWM, and a reaped
		// process has no status.
		if kib, ok := hwm(status); ok {
			peak = max(peak, kib)
		}
		select {
		case err = <-done:
			break poll
		case <-tick.C:
		}
	}
	line := fmt.Sprintf("peak_kib %d\n", peak)
	if *out != "" {
		if werr := os.WriteFile(*out, []byte(line), 0o644); werr != nil {
			fmt.Fprintln(os.Stderr, "peakmem:", werr)
			os.Exit(1)
		}
	} else {
		os.Stderr.WriteString(line)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peakmem:", err)
		os.Exit(1)
	}
}

// hwm reads VmHWM, in KiB, from a /proc/PID/status file.
func hwm(status string) (int64, bool) {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0, false
	}
	i := bytes.Index(data, []byte("VmHWM:"))
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+len("VmHWM:"):])
	if len(f) == 0 {
		return 0, false
	}
	kib, err := strconv.ParseInt(string(f[0]), 10, 64)
	return kib, err == nil
}
