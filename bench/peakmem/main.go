// Command peakmem runs a command and prints its own peak resident memory,
// the VmHWM of /proc/PID/status, read every 10 ms until the command ends:
// a read, no fork, so the poll costs the measured run next to nothing.
// The command's children (snapctl's valgrind and gdb) are not counted, as
// they would be in its ru_maxrss. bench/large.sh runs it.
//
// Usage: peakmem [-o FILE] COMMAND [ARGS...]
//
// It prints "peak_kib N" on standard error, or into FILE with -o, and
// exits with the command's exit status. With -log FILE it also writes a
// line every -every (default 10 s), and at each rise of VmHWM by 256 KiB
// or more: the seconds since the start, VmHWM and VmRSS in KiB and, with
// -lines GLOB, the number of lines in the files GLOB matches (a run
// directory's spool of stops: how far a run has got), so that a run cut
// short still says what its peak was at the stops it reached.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	out := flag.String("o", "", "write the peak to this file instead of standard error")
	logFile := flag.String("log", "", "write the peak as it goes to this file")
	every := flag.Duration("every", 10*time.Second, "with -log, write a line at least this often")
	lines := flag.String("lines", "", "with -log, count the lines of the files this glob matches")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: peakmem [-o FILE] [-log FILE [-every D] [-lines GLOB]] COMMAND [ARGS...]")
	}
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
	var lg *sampleLog
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "peakmem:", err)
			cmd.Process.Kill()
			os.Exit(1)
		}
		defer f.Close()
		lg = &sampleLog{w: f, start: time.Now(), every: *every, glob: *lines, counted: map[string]*counted{}}
		fmt.Fprintln(f, "# seconds vmhwm_kib vmrss_kib lines")
	}
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
			if lg != nil {
				lg.sample(status, kib)
			}
		}
		select {
		case err = <-done:
			break poll
		case <-tick.C:
		}
	}
	if lg != nil {
		lg.write(peak, -1)
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

// sampleLog writes the peak as a run goes (-log).
type sampleLog struct {
	w       *os.File
	start   time.Time
	every   time.Duration
	glob    string
	last    time.Time
	lastHWM int64
	counted map[string]*counted
}

// counted is how far a file's lines have been counted.
type counted struct {
	off   int64
	lines int64
}

// sample writes a line when the last is -every old or VmHWM rose by
// 256 KiB since it.
func (l *sampleLog) sample(status string, hwm int64) {
	now := time.Now()
	if now.Sub(l.last) < l.every && hwm-l.lastHWM < 256 {
		return
	}
	rss, _ := field(status, "VmRSS:")
	l.write(hwm, rss)
}

func (l *sampleLog) write(hwm, rss int64) {
	l.last, l.lastHWM = time.Now(), hwm
	fmt.Fprintf(l.w, "%.1f %d %d %d\n", time.Since(l.start).Seconds(), hwm, rss, l.lines())
}

// lines counts the lines of the files the glob matches, reading only what
// was written since the last count.
func (l *sampleLog) lines() int64 {
	if l.glob == "" {
		return -1
	}
	names, _ := filepath.Glob(l.glob)
	var n int64
	buf := make([]byte, 64<<10)
	for _, name := range names {
		c := l.counted[name]
		if c == nil {
			c = &counted{}
			l.counted[name] = c
		}
		if f, err := os.Open(name); err == nil {
			f.Seek(c.off, 0)
			for {
				k, err := f.Read(buf)
				c.off += int64(k)
				c.lines += int64(bytes.Count(buf[:k], []byte{'\n'}))
				if err != nil {
					break
				}
			}
			f.Close()
		}
		n += c.lines
	}
	return n
}

// hwm reads VmHWM, in KiB, from a /proc/PID/status file.
func hwm(status string) (int64, bool) { return field(status, "VmHWM:") }

// field reads a field in KiB from a /proc/PID/status file.
func field(status, name string) (int64, bool) {
	data, err := os.ReadFile(status)
	if err != nil {
		return 0, false
	}
	i := bytes.Index(data, []byte(name))
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(data[i+len(name):])
	if len(f) == 0 {
		return 0, false
	}
	kib, err := strconv.ParseInt(string(f[0]), 10, 64)
	return kib, err == nil
}
