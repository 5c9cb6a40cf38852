// Command pair times `snapctl run` against the hand-written gdb script that
// takes the same snapshots, on one of the benchmark targets under bench/,
// and prints the ratios. The bench/*.sh scripts run it.
//
// A target is a folder bench/NAME holding NAME.c (compiled here with
// gcc -g -O0 -pthread), plan.yaml (snapctl's plan) and stops.gdb (the same
// breakpoints written by hand: break, `monitor xtmemory`,
// continue). With -baseline detailed the script is stops-detailed.gdb
// instead, which takes `monitor detailed_snapshot` (the manual hunt's
// snapshot: bytes, no blocks), and -plan names another plan in the folder
// (bench/bigheap/plan-bytes.yaml: valgrind.blocks: false, the same
// snapshot). The two sides run alternately, the gdb script first, ROUNDS
// times:
//
//   - gdb: valgrind --tool=massif --threshold=0 --fair-sched=yes --vgdb=yes
//     --vgdb-error=0 (as snapctl, no --xtree-memory: monitor xtmemory
//     needs none) runs the target in a folder of its own, and once its log says it
//     waits for gdb, `gdb -batch -x stops.gdb` connects through vgdb; the
//     side ends when both have exited.
//   - snapctl: `snapctl run --quiet --out DIR plan.yaml TARGET ARGS`.
//
// Each side's wall time runs from the start of its first process to the
// end of its last one. Its CPU time is the user and system time of its
// whole process tree, read with getrusage(RUSAGE_CHILDREN) before and after:
// pair is a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so a process
// whose parent died before it is still reaped here and counted. Nothing
// forks inside the timed window: the gdb side's wait for valgrind reads its
// log every 10 ms from here, as snapctl does for itself. snapctl's peak
// memory is its VmHWM in /proc/PID/status, read every 10 ms from here (a
// read, no fork); getrusage cannot give it, since a process's ru_maxrss
// covers its children, and valgrind is snapctl's child. Each round also
// splits the CPU time: gdb and vgdb (gdb's rusage, which covers vgdb) against
// valgrind on the script's side, snapctl's own process (its /proc/PID/stat,
// read with VmHWM) against its children on snapctl's.
//
// Every side has a deadline (-timeout): past it, pair kills the side's
// whole process tree, says so, and counts a hang. On SIGINT, SIGTERM or
// SIGHUP, and on any error, pair kills every process it started (all its
// descendants) and removes its work folder. Each side has a private
// --vgdb-prefix: the gdb side's in its own folder, snapctl's under the
// TMPDIR pair gives it.
//
// With -hangs N pair runs only snapctl, N times, and prints how many runs
// completed within the deadline.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const usage = `usage: pair [flags] TARGET [ARGS...]

TARGET is a folder under bench/ (stops, churn, threads, bigheap); ARGS are
the target program's arguments. Flags:
`

// config is what the command line asks for.
type config struct {
	root     string // the repository
	target   string // bench/NAME
	args     []string
	stops    int // snapshots each side must take
	rounds   int
	hangs    int // > 0: only snapctl, this many runs
	timeout  time.Duration
	gdbExtra []string // extra valgrind options for the gdb side
	keep     bool
	sizes    bool   // report disk sizes
	plan     string // snapctl's plan, in bench/NAME
	baseline string // the script's snapshot: "xtmemory" or "detailed"
}

// sample is one side of one round.
type sample struct {
	wall, cpu time.Duration
	peakKiB   int64 // snapctl's VmHWM, 0 for the gdb side
	// own is the CPU time of the side's driving process alone: gdb and
	// vgdb for the script, snapctl for snapctl (the rest is valgrind,
	// and gdb and vgdb under snapctl).
	own      time.Duration
	dirBytes int64 // snapctl's run folder, or the gdb side's snapshots
	hung     bool
	stops    int
}

// bench holds the state shared with the signal handler.
type bench struct {
	cfg     config
	work    string
	snapctl string
	binary  string
	name    string
}

var aborting atomic.Bool

func main() {
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "pair:", err)
		os.Exit(2)
	}
	// Orphans of our children (valgrind after snapctl died, vgdb after
	// gdb) are re-parented to us, so we reap them and count their CPU.
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, 36 /* PR_SET_CHILD_SUBREAPER */, 1, 0); e != 0 {
		fmt.Fprintln(os.Stderr, "pair: prctl(PR_SET_CHILD_SUBREAPER):", e)
		os.Exit(1)
	}
	work, err := os.MkdirTemp("/tmp", "snapctl-bench-") // no spaces: monitor commands split on them
	if err != nil {
		fmt.Fprintln(os.Stderr, "pair:", err)
		os.Exit(1)
	}
	b := &bench{cfg: cfg, work: work}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		aborting.Store(true)
		fmt.Fprintf(os.Stderr, "\npair: %v: killing every process started here\n", s)
		b.cleanup()
		os.Exit(130)
	}()
	code := 0
	if err := b.run(); err != nil {
		fmt.Fprintln(os.Stderr, "pair:", err)
		code = 1
	}
	if aborting.Load() {
		select {} // the signal handler exits
	}
	b.cleanup()
	os.Exit(code)
}

func parseFlags() (config, error) {
	var c config
	var extra string
	flag.Usage = func() {
		fmt.Fprint(os.Stderr, usage)
		flag.PrintDefaults()
	}
	flag.StringVar(&c.root, "root", ".", "the snapctl repository")
	flag.IntVar(&c.stops, "stops", 0, "snapshots each side must take (required)")
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of gdb script then snapctl")
	flag.IntVar(&c.hangs, "hangs", 0, "run only snapctl this many times and count the runs that complete")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Minute, "deadline of one side; past it the side is killed and counted as a hang")
	flag.StringVar(&extra, "gdb-valgrind-args", "", "extra valgrind options for the gdb side, space-separated (e.g. snapctl's own --vex-guest-chase=no)")
	flag.BoolVar(&c.keep, "keep", false, "keep the work folder")
	flag.BoolVar(&c.sizes, "sizes", false, "report snapctl's run folder and the gdb script's snapshots in bytes")
	flag.StringVar(&c.plan, "plan", "plan.yaml", "snapctl's plan, a file in the target's folder")
	flag.StringVar(&c.baseline, "baseline", "xtmemory", "the gdb script's snapshot: xtmemory (stops.gdb) or detailed (stops-detailed.gdb, monitor detailed_snapshot)")
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		return c, errors.New("no target")
	}
	c.target = flag.Arg(0)
	c.args = flag.Args()[1:]
	c.gdbExtra = strings.Fields(extra)
	if c.stops <= 0 {
		return c, errors.New("-stops must be positive")
	}
	if c.rounds <= 0 {
		return c, errors.New("-rounds must be positive")
	}
	if c.baseline != "xtmemory" && c.baseline != "detailed" {
		return c, fmt.Errorf("-baseline must be xtmemory or detailed, got %q", c.baseline)
	}
	if strings.ContainsRune(c.plan, '/') {
		return c, fmt.Errorf("-plan names a file in the target's folder, got %q", c.plan)
	}
	root, err := filepath.Abs(c.root)
	if err != nil {
		return c, err
	}
	c.root = root
	return c, nil
}

func (b *bench) run() error {
	if err := b.build(); err != nil {
		return err
	}
	if b.cfg.hangs > 0 {
		return b.hangs()
	}
	return b.pairs()
}

// build compiles snapctl and the target into the work folder.
func (b *bench) build() error {
	b.name = filepath.Base(b.cfg.target)
	dir := filepath.Join(b.cfg.root, "bench", b.name)
	for _, f := range []string{b.name + ".c", b.cfg.plan, b.script()} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return fmt.Errorf("target %s: %w", b.name, err)
		}
	}
	bin := filepath.Join(b.work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	b.snapctl = filepath.Join(bin, "snapctl")
	b.binary = filepath.Join(bin, b.name)
	fmt.Fprintln(os.Stderr, "building snapctl and", b.name+"...")
	gobuild := exec.Command("go", "build", "-o", b.snapctl, "./cmd/snapctl")
	gobuild.Dir = b.cfg.root
	if out, err := gobuild.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	gcc := exec.Command("gcc", "-g", "-O0", "-pthread", "-o", b.binary, filepath.Join(dir, b.name+".c"))
	if out, err := gcc.CombinedOutput(); err != nil {
		return fmt.Errorf("gcc: %v\n%s", err, out)
	}
	return nil
}

func (b *bench) targetDir() string { return filepath.Join(b.cfg.root, "bench", b.name) }

// script is the gdb script's file name in the target's folder.
func (b *bench) script() string {
	if b.cfg.baseline == "detailed" {
		return "stops-detailed.gdb"
	}
	return "stops.gdb"
}

// pairs runs the rounds and prints the ratios.
func (b *bench) pairs() error {
	c := b.cfg
	fmt.Printf("target:  bench/%s, args %q, %d stops, %d rounds (gdb script, then snapctl)\n", b.name, c.args, c.stops, c.rounds)
	fmt.Printf("sides:   %s (monitor %s) against snapctl with %s\n", b.script(), map[string]string{"xtmemory": "xtmemory", "detailed": "detailed_snapshot"}[c.baseline], c.plan)
	var gs, ss []sample
	for r := 1; r <= c.rounds; r++ {
		g, err := b.gdbSide()
		if err != nil {
			return fmt.Errorf("round %d, gdb script: %w", r, err)
		}
		s, err := b.snapctlSide(r)
		if err != nil {
			return fmt.Errorf("round %d, snapctl: %w", r, err)
		}
		gs, ss = append(gs, g), append(ss, s)
		fmt.Printf("round %d: gdb %7.2f s wall %7.2f s cpu | snapctl %7.2f s wall %7.2f s cpu %6.1f MiB peak | ratio wall %.2f cpu %.2f\n",
			r, g.wall.Seconds(), g.cpu.Seconds(), s.wall.Seconds(), s.cpu.Seconds(), mib(s.peakKiB*1024),
			ratio(s.wall, g.wall), ratio(s.cpu, g.cpu))
		fmt.Printf("         cpu split: gdb+vgdb %.2f s, rest (valgrind) %.2f s | snapctl itself %.2f s, rest (valgrind, gdb, vgdb) %.2f s\n",
			g.own.Seconds(), (g.cpu - g.own).Seconds(), s.own.Seconds(), (s.cpu - s.own).Seconds())
	}
	var walls, cpus []float64
	var peak int64
	for i := range gs {
		walls = append(walls, ratio(ss[i].wall, gs[i].wall))
		cpus = append(cpus, ratio(ss[i].cpu, gs[i].cpu))
		peak = max(peak, ss[i].peakKiB)
	}
	fmt.Printf("per stop (median): gdb %.2f ms wall, snapctl %.2f ms wall\n",
		median(millisPerStop(gs, c.stops)), median(millisPerStop(ss, c.stops)))
	fmt.Printf("wall snapctl/gdb: median %.2f (min %.2f, max %.2f)\n", median(walls), minOf(walls), maxOf(walls))
	fmt.Printf("cpu  snapctl/gdb: median %.2f (min %.2f, max %.2f)\n", median(cpus), minOf(cpus), maxOf(cpus))
	fmt.Printf("snapctl peak memory: %.1f MiB (VmHWM, the highest of the rounds)\n", mib(peak*1024))
	if c.sizes {
		last := len(gs) - 1
		fmt.Printf("snapctl run folder: %.1f MiB; the gdb script's %d snapshots: %.1f MiB; run folder / snapshots: %.3f\n",
			mib(ss[last].dirBytes), c.stops, mib(gs[last].dirBytes), float64(ss[last].dirBytes)/float64(gs[last].dirBytes))
	}
	return nil
}

// hangs runs snapctl alone cfg.hangs times, each with the deadline.
func (b *bench) hangs() error {
	c := b.cfg
	fmt.Printf("target:  bench/%s, args %q, %d stops, %d runs of snapctl, %v deadline each\n", b.name, c.args, c.stops, c.hangs, c.timeout)
	done := 0
	for r := 1; r <= c.hangs; r++ {
		s, err := b.snapctlSide(r)
		switch {
		case s.hung:
			fmt.Printf("run %d: HANG after %d of %d stops: killed at the %v deadline\n", r, s.stops, c.stops, c.timeout)
		case err != nil:
			fmt.Printf("run %d: FAILED: %v\n", r, err)
		default:
			done++
			fmt.Printf("run %d: completed, %d stops, %.2f s wall, %.2f s cpu, %.1f MiB peak\n", r, s.stops, s.wall.Seconds(), s.cpu.Seconds(), mib(s.peakKiB*1024))
		}
	}
	fmt.Printf("completed: %d of %d\n", done, c.hangs)
	if done != c.hangs {
		return fmt.Errorf("%d of %d runs did not complete", c.hangs-done, c.hangs)
	}
	return nil
}

// gdbSide runs valgrind and the hand-written gdb script once.
func (b *bench) gdbSide() (sample, error) {
	dir := filepath.Join(b.work, "gdb")
	snaps := filepath.Join(dir, "snapshots")
	if err := os.RemoveAll(dir); err != nil {
		return sample{}, err
	}
	if err := os.MkdirAll(snaps, 0o755); err != nil {
		return sample{}, err
	}
	prefix := filepath.Join(dir, "vgdb")
	logFile := filepath.Join(dir, "valgrind.log")
	vgArgs := []string{"--tool=massif", "--threshold=0", "--fair-sched=yes", "--vgdb=yes", "--vgdb-error=0",
		"--vgdb-prefix=" + prefix, "--massif-out-file=" + filepath.Join(dir, "massif.out"), "--log-file=" + logFile}
	vgArgs = append(vgArgs, b.cfg.gdbExtra...)
	vgArgs = append(append(vgArgs, b.binary), b.cfg.args...)
	var gdbOut bytes.Buffer

	before := childrenCPU()
	t0 := time.Now()
	deadline := t0.Add(b.cfg.timeout)
	vg := exec.Command("valgrind", vgArgs...)
	vg.Dir = snaps // stops.gdb names its snapshots relative to the target's folder
	vg.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := vg.Start(); err != nil {
		return sample{}, err
	}
	vgDone := waitIn(vg)
	if err := waitReady(logFile, vgDone, deadline); err != nil {
		b.killAll()
		<-vgDone
		b.sweep()
		return sample{}, err
	}
	gdb := exec.Command("gdb", "-batch", "-nx",
		"-ex", fmt.Sprintf("target remote | vgdb --vgdb-prefix=%s --pid=%d", prefix, vg.Process.Pid),
		"-x", filepath.Join(b.targetDir(), b.script()), b.binary)
	gdb.Stdout, gdb.Stderr = &gdbOut, &gdbOut
	gdb.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := gdb.Start(); err != nil {
		b.killAll()
		<-vgDone
		b.sweep()
		return sample{}, err
	}
	gdbDone := waitIn(gdb)
	hung := false
	timer := time.NewTimer(time.Until(deadline))
	var vgErr, gdbErr error
	for vgDone != nil || gdbDone != nil {
		select {
		case vgErr = <-vgDone:
			vgDone = nil
		case gdbErr = <-gdbDone:
			gdbDone = nil
		case <-timer.C:
			hung = true
			b.killAll()
		}
	}
	timer.Stop()
	wall := time.Since(t0)
	b.sweep()
	s := sample{wall: wall, cpu: childrenCPU() - before, hung: hung}
	if gdb.ProcessState != nil {
		s.own = gdb.ProcessState.UserTime() + gdb.ProcessState.SystemTime()
	}
	s.stops, s.dirBytes = countFiles(snaps)
	switch {
	case hung:
		return s, fmt.Errorf("hung: killed after %v, %d of %d snapshots taken", b.cfg.timeout, s.stops, b.cfg.stops)
	case gdbErr != nil || vgErr != nil:
		return s, fmt.Errorf("gdb: %v, valgrind: %v\n%s", gdbErr, vgErr, tail(gdbOut.Bytes(), 20))
	case s.stops != b.cfg.stops:
		return s, fmt.Errorf("the gdb script took %d snapshots, want %d\n%s", s.stops, b.cfg.stops, tail(gdbOut.Bytes(), 20))
	}
	return s, nil
}

// snapctlSide runs `snapctl run` once.
func (b *bench) snapctlSide(round int) (sample, error) {
	dir := filepath.Join(b.work, "snapctl")
	out := filepath.Join(dir, "run")
	tmp := filepath.Join(dir, "tmp")
	if err := os.RemoveAll(dir); err != nil {
		return sample{}, err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return sample{}, err
	}
	var output bytes.Buffer
	args := append([]string{"run", "--quiet", "--out", out, filepath.Join(b.targetDir(), b.cfg.plan), b.binary}, b.cfg.args...)

	before := childrenCPU()
	t0 := time.Now()
	cmd := exec.Command(b.snapctl, args...)
	cmd.Dir = dir
	// snapctl's private folder, with its vgdb FIFOs, goes under TMPDIR.
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = &output, &output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	done := waitIn(cmd)
	var peak, ownTicks atomic.Int64
	stopPoll := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pollProc(cmd.Process.Pid, &peak, &ownTicks, stopPoll)
	}()
	hung := false
	timer := time.NewTimer(b.cfg.timeout)
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		hung = true
		// snapctl first, so that it cannot start anything new, then
		// everything under it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		b.killAll()
		err = <-done
	}
	timer.Stop()
	close(stopPoll)
	wg.Wait()
	wall := time.Since(t0)
	b.sweep()
	s := sample{wall: wall, cpu: childrenCPU() - before, peakKiB: peak.Load(), hung: hung,
		own: time.Duration(ownTicks.Load()) * time.Second / clockTicks}
	s.dirBytes = dirBytes(out)
	if hung {
		s.stops, _ = countFiles(filepath.Join(out, "snapshots"))
		return s, fmt.Errorf("hung: killed after %v", b.cfg.timeout)
	}
	if err != nil {
		return s, fmt.Errorf("snapctl run: %v\n%s", err, tail(output.Bytes(), 20))
	}
	n, err := countStops(filepath.Join(out, "run.json"))
	if err != nil {
		return s, err
	}
	s.stops = n
	if n != b.cfg.stops {
		return s, fmt.Errorf("run.json holds %d stops, want %d", n, b.cfg.stops)
	}
	if b.cfg.keep {
		_ = os.Rename(dir, fmt.Sprintf("%s-%d", dir, round))
	}
	return s, nil
}

// waitIn waits for cmd in a goroutine.
func waitIn(cmd *exec.Cmd) chan error {
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return ch
}

// waitReady waits until valgrind's log says its gdbserver accepts vgdb,
// reading the log every 10 ms as snapctl does.
func waitReady(logFile string, exited chan error, deadline time.Time) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(logFile); err == nil && bytes.Contains(data, []byte("TO DEBUG THIS PROCESS USING GDB")) {
			return nil
		}
		select {
		case err := <-exited:
			exited <- err
			return fmt.Errorf("valgrind exited before it waited for gdb: %v", err)
		case <-tick.C:
			if time.Now().After(deadline) {
				return errors.New("valgrind did not wait for gdb before the deadline")
			}
		}
	}
}

// clockTicks is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux).
const clockTicks = 100

// pollProc records, until stop is closed, the highest VmHWM of pid and
// its own user+system time in clock ticks (the last reading, at most 10 ms
// before it exited).
func pollProc(pid int, peak, ticks *atomic.Int64, stop chan struct{}) {
	path := fmt.Sprintf("/proc/%d/status", pid)
	statPath := fmt.Sprintf("/proc/%d/stat", pid)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(statPath); err == nil {
			// pid (comm) state ppid ...: utime and stime are the 14th and
			// 15th fields, the 12th and 13th after the comm.
			if i := bytes.LastIndexByte(data, ')'); i >= 0 {
				f := strings.Fields(string(data[i+1:]))
				if len(f) > 12 {
					u, _ := strconv.ParseInt(f[11], 10, 64)
					st, _ := strconv.ParseInt(f[12], 10, 64)
					if u+st > ticks.Load() {
						ticks.Store(u + st)
					}
				}
			}
		}
		if data, err := os.ReadFile(path); err == nil {
			if i := bytes.Index(data, []byte("VmHWM:")); i >= 0 {
				f := strings.Fields(string(data[i+len("VmHWM:"):]))
				if len(f) > 0 {
					if kib, err := strconv.ParseInt(f[0], 10, 64); err == nil && kib > peak.Load() {
						peak.Store(kib)
					}
				}
			}
		}
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// childrenCPU is the user and system time of every reaped descendant.
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		panic(err) // cannot fail with a valid pointer and RUSAGE_CHILDREN
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// descendants lists the processes under ours, from /proc.
func descendants() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	kids := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(data, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		kids[ppid] = append(kids[ppid], pid)
	}
	var out []int
	queue := []int{os.Getpid()}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, k := range kids[p] {
			out = append(out, k)
			queue = append(queue, k)
		}
	}
	return out
}

// killAll sends SIGKILL to every process under ours.
func (b *bench) killAll() {
	for _, pid := range descendants() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// sweep reaps the orphans re-parented to us once a side's own processes
// were waited for. What is still running a second later is left over: it
// is named, killed and reaped.
func (b *bench) sweep() {
	deadline := time.Now().Add(time.Second)
	for {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		left := descendants()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				fmt.Fprintf(os.Stderr, "pair: process %d left over, killed: %s\n", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			deadline = time.Now().Add(time.Second)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cleanup kills everything we started and removes the work folder.
func (b *bench) cleanup() {
	for range 50 {
		if len(descendants()) == 0 {
			break
		}
		b.killAll()
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b.cfg.keep {
		fmt.Fprintln(os.Stderr, "pair: kept", b.work)
		return
	}
	_ = os.RemoveAll(b.work)
}

// countFiles counts the files under dir and adds up their sizes.
func countFiles(dir string) (n int, size int64) {
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n++
				size += info.Size()
			}
		}
		return nil
	})
	return n, size
}

func dirBytes(dir string) int64 {
	_, size := countFiles(dir)
	return size
}

// countStops counts the stops in run.json without keeping them.
func countStops(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var m struct {
		Stops []struct{} `json:"stops"`
	}
	if err := json.NewDecoder(bufio.NewReader(f)).Decode(&m); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return len(m.Stops), nil
}

func tail(b []byte, lines int) string {
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func ratio(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func millisPerStop(s []sample, stops int) []float64 {
	var out []float64
	for _, x := range s {
		out = append(out, float64(x.wall.Microseconds())/1000/float64(stops))
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}
