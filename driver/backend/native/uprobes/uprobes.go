// Package uprobes counts a native run's breakpoint hits in the kernel: a
// uprobe at each of the breakpoint's addresses runs a small eBPF program
// that adds the hit to the breakpoint's count with an atomic fetch-and-add,
// decides from that number alone whether the hit is measured (the plan's
// skip, every and the last hit max_hits or end_run_after allow), and
// only then sends the hitting thread a signal that gdb reports as a stop
// (docs/design.md, "Hits counted in the kernel"). A hit that is not
// measured costs the kernel's trap and a few dozen eBPF instructions
// instead of a round trip through gdb: about 1 us of CPU where the kernel
// emulates the probed instruction, about 12 us where it single-steps it
// (docs/facts.md, fact 85), which is why the native launcher probes a
// function's first instruction (fact 95).
//
// Nothing is pinned: the maps, programs and perf events live as long as
// the file descriptors of snapctl that hold them, so the probes leave the
// program when snapctl ends, however it ends.
package uprobes

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"

	"github.com/snapctl/snapctl/internal/proc"
)

// ForceEnv names the environment variable that, set to "gdb" in a run's
// environment, has gdb count every hit of the native backend's
// breakpoints, as where the kernel refuses; otherwise the kernel counts
// them where it can (the native launcher reads it).
const ForceEnv = "SNAPCTL_HITS"

// Rule is which hits of a breakpoint are measured, in the plan's terms:
// hits 1..Skip are not counted, then counted hits 1, 1+Every, 1+2*Every...
// up to Last (0: no limit) are measured.
type Rule struct {
	Skip, Every, Last int
}

// Measured says whether hit n (skip included) is measured under r, and
// which hit after skip it is: as the eBPF program decides.
func (r Rule) Measured(n uint64) (hit uint64, ok bool) {
	if n <= uint64(r.Skip) {
		return 0, false
	}
	h := n - uint64(r.Skip)
	if r.Last > 0 && h > uint64(r.Last) {
		return 0, false
	}
	return h, (h-1)%uint64(max(r.Every, 1)) == 0
}

// slot is a breakpoint's record in the counts map, as the eBPF program
// lays it out (8-byte words).
const (
	offCount   = 0  // every hit, skip included
	offSkipTid = 8  // a thread whose next hit gdb counted already
	offBlocked = 16 // measured hits in a thread that blocked the signal
	offLastBlk = 24 // the last such hit (after skip)
	offFailed  = 32 // measured hits whose signal the kernel refused
	offTaken   = 40 // the last measured hit (skip included) whose stop was taken or never sent
	slotSize   = 48
)

// The halt map's words.
const (
	haltCount = 0 // measured stops on their way
	haltEpoch = 1 // measured stops taken: a hold's number
)

// Slot is what the kernel counted of a breakpoint.
type Slot struct {
	// Count is every hit, those under skip included.
	Count uint64
	// Blocked counts the measured hits that could not stop because
	// their thread blocked the stop signal; LastBlocked is the last of
	// them (after skip).
	Blocked, LastBlocked uint64
	// Failed counts the measured hits whose signal the kernel refused.
	Failed uint64
}

var (
	availOnce sync.Once
	availErr  error
	blockedAt int64 = -1 // task_struct.blocked's offset, -1 when unknown
)

// Available reports why the kernel cannot count hits here, nil when it
// can: no uprobe support, or no permission to load an eBPF program
// (root, or CAP_BPF with CAP_PERFMON).
func Available() error {
	availOnce.Do(func() { availErr = check() })
	return availErr
}

func check() error {
	if _, err := os.Stat("/sys/bus/event_source/devices/uprobe/type"); err != nil {
		if _, err := os.Stat("/sys/kernel/tracing/uprobe_events"); err != nil {
			return &Refused{"this kernel has no uprobes (no uprobe PMU, no tracefs)"}
		}
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return refusal("lifting the locked-memory limit for eBPF", err)
	}
	// Without the offset every measured hit is sent its signal (see
	// blocked).
	if off, err := memberOffset(kernelBTF, "task_struct", "blocked"); err == nil {
		blockedAt = off
	}
	c, err := New(0, syscall.SIGWINCH, syscall.SIGURG, 1)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.program(0, Rule{Skip: 1, Every: 2, Last: 3}); err != nil {
		return err
	}
	return nil
}

// Refused is the kernel's refusal to count hits (no permission, no
// uprobes, no eBPF) or the user's choice: the run counts with gdb.
type Refused struct{ Why string }

func (e *Refused) Error() string { return e.Why }

// refusal turns the kernel's refusal into what a user can act on; any
// other error is returned as it is.
func refusal(what string, err error) error {
	switch {
	case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES):
		return &Refused{what + ": not permitted (run as root, or give snapctl CAP_BPF and CAP_PERFMON)"}
	case errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, syscall.ENOSYS):
		return &Refused{fmt.Sprintf("%s: this kernel does not support it (%v)", what, err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Counter counts the hits of a process's breakpoints.
type Counter struct {
	pid    int
	sig    syscall.Signal
	hold   syscall.Signal // a held hit's signal (see program), 0 for sig
	counts *ebpf.Map      // id -> slot
	stops  *ebpf.Map      // thread id -> id<<32 | hit: the measured hit a thread stops at, hit 0 for a held one
	halt   *ebpf.Map      // haltCount: measured stops on their way; haltEpoch: the hold's number
	held   *ebpf.Map      // thread id -> the hold in which it was sent the hold signal
	mu     sync.Mutex
	bps    map[int]*probe
	rules  map[int]Rule
}

type probe struct {
	prog  *ebpf.Program
	links []link.Link
	addrs []uint64
}

// New makes the maps of a counter for process pid, whose measured hits
// stop with signal sig, for breakpoints 0..n-1. Held hits stop with
// signal hold, or with sig when hold is 0 (see program).
func New(pid int, sig, hold syscall.Signal, n int) (*Counter, error) {
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Name: "snapctl_hits", Type: ebpf.Array, KeySize: 4, ValueSize: slotSize, MaxEntries: uint32(max(n, 1))})
	if err != nil {
		return nil, refusal("creating the hit counts", err)
	}
	stops, err := ebpf.NewMap(&ebpf.MapSpec{Name: "snapctl_stops", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1 << 16})
	if err != nil {
		counts.Close()
		return nil, refusal("creating the stop table", err)
	}
	halt, err := ebpf.NewMap(&ebpf.MapSpec{Name: "snapctl_halt", Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 2})
	if err != nil {
		counts.Close()
		stops.Close()
		return nil, refusal("creating the halt", err)
	}
	held, err := ebpf.NewMap(&ebpf.MapSpec{Name: "snapctl_held", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 1 << 16})
	if err != nil {
		counts.Close()
		stops.Close()
		halt.Close()
		return nil, refusal("creating the held threads' table", err)
	}
	return &Counter{pid: pid, sig: sig, hold: hold, counts: counts, stops: stops, halt: halt, held: held, bps: map[int]*probe{}, rules: map[int]Rule{}}, nil
}

// Signal is the signal a measured hit stops with.
func (c *Counter) Signal() syscall.Signal { return c.sig }

// program builds breakpoint id's eBPF program for rule r.
//
// A measured hit stops its thread with the signal and sets the halt: from
// then until snapctl takes that stop (Take), any thread that hits a probe
// is stopped too, its hit counted
// but not measured (a held hit). A thread that runs freely between a
// measured hit and gdb's stop of every thread would otherwise do the
// work of many hits (a worker serving request after request from its
// queue in the milliseconds gdb takes), and the measured stop would read
// the heap of a later hit (docs/facts.md, fact 94). Held so, a
// thread gets no further than its next hit, as under gdb's breakpoint.
//
// A held hit stops with the hold signal, which gdbserver passes on to
// the program without a stop of every thread or a word to gdb: a stop
// it pulls while it stops every thread for the measured one waits until
// they all go on; one pulled before goes on at once and is held again
// at its next hit (docs/facts.md, fact 111). A thread let go so runs a
// call further at each such round: on a loaded machine, where the
// measured thread's stop reaches the tracer milliseconds late, hundreds
// (fact 116). So a thread is sent the hold signal once in a hold
// (the table held keeps the hold's number, haltEpoch, which each
// measured stop taken advances): held again in the same hold, it stops
// with the measured hits' signal and an entry of hit 0, a stop the
// tracer reports and snapctl resumes; as does every held hit where
// there is no hold signal (the program catches or blocks them all).
func (c *Counter) program(id int, r Rule) (*ebpf.Program, error) {
	every := max(r.Every, 1)
	insns := asm.Instructions{
		asm.FnGetCurrentPidTgid.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.StoreImm(asm.RFP, -4, int64(id), asm.Word),
		asm.LoadMapPtr(asm.R1, c.counts.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "exit"),
		asm.Mov.Reg(asm.R8, asm.R0),
		// The thread whose hit gdb counted when the kernel took over
		// runs the probed instruction again: that is not a new hit.
		asm.LoadMem(asm.R1, asm.R8, offSkipTid, asm.DWord),
		asm.Mov.Reg(asm.R2, asm.R7),
		asm.LSh.Imm(asm.R2, 32),
		asm.RSh.Imm(asm.R2, 32),
		asm.JNE.Reg(asm.R1, asm.R2, "count"),
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.R8, offSkipTid, asm.R1, asm.DWord),
		asm.Ja.Label("exit"),
		// n = ++count, atomically: the Nth hit is one thread's alone.
		asm.Mov.Imm(asm.R1, 1).WithSymbol("count"),
		fetchAdd(asm.R8, asm.R1, offCount),
		asm.Add.Imm(asm.R1, 1),
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.JLE.Imm(asm.R1, int32(r.Skip), "hold"),
		asm.Sub.Imm(asm.R1, int32(r.Skip)),
		asm.Mov.Reg(asm.R9, asm.R1),
	}
	if r.Last > 0 {
		insns = append(insns, asm.JGT.Imm(asm.R9, int32(r.Last), "hold"))
	}
	if every > 1 {
		insns = append(insns,
			asm.Mov.Reg(asm.R2, asm.R9),
			asm.Sub.Imm(asm.R2, 1),
			asm.Mod.Imm(asm.R2, int32(every)),
			asm.JNE.Imm(asm.R2, 0, "hold"),
		)
	}
	// A thread that blocks the signal would take it later, somewhere
	// else: it is not sent.
	insns = append(insns, c.blocked(c.sig, "send", "blocked")...)
	if blockedAt >= 0 {
		insns = append(insns,
			asm.Mov.Imm(asm.R1, 1).WithSymbol("blocked"),
			asm.AddAtomic.Mem(asm.R8, asm.R1, asm.DWord, offBlocked),
			asm.StoreMem(asm.R8, offLastBlk, asm.R9, asm.DWord),
			asm.StoreMem(asm.R8, offTaken, asm.R6, asm.DWord),
			asm.Ja.Label("exit"),
		)
	}
	insns = append(insns,
		// stops[tid] = id<<32 | hit, then the signal to this thread.
		asm.Mov.Reg(asm.R2, asm.R9).WithSymbol("send"),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
	)
	insns = append(insns, c.signal(id, "failed", "sent")...)
	insns = append(insns,
		asm.Mov.Imm(asm.R1, 1).WithSymbol("failed"),
		asm.AddAtomic.Mem(asm.R8, asm.R1, asm.DWord, offFailed),
		asm.StoreMem(asm.R8, offTaken, asm.R6, asm.DWord),
		asm.Ja.Label("exit"),
	)
	// The halt, until snapctl takes this stop.
	halt := c.setHalt("exit")
	halt[0] = halt[0].WithSymbol("sent")
	insns = append(insns, halt...)
	insns = append(insns, asm.Ja.Label("exit"))
	// A hit that is not measured while the halt is on: held, with hit 0
	// and never over an entry that is there (BPF_NOEXIST).
	// A hit after a measured one of this breakpoint whose stop is not
	// taken yet is held: the count decides, atomically, so that no
	// hit slips through before the measured hit's program has set the
	// halt (a program can be preempted there on a loaded machine). The
	// first measured hit after taken is skip+1 when taken <= skip, else
	// skip+1 + ((taken-skip-1)/every + 1) * every.
	first := int64(r.Skip) + 1
	insns = append(insns,
		asm.LoadMem(asm.R3, asm.R8, offTaken, asm.DWord).WithSymbol("hold"),
		asm.Mov.Imm(asm.R2, int32(first)),
		asm.JLT.Imm(asm.R3, int32(first), "next"),
		asm.Sub.Imm(asm.R3, int32(first)),
		asm.Div.Imm(asm.R3, int32(every)),
		asm.Add.Imm(asm.R3, 1),
		asm.Mul.Imm(asm.R3, int32(every)),
		asm.Add.Reg(asm.R2, asm.R3),
	)
	next := asm.Instructions{}
	if r.Last > 0 {
		next = append(next, asm.JGT.Imm(asm.R2, int32(int64(r.Skip)+int64(r.Last)), "global"))
	}
	next = append(next, asm.JLT.Reg(asm.R2, asm.R6, "holdit"))
	next[0] = next[0].WithSymbol("next")
	insns = append(insns, next...)
	// Any breakpoint's measured stop on its way: the halt.
	insns = append(insns, c.haltOn("global", "exit")...)
	stop := "holdit"
	if c.hold != 0 {
		// The hold signal, which the tracer collects and passes on
		// without a stop: the thread waits in its signal stop until
		// then, and the program ignores the signal. Once in a hold:
		// a thread held again in the same hold was let go, and
		// stops with the measured hits' signal (R9 is the hold's
		// number, held[tid] the hold it was last sent the signal in).
		stop = "reheld"
		insns = append(insns,
			asm.StoreImm(asm.RFP, -44, haltEpoch, asm.Word).WithSymbol("holdit"),
			asm.LoadMapPtr(asm.R1, c.halt.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -44),
			asm.FnMapLookupElem.Call(),
			asm.Mov.Imm(asm.R9, 0),
			asm.JEq.Imm(asm.R0, 0, "heldlookup"),
			asm.LoadMem(asm.R9, asm.R0, 0, asm.DWord),
			asm.StoreMem(asm.RFP, -56, asm.R9, asm.DWord).WithSymbol("heldlookup"),
			asm.StoreMem(asm.RFP, -60, asm.R7, asm.Word),
			asm.LoadMapPtr(asm.R1, c.held.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -60),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "firsthold"),
			asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
			asm.JEq.Reg(asm.R1, asm.R9, "reheld"),
			asm.LoadMapPtr(asm.R1, c.held.FD()).WithSymbol("firsthold"),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -60),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, -56),
			asm.Mov.Imm(asm.R4, 0), // BPF_ANY
			asm.FnMapUpdateElem.Call(),
		)
		insns = append(insns, c.blocked(c.hold, "holdsend", "exit")...)
		insns = append(insns,
			asm.Mov.Imm(asm.R1, int32(c.hold)).WithSymbol("holdsend"),
			asm.FnSendSignalThread.Call(),
			asm.Ja.Label("exit"),
		)
	}
	blk := c.blocked(c.sig, "holdsend0", "exit")
	blk[0] = blk[0].WithSymbol(stop)
	insns = append(insns, blk...)
	insns = append(insns,
		asm.Mov.Imm(asm.R2, 0).WithSymbol("holdsend0"),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST
	)
	insns = append(insns, c.signal(id, "exit", "exit")...)
	insns = append(insns,
		asm.Mov.Imm(asm.R0, 0).WithSymbol("exit"),
		asm.Return(),
	)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "snapctl_hit",
		Type:         ebpf.Kprobe,
		Instructions: insns,
		// bpf_send_signal_thread and bpf_probe_read_kernel are the
		// kernel's GPL-only helpers.
		License: "GPL",
	})
	if err != nil {
		return nil, refusal("loading the hit counter", err)
	}
	return prog, nil
}

// blocked goes to blocked when the current thread blocks signal sig,
// else to send; when the kernel's BTF does not say where a task keeps
// its blocked signals, always to send. The first instruction is
// labelled with nothing: it follows on.
func (c *Counter) blocked(sig syscall.Signal, send, blocked string) asm.Instructions {
	if blockedAt < 0 {
		return asm.Instructions{asm.Ja.Label(send)}
	}
	return asm.Instructions{
		asm.FnGetCurrentTask.Call(),
		asm.Mov.Reg(asm.R3, asm.R0),
		asm.Add.Imm(asm.R3, int32(blockedAt)),
		asm.Mov.Reg(asm.R1, asm.RFP),
		asm.Add.Imm(asm.R1, -16),
		asm.Mov.Imm(asm.R2, 8),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(asm.R0, 0, send),
		asm.LoadMem(asm.R1, asm.RFP, -16, asm.DWord),
		asm.RSh.Imm(asm.R1, int32(sig-1)),
		asm.And.Imm(asm.R1, 1),
		asm.JEq.Imm(asm.R1, 0, send),
		asm.Ja.Label(blocked),
	}
}

// signal sets stops[tid] = id<<32 | R2 with the update flags in R4 and
// sends the current thread the stop signal: on to sent, or to failed
// (the entry taken out again when the signal could not go). R7 holds the
// thread's id.
func (c *Counter) signal(id int, failed, sent string) asm.Instructions {
	return asm.Instructions{
		asm.StoreMem(asm.RFP, -20, asm.R7, asm.Word),
		asm.LoadImm(asm.R1, int64(id)<<32, asm.DWord),
		asm.Or.Reg(asm.R2, asm.R1),
		asm.StoreMem(asm.RFP, -32, asm.R2, asm.DWord),
		asm.LoadMapPtr(asm.R1, c.stops.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -20),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -32),
		asm.FnMapUpdateElem.Call(),
		asm.JNE.Imm(asm.R0, 0, failed),
		asm.Mov.Imm(asm.R1, int32(c.sig)),
		asm.FnSendSignalThread.Call(),
		asm.JEq.Imm(asm.R0, 0, sent),
		asm.LoadMapPtr(asm.R1, c.stops.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -20),
		asm.FnMapDeleteElem.Call(),
		asm.Ja.Label(failed),
	}
}

// setHalt adds one to the halt, the measured stops on their way, then
// goes to next.
func (c *Counter) setHalt(next string) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, -40, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, c.halt.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -40),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, next),
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0),
	}
}

// haltOn, labelled label, goes on when the halt is on, else to off.
func (c *Counter) haltOn(label, off string) asm.Instructions {
	return asm.Instructions{
		asm.StoreImm(asm.RFP, -40, 0, asm.Word).WithSymbol(label),
		asm.LoadMapPtr(asm.R1, c.halt.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -40),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, off),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, off),
	}
}

// fetchAdd is `src = atomic_fetch_add((u64 *)(dst + off), src)`.
// cilium/ebpf v0.22.0's asm takes the instruction's immediate from
// Constant before it folds the atomic operation into it, so that its
// FetchAdd goes to the kernel as a plain atomic add, whose src keeps its
// value (docs/facts.md, fact 83): the immediate, BPF_ADD |
// BPF_FETCH, is set here.
func fetchAdd(dst, src asm.Register, off int16) asm.Instruction {
	ins := asm.FetchAdd.Mem(dst, src, asm.DWord, off)
	ins.Constant = 0x01 // BPF_ADD | BPF_FETCH
	return ins
}

// Add counts breakpoint id's hits from count on (hits gdb counted
// before), at addrs in the process's memory, stopping at the hits rule
// measures. skipTid, when not 0, is a thread stopped at one of addrs
// whose hit is already in count: its next pass there is not counted. The
// process must be stopped, every thread, and no other breakpoint may be
// at addrs.
func (c *Counter) Add(id int, r Rule, addrs []uint64, count uint64, skipTid int) error {
	var where []location
	for _, a := range addrs {
		loc, err := Locate(c.pid, a)
		if err != nil {
			return err
		}
		if err := loc.checkCode(c.pid); err != nil {
			return err
		}
		where = append(where, loc)
	}
	var slot [slotSize]byte
	putU64(slot[offCount:], count)
	putU64(slot[offSkipTid:], uint64(skipTid))
	// Every hit so far was gdb's to measure.
	putU64(slot[offTaken:], count)
	if err := c.counts.Put(uint32(id), slot[:]); err != nil {
		return fmt.Errorf("setting the hit count: %w", err)
	}
	prog, err := c.program(id, r)
	if err != nil {
		return err
	}
	p := &probe{prog: prog, addrs: addrs}
	for _, loc := range where {
		ex, err := link.OpenExecutable(loc.path)
		if err != nil {
			p.close(c.pid)
			return fmt.Errorf("opening %s: %w", loc.file, err)
		}
		l, err := ex.Uprobe("", prog, &link.UprobeOptions{Address: loc.offset, PID: c.pid})
		if err != nil {
			p.close(c.pid)
			return refusal(fmt.Sprintf("placing a uprobe in %s at offset %#x", loc.file, loc.offset), err)
		}
		p.links = append(p.links, l)
		if b, err := readMem(c.pid, loc.addr, 1); err != nil || b[0] != 0xcc {
			p.close(c.pid)
			return fmt.Errorf("the kernel did not place its probe at %#x in %s", loc.addr, loc.file)
		}
	}
	c.mu.Lock()
	if old := c.bps[id]; old != nil {
		old.close(c.pid)
	}
	c.bps[id] = p
	c.rules[id] = r
	c.mu.Unlock()
	return nil
}

// probeGone bounds the wait for the kernel to take a closed probe's
// breakpoint out of the program (see probe.close).
const probeGone = 10 * time.Second

// close takes the probe out of process pid and waits until its
// breakpoint instruction is gone from the program's memory. The kernel
// takes a uprobe out with the last descriptor of its perf event, and a
// program snapctl is starting holds a copy of every descriptor of
// snapctl's from its fork until its exec closes them: closed beside three
// goroutines starting programs, 127 of 300 probes were still in the
// program when Close returned (docs/facts.md, fact 160). Their hits would
// still run the eBPF program, whose signals would then come after snapctl
// let the process go, and a look at the program's text would find the
// int3. A hit during the wait is the probe's, as before the close.
func (p *probe) close(pid int) error {
	for _, l := range p.links {
		l.Close()
	}
	p.prog.Close()
	placed := len(p.links)
	p.links = nil
	deadline := time.Now().Add(probeGone)
	for _, a := range p.addrs[:min(placed, len(p.addrs))] {
		for {
			b, err := readMem(pid, a, 1)
			if err != nil || b[0] != 0xcc {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the kernel's probe at %#x was still in the program %v after it was closed", a, probeGone)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// Stop has thread tid stop at measured hit hit of breakpoint id, as the
// eBPF program would have at its hit: the entry, the halt, and the
// signal, which the thread takes when it runs again. For a hit the probe
// could not see (a thread already past the probed address when the
// kernel took over); the process must be stopped, every thread.
func (c *Counter) Stop(id, tid int, hit uint64) error {
	if err := c.stops.Put(uint32(tid), uint64(id)<<32|hit); err != nil {
		return fmt.Errorf("recording the stop of thread %d: %w", tid, err)
	}
	c.setTaken(id, hit, false)
	var h uint64
	if err := c.halt.Lookup(uint32(0), &h); err == nil {
		c.halt.Put(uint32(0), h+1)
	}
	if err := syscall.Tgkill(c.pid, tid, c.sig); err != nil {
		c.stops.Delete(uint32(tid))
		if c.halt.Lookup(uint32(0), &h) == nil && h > 0 {
			c.halt.Put(uint32(0), h-1)
		}
		return fmt.Errorf("signalling thread %d: %w", tid, err)
	}
	return nil
}

// Remove takes breakpoint id's probes out of the program; its count
// stays readable.
func (c *Counter) Remove(id int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.bps[id]
	if p == nil {
		return nil
	}
	delete(c.bps, id)
	return p.close(c.pid)
}

// Read returns what the kernel counted of breakpoint id.
func (c *Counter) Read(id int) (Slot, error) {
	var b [slotSize]byte
	if err := c.counts.Lookup(uint32(id), b[:]); err != nil {
		return Slot{}, err
	}
	return Slot{Count: u64(b[offCount:]), Blocked: u64(b[offBlocked:]), LastBlocked: u64(b[offLastBlk:]), Failed: u64(b[offFailed:])}, nil
}

// Take returns the measured hit that thread tid stopped at, and forgets
// it: the breakpoint and the hit (after skip), 0 for a hit held while
// another's measured stop was on its way. ok is false when the thread has
// none (the signal was the program's own).
//
// gdb reports a stop with every thread stopped, so that a measured stop
// taken ends its part of the halt here, and no hit runs in the kernel
// meanwhile. A held stop does not: gdb may report the held threads
// first, and resuming from them runs every thread but the one whose
// measured stop gdb keeps for later (fact 94).
func (c *Counter) Take(tid int) (id int, hit uint64, ok bool) {
	var v uint64
	if err := c.stops.LookupAndDelete(uint32(tid), &v); err != nil {
		if err := c.stops.Lookup(uint32(tid), &v); err != nil {
			return 0, 0, false
		}
		c.stops.Delete(uint32(tid))
	}
	id, hit = int(v>>32), v&0xffffffff
	if hit != 0 {
		c.setTaken(id, hit, true)
		var h uint64
		if c.halt.Lookup(uint32(haltCount), &h) == nil && h > 0 {
			c.halt.Put(uint32(haltCount), h-1)
		}
		// A new hold: the threads this one held go on as every
		// thread does, and each may be sent the hold signal again.
		if c.halt.Lookup(uint32(haltEpoch), &h) == nil {
			c.halt.Put(uint32(haltEpoch), h+1)
		}
	}
	return id, hit, true
}

// Peek returns the measured hit that thread tid stopped at, as Take,
// without taking it: a tracer that stops every thread only for a
// measured hit asks first, and takes it once they are stopped.
func (c *Counter) Peek(tid int) (id int, hit uint64, ok bool) {
	var v uint64
	if err := c.stops.Lookup(uint32(tid), &v); err != nil {
		return 0, 0, false
	}
	return int(v >> 32), v & 0xffffffff, true
}

// setTaken records that measured hit hit (after skip) of breakpoint id
// was taken (taken), or is on its way (not taken): the hits after it are
// held until it is taken. Every thread must be stopped.
func (c *Counter) setTaken(id int, hit uint64, taken bool) {
	c.mu.Lock()
	r, ok := c.rules[id]
	c.mu.Unlock()
	var b [slotSize]byte
	if !ok || c.counts.Lookup(uint32(id), b[:]) != nil {
		return
	}
	n, old := hit+uint64(r.Skip), u64(b[offTaken:])
	switch {
	case taken && n > old:
		putU64(b[offTaken:], n)
	case !taken && n <= old:
		putU64(b[offTaken:], n-1)
	default:
		return
	}
	c.counts.Put(uint32(id), b[:])
}

// Measuring returns a thread whose measured stop is on its way (its
// entry not taken yet), ok false when there is none.
func (c *Counter) Measuring() (tid int, ok bool) {
	var k uint32
	var v uint64
	it := c.stops.Iterate()
	for it.Next(&k, &v) {
		if v&0xffffffff != 0 {
			return int(k), true
		}
	}
	return 0, false
}

// Close takes every probe out of the program and frees the maps; the
// error says which probe the kernel kept in it.
func (c *Counter) Close() error {
	c.mu.Lock()
	var errs []error
	for id, p := range c.bps {
		errs = append(errs, p.close(c.pid))
		delete(c.bps, id)
	}
	c.mu.Unlock()
	c.stops.Close()
	c.halt.Close()
	c.held.Close()
	c.counts.Close()
	return errors.Join(errs...)
}

func putU64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func u64(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// location is an address of the process and the file and file offset
// mapped there.
type location struct {
	addr   uint64
	file   string // as /proc/PID/maps names it
	path   string // what opens it: the mapping itself when /proc allows
	offset uint64
}

// Locate finds the file mapped executable at addr in process pid and the
// offset of addr in it: PIE programs, shared libraries and libraries
// loaded with dlopen alike.
func Locate(pid int, addr uint64) (location, error) {
	maps, err := proc.Maps(pid)
	if err != nil {
		return location{}, err
	}
	for _, m := range maps {
		if addr < m.Lo || addr >= m.Hi || m.Path == "" {
			continue
		}
		if !strings.Contains(m.Perms, "x") {
			return location{}, fmt.Errorf("address %#x is not in code", addr)
		}
		if !strings.HasPrefix(m.Path, "/") || m.Deleted {
			file := m.Path
			if m.Deleted {
				file += " (deleted)"
			}
			return location{}, fmt.Errorf("address %#x is in %s, not a file the kernel can probe", addr, file)
		}
		loc := location{addr: addr, file: m.Path, path: m.Path, offset: addr - m.Lo + m.Offset}
		// The mapping itself, which holds even when the file on disk
		// was replaced since the program started.
		if mf := fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Lo, m.Hi); fileOK(mf) {
			loc.path = mf
		}
		return loc, nil
	}
	return location{}, fmt.Errorf("address %#x is not mapped in process %d", addr, pid)
}

func fileOK(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func readMem(pid int, addr uint64, n int) ([]byte, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(addr)); err != nil {
		return nil, err
	}
	return b, nil
}

// checkCode refuses an address where a stop would not be in the
// breakpoint's frame: the signal of a measured hit is taken once the
// probed instruction ran, so a call, jump or return there would stop the
// thread in another function. A breakpoint instruction there is
// another's (gdb's).
func (l location) checkCode(pid int) error {
	b, err := readMem(pid, l.addr, 16)
	if err != nil {
		return fmt.Errorf("reading the code at %#x: %w", l.addr, err)
	}
	if b[0] == 0xcc {
		return fmt.Errorf("a breakpoint is already at %#x", l.addr)
	}
	if branches(b) {
		return fmt.Errorf("the instruction at %#x is a call, jump or return, after which the thread would stop in another frame", l.addr)
	}
	return nil
}

// branches reports whether the x86-64 instruction at the start of code
// transfers control.
func branches(code []byte) bool {
	i := 0
	for i < len(code) && (bytes.IndexByte([]byte{0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x66, 0x67, 0xf0, 0xf2, 0xf3}, code[i]) >= 0 || code[i]&0xf0 == 0x40) {
		i++
	}
	if i >= len(code)-1 {
		return true
	}
	op := code[i]
	switch {
	case op == 0xe8 || op == 0xe9 || op == 0xeb || op >= 0x70 && op <= 0x7f || op >= 0xe0 && op <= 0xe3:
		return true
	case op == 0xc2 || op == 0xc3 || op == 0xca || op == 0xcb || op == 0xcf || op == 0xcc || op == 0xcd || op == 0xce:
		return true
	case op == 0xff:
		reg := code[i+1] >> 3 & 7
		return reg >= 2 && reg <= 5
	case op == 0x0f:
		return code[i+1] >= 0x80 && code[i+1] <= 0x8f
	}
	return false
}
