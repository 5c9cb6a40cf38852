// Command seize measures a design for the native backend's measured stop
// without gdb or gdbserver: snapctl itself the process's tracer. It
// counts FUNCTION's hits in process PID in the kernel (the native
// backend's uprobes package, every EVERY-th hit measured) and takes each
// measured stop itself: PTRACE_SEIZE of every thread with
// PTRACE_O_TRACECLONE (threads that start later are traced from their
// first instruction), the measured hit's signal stop, PTRACE_INTERRUPT
// of every other thread, the measurement of the stopped process
// (resident memory, glibc's arenas with internal/arenas, each thread's
// tcache through the fs_base of its registers) appended to OUT as a JSON
// line, and every thread resumed. A held hit's stop (the hold signal, or
// the measured hits' signal with hit 0) is kept stopped until the
// measured stop is taken, then resumed with the others. SIGINT or SIGTERM:
// every thread stopped, the probe out, every thread detached. Killed, it
// leaves the process running: the kernel detaches a dead tracer, and the
// two signals' default action is to ignore them. It writes OUT.ready once
// the kernel counts, and at the end a summary to standard error: the
// measured stops, the hits counted, the ptrace events, how long a stop
// held the process and its parts, and its own processor time.
// bench/seize.sh runs it against the server alone and against `snapctl
// attach` (docs/facts.md, fact 134).
//
// Usage: seize PID FUNCTION EVERY OUT
package main

import (
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/internal/arenas"
	"github.com/snapctl/snapctl/internal/proc"
)

type thread struct {
	stopped bool
	sig     int  // signal to deliver on resume
	held    bool // kept stopped until the hold ends
}

// The tracer's state: the traced process, its threads, the kernel's
// counter and what a measurement reads with.
var (
	pid     int
	threads = map[int]*thread{}
	gone    = map[int]bool{} // threads that ended, which a clone event may still name
	ctr     *uprobes.Counter
	g       arenas.Glibc
	src     *arenas.Process
	reader  *arenas.Reader
	out     *os.File
	quit    atomic.Bool
)

// What the summary says: each measured stop's hold of the process and
// its parts (every thread stopped, measured, resumed), the measured
// stops and the ptrace events.
var (
	stopDur, stopAllDur, measDur, resDur []time.Duration
	nstops, events                       int
)

func die(f string, a ...any) { fmt.Fprintf(os.Stderr, "seize: "+f+"\n", a...); os.Exit(1) }

func main() {
	if len(os.Args) != 5 {
		die("usage: seize PID FUNCTION EVERY OUT")
	}
	pid, _ = strconv.Atoi(os.Args[1])
	fn := os.Args[2]
	every, _ := strconv.Atoi(os.Args[3])
	var err error
	out, err = os.Create(os.Args[4])
	if err != nil {
		die("%v", err)
	}
	src = &arenas.Process{Pid: pid}
	g, err = arenas.Find(pid, src, arenas.Query{DebugDirs: []string{"/usr/lib/debug"}})
	if err != nil || g.Why != "" || g.TcacheWhy != "" {
		die("glibc: %v %s %s", err, g.Why, g.TcacheWhy)
	}
	reader = arenas.NewReader(src)
	addr := funcAddr(pid, fn)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	// The hold signal to the process wakes the tracer's wait; its stop
	// is resumed without it, as every hold's.
	go func() { <-sigs; quit.Store(true); syscall.Tgkill(pid, pid, syscall.SIGURG) }()

	runtime.LockOSThread()
	// Seize every thread, until no new one appears.
	for {
		n := 0
		for _, tid := range tids(pid) {
			if threads[tid] != nil {
				continue
			}
			if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, unix.PTRACE_O_TRACECLONE, 0, 0); e != 0 {
				if e == unix.ESRCH {
					continue
				}
				die("seize %d: %v", tid, e)
			}
			threads[tid] = &thread{}
			n++
		}
		if n == 0 {
			break
		}
	}
	// Every thread stopped to place the probe, as uprobes.Add wants.
	stopAll(0)
	ctr, err = uprobes.New(pid, syscall.SIGWINCH, syscall.SIGURG, 1)
	if err != nil {
		die("counter: %v", err)
	}
	if err := ctr.Add(0, uprobes.Rule{Every: every}, []uint64{addr}, 0, 0); err != nil {
		die("probe: %v", err)
	}
	resumeAll()
	fmt.Fprintf(os.Stderr, "seize: counting %s at %#x in %d (%d threads)\n", fn, addr, pid, len(threads))
	os.WriteFile(os.Args[4]+".ready", nil, 0o644)

	for !quit.Load() {
		tid, ws, ok := wait()
		if !ok {
			break
		}
		if m := handle(tid, ws, false); m != 0 {
			take(m)
		}
	}
	// Detach: every thread stopped, the probe out, then detached.
	stopAll(0)
	final, _ := ctr.Read(0)
	ctr.Close()
	for tid := range threads {
		unix.PtraceDetach(tid)
	}
	sort.Slice(stopDur, func(i, j int) bool { return stopDur[i] < stopDur[j] })
	if len(stopDur) > 0 {
		fmt.Fprintf(os.Stderr, "seize: %d measured stops, %d hits, %d ptrace events; stop held the process median %v min %v max %v\n",
			nstops, final.Count, events, stopDur[len(stopDur)/2], stopDur[0], stopDur[len(stopDur)-1])
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Fprintf(os.Stderr, "seize: parts (median/min): stop all %v/%v, measure %v/%v, resume %v/%v; cpu user %.3fs sys %.3fs\n",
		med(stopAllDur), mn(stopAllDur), med(measDur), mn(measDur), med(resDur), mn(resDur),
		time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds())
	fmt.Println(nstops)
}

func wait() (int, unix.WaitStatus, bool) {
	var ws unix.WaitStatus
	for {
		tid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, 0, false
		}
		events++
		return tid, ws, true
	}
}

// handle one wait status. In a stop-all (all true), a thread's stop is
// recorded but it is not resumed. Returns a measured stop's thread to take,
// or 0.
func handle(tid int, ws unix.WaitStatus, all bool) (measured int) {
	t := threads[tid]
	if ws.Exited() || ws.Signaled() {
		delete(threads, tid)
		gone[tid] = true
		if tid == pid {
			quit.Store(true)
		}
		return 0
	}
	if !ws.Stopped() {
		return 0
	}
	if t == nil {
		// A new thread's first stop, before its parent's clone event.
		t = &thread{}
		threads[tid] = t
	}
	t.stopped = true
	raw := uint32(ws)
	sig := int(raw>>8) & 0xff
	ev := int(raw>>16) & 0xff
	switch {
	case ev == unix.PTRACE_EVENT_CLONE:
		msg, _ := unix.PtraceGetEventMsg(tid)
		if threads[int(msg)] == nil && !gone[int(msg)] {
			threads[int(msg)] = &thread{}
		}
		t.sig = 0
	case ev == unix.PTRACE_EVENT_STOP:
		// An interrupt (one sent to a thread that stopped for a signal
		// first comes after its resume), a new thread's first stop, or
		// a group stop.
		t.sig = 0
	case sig == int(syscall.SIGWINCH):
		// Taken (Take) once every thread is stopped.
		t.sig = 0
		t.held = true
		return tid
	case sig == int(syscall.SIGURG):
		// A held hit (the program's own SIGURG would be lost here: the
		// kernel's counter keeps no record of the hold signals it sent).
		t.sig = 0
		t.held = true
	default:
		t.sig = sig
	}
	if all || t.held {
		return 0
	}
	resume(tid, t)
	return 0
}

func resume(tid int, t *thread) {
	unix.PtraceCont(tid, t.sig)
	t.sig, t.stopped, t.held = 0, false, false
}

// stopAll interrupts every running thread and waits until each has stopped.
func stopAll(except int) []int {
	var measured []int
	for tid, t := range threads {
		if tid != except && !t.stopped {
			// A thread that started since stops by itself: traced from
			// its first instruction, it reports a first stop.
			unix.PtraceInterrupt(tid)
		}
	}
	for {
		running := 0
		for _, t := range threads {
			if !t.stopped {
				running++
			}
		}
		if running == 0 {
			return measured
		}
		tid, ws, ok := wait()
		if !ok {
			return measured
		}
		if m := handle(tid, ws, true); m != 0 {
			measured = append(measured, m)
		}
	}
}

func resumeAll() {
	for tid, t := range threads {
		if t.stopped {
			resume(tid, t)
		}
	}
}

// take a measured stop of thread tid.
func take(tid int) {
	t0 := time.Now()
	more := stopAll(tid)
	t1 := time.Now()
	for _, m := range append([]int{tid}, more...) {
		_, hit, ok := ctr.Take(m)
		switch {
		case !ok:
			// The program's own SIGWINCH: it gets it.
			threads[m].sig = int(syscall.SIGWINCH)
		case hit == 0:
		case os.Getenv("SEIZE_MEASURE") == "no":
			nstops++
		default:
			measure()
		}
	}
	t2 := time.Now()
	resumeAll()
	t3 := time.Now()
	stopDur = append(stopDur, t3.Sub(t0))
	stopAllDur = append(stopAllDur, t1.Sub(t0))
	measDur = append(measDur, t2.Sub(t1))
	resDur = append(resDur, t3.Sub(t2))
}

func measure() {
	nstops++
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	rss := kib(status, "\nVmRSS:")
	res, err := reader.Read(g.Layout)
	if err != nil {
		die("arenas: %v", err)
	}
	var cached int64
	head := uint64(g.Chunk.Links - g.Chunk.Head)
	for tid := range threads {
		var regs unix.PtraceRegs
		if unix.PtraceGetRegs(tid, &regs) != nil {
			continue
		}
		var b [8]byte
		if _, err := src.ReadAt(b[:], int64(regs.Fs_base-uint64(g.Tcache))); err != nil {
			continue
		}
		p := binary.LittleEndian.Uint64(b[:])
		if p == 0 {
			continue
		}
		data := make([]byte, head+2*uint64(g.TcacheStruct.Bins))
		if _, err := src.ReadAt(data, int64(p-head)); err != nil {
			continue
		}
		counts := data[head:]
		for i := 0; i < g.TcacheStruct.Bins; i++ {
			cached += int64(binary.LittleEndian.Uint16(counts[2*i:])) * int64(g.TcacheStruct.Min+g.TcacheStruct.Step*i)
		}
	}
	rec, _ := json.Marshal(map[string]any{"rss": rss, "in_use": int64(res.Mallinfo.Uordblks) - cached, "free": int64(res.Mallinfo.Fordblks) + cached, "tcache": cached, "threads": len(threads)})
	out.Write(append(rec, '\n'))
}

func kib(data []byte, key string) int64 {
	s := string(data)
	i := strings.Index(s, key)
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+len(key):])
	v, _ := strconv.ParseInt(f[0], 10, 64)
	return v * 1024
}

func tids(pid int) []int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func funcAddr(pid int, fn string) uint64 {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		die("%v", err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		die("%v", err)
	}
	syms, _ := f.Symbols()
	var v uint64
	for _, s := range syms {
		if s.Name == fn {
			v = s.Value
		}
	}
	if v == 0 {
		die("no %s", fn)
	}
	if f.Type != elf.ET_DYN {
		return v
	}
	maps, _ := proc.Maps(pid)
	for _, m := range maps {
		if m.Path == exe && m.Offset == 0 {
			return m.Lo + v
		}
	}
	die("no mapping of %s", exe)
	return 0
}

func med(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	c := append([]time.Duration(nil), d...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c[len(c)/2]
}

func mn(d []time.Duration) time.Duration {
	m := time.Duration(1 << 62)
	for _, v := range d {
		m = min(m, v)
	}
	return m
}
