package native

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/proc"
)

// gdb's copy at the program's entry point. gdb 13 steps a thread over a
// breakpoint out of line (docs/facts.md, fact 114): it copies the
// instruction, with the bytes after it up to the longest instruction, to
// a buffer at the program's entry point (AT_ENTRY, _start, which runs
// once at the start), points the thread's PC there, single-steps it,
// moves the PC back past the breakpoint's instruction and puts _start's
// bytes back. A tracer killed in between leaves the thread in the copy,
// where it would run on into _start's code, and _start's bytes changed.
// The guardian's repair (tracerHold.repair), every thread stopped, takes
// such a thread back to the program's own code: an address in the copy
// is the same distance past the breakpoint whose code the buffer holds
// (a thread not yet stepped goes back onto the breakpoint, where the
// program's instruction is by then; one stepped goes on after it), be it
// the thread's PC, the PC that snapctl's SIGTRAP handler is about to
// return to (a step's trap the tracer had not collected), or the return
// address a call stepped in the copy pushed. Then _start's bytes are put
// back. Not mended: an instruction whose copy gdb had rewritten to
// address through a scratch register (a rip-relative operand), whose
// register only gdb could restore, and a relative jump taken in the copy.

// x86-64 gdb's buffers: two (one per thread stepped at once), each as
// long as the longest instruction (gdb's amd64 Linux architecture), from
// two breakpoint instructions past the entry point (gdb's inferior calls
// return to a breakpoint at the entry point itself): measured, fact
// 120.
const (
	stepBufLen  = 16
	stepBufs    = 2
	stepSkip    = 2
	stepAreaLen = stepSkip + stepBufLen*stepBufs
	atEntry     = 9 // AT_ENTRY in the auxiliary vector
)

// stepArea is gdb's copy area in a process: where it is, the program's
// bytes there, and the process's.
type stepArea struct {
	pid       int
	start     uint64
	orig, cur []byte
}

// readStepArea reads process pid's copy area; false when its entry point
// or the program's bytes cannot be read.
func readStepArea(pid int) (*stepArea, bool) {
	entry, ok := entryPoint(pid)
	if !ok {
		return nil, false
	}
	orig := originalBytes(pid, readMaps(pid), entry, stepAreaLen)
	if orig == nil {
		return nil, false
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil, false
	}
	defer mem.Close()
	cur := make([]byte, stepAreaLen)
	if _, err := mem.ReadAt(cur, int64(entry)); err != nil {
		return nil, false
	}
	return &stepArea{pid: pid, start: entry, orig: orig, cur: cur}, true
}

// entryPoint is process pid's AT_ENTRY.
func entryPoint(pid int) (uint64, bool) { return proc.Auxv(pid, atEntry) }

// dirty reports whether gdb's copy is still in the area.
func (a *stepArea) dirty() bool { return a != nil && !bytes.Equal(a.orig, a.cur) }

// in reports whether addr is in one of the area's buffers.
func (a *stepArea) in(addr uint64) bool {
	return a != nil && addr >= a.start+stepSkip && addr < a.start+stepAreaLen
}

// origin is where addr, in a buffer of the area, belongs in the program:
// as far past the breakpoint of patches whose code the buffer holds (the
// one whose bytes match the buffer's best, at least 12 of 16: gdb
// rewrites a few of an instruction's bytes) as addr is past the buffer's
// start. mem reads the program's code.
func (a *stepArea) origin(addr uint64, patches []textPatch, code func(addr uint64, n int) []byte) (uint64, bool) {
	if !a.in(addr) {
		return 0, false
	}
	off := stepSkip + (addr-a.start-stepSkip)/stepBufLen*stepBufLen
	buf := a.cur[off : off+stepBufLen]
	k := int(addr - a.start - off)
	if bytes.Equal(buf, a.orig[off:off+stepBufLen]) {
		// gdb wrote the buffer back and died before it moved the PC
		// out (fact 120): the thread stepped the instruction of
		// the one breakpoint whose instruction is k bytes long.
		return a.byLength(k, patches)
	}
	best, score := uint64(0), 11
	for _, p := range patches {
		c := code(p.addr, stepBufLen)
		if c == nil {
			continue
		}
		copy(c, p.orig)
		n := 0
		for i := range c {
			if c[i] == buf[i] {
				n++
			}
		}
		if n > score {
			best, score = p.addr, n
		}
	}
	if best == 0 {
		return 0, false
	}
	return best + uint64(k), true
}

// byLength is where a thread k bytes into a buffer gdb had already
// written back belongs: past the instruction of the one breakpoint of
// patches that is k bytes long; false when none or several are.
func (a *stepArea) byLength(k int, patches []textPatch) (uint64, bool) {
	if k == 0 || a.pid == 0 {
		return 0, false
	}
	var found []uint64
	for _, p := range patches {
		if n, ok := insnLen(a.pid, p.addr); ok && n == k {
			found = append(found, p.addr)
		}
	}
	if len(found) != 1 {
		return 0, false
	}
	return found[0] + uint64(k), true
}

// insnLen is the length of the program's instruction at addr in process
// pid, as gdb disassembles the file that maps it (Go has no x86
// disassembler of its own, and gdb is snapctl's anyway).
func insnLen(pid int, addr uint64) (int, bool) {
	for _, m := range readMaps(pid) {
		if addr < m.start || addr >= m.end {
			continue
		}
		path := fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end)
		f, err := elf.Open(path)
		if err != nil {
			return 0, false
		}
		defer f.Close()
		off := addr - m.start + m.offset
		for _, prog := range f.Progs {
			if prog.Type != elf.PT_LOAD || off < prog.Off || off >= prog.Off+prog.Filesz {
				continue
			}
			vaddr := off - prog.Off + prog.Vaddr
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "gdb", "-nx", "-batch", "-ex", fmt.Sprintf("x/2i %#x", vaddr), path).Output()
			if err != nil {
				return 0, false
			}
			var at []uint64
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "=>"))
				if len(f) == 0 {
					continue
				}
				if v, err := strconv.ParseUint(strings.TrimSuffix(f[0], ":"), 0, 64); err == nil {
					at = append(at, v)
				}
			}
			if len(at) != 2 || at[0] != vaddr || at[1] <= at[0] || at[1]-at[0] > 15 {
				return 0, false
			}
			return int(at[1] - at[0]), true
		}
		return 0, false
	}
	return 0, false
}

// mendStepCopy takes thread tid, seized and stopped, out of the area:
// its PC, the PC snapctl's SIGTRAP handler at page (0 for none) returns
// it to, or the return address on top of its stack. It says what it
// moved, "" for nothing.
func (a *stepArea) mend(pid, tid int, page uint64, patches []textPatch, mem *os.File) string {
	if a == nil {
		return ""
	}
	code := func(addr uint64, n int) []byte {
		b := make([]byte, n)
		if _, err := mem.ReadAt(b, int64(addr)); err != nil {
			return nil
		}
		return b
	}
	var regs syscall.PtraceRegs
	if syscall.PtraceGetRegs(tid, &regs) != nil {
		return ""
	}
	if to, ok := a.origin(regs.Rip, patches, code); ok {
		from := regs.Rip
		regs.SetPC(to)
		if syscall.PtraceSetRegs(tid, &regs) == nil {
			return fmt.Sprintf("thread %d's PC %#x to %#x", tid, from, to)
		}
		return ""
	}
	// A word of the thread's memory that holds an address in the area.
	word := func(at uint64, what string) string {
		b := code(at, 8)
		if b == nil {
			return ""
		}
		from := binary.LittleEndian.Uint64(b)
		to, ok := a.origin(from, patches, code)
		if !ok {
			return ""
		}
		binary.LittleEndian.PutUint64(b, to)
		if _, err := mem.WriteAt(b, int64(at)); err != nil {
			return ""
		}
		return fmt.Sprintf("thread %d's %s %#x to %#x", tid, what, from, to)
	}
	if page != 0 && regs.Rip >= page && regs.Rip < page+trapPageLen {
		// In the handler, its third argument the interrupted context:
		// uc_mcontext's rip.
		return word(regs.Rdx+0xa8, "PC to return to from the SIGTRAP handler")
	}
	if !a.dirty() {
		return "" // a return address is looked at only beside a copy
	}
	return word(regs.Rsp, "return address")
}

// restore puts the program's bytes back in the area.
func (a *stepArea) restore(mem *os.File) error {
	if !a.dirty() {
		return nil
	}
	_, err := mem.WriteAt(a.orig, int64(a.start))
	return err
}

// mendStepCopy takes the seized threads of the process the dead tracer
// left out of gdb's copy area, and puts the program's bytes back there.
func (h *tracerHold) mendStepCopy(seized []int) {
	a, ok := readStepArea(h.pid)
	if !ok {
		return
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", h.pid), os.O_RDWR, 0)
	if err != nil {
		h.logf("gdb's step copy is at process %d's entry point %#x, whose memory cannot be written: %v", h.pid, a.start, err)
		return
	}
	defer mem.Close()
	h.mu.Lock()
	patches, page := h.all, h.trap
	h.mu.Unlock()
	var moved []string
	for _, tid := range seized {
		if m := a.mend(h.pid, tid, page, patches, mem); m != "" {
			moved = append(moved, m)
		}
	}
	if len(moved) == 0 && !a.dirty() {
		return
	}
	err = a.restore(mem)
	h.logf("gdb's step copy was at process %d's entry point %#x (%x, the program's %x): moved %v; put back the program's bytes there: %v", h.pid, a.start, a.cur, a.orig, moved, err == nil)
}

// holdEndedFile, in snapctl's private directory, says that the guardian's
// hold has ended: the tracer is gone and the threads it left are put
// right. snapctl, which repairs what a dead gdb left too, waits for it:
// a thread it held would be out of the guardian's reach.
const holdEndedFile = "guardian-hold-ended"

// holdReadyFile, in snapctl's private directory, says that the guardian
// has tried to hold the tracer (its log says whether it does): from then
// on, a tracer killed while it traces the process is held at its exit.
const holdReadyFile = "guardian-hold-ready"

// holdReady marks, in dir ("" for none), that the guardian has tried to
// hold the tracer.
func holdReady(dir string) {
	if dir != "" {
		os.WriteFile(filepath.Join(dir, holdReadyFile), nil, 0o600)
	}
}

// waitHoldReady waits, up to limit, for the guardian (process pid) to
// have tried to hold the tracer; false when it did not, having ended or
// taken longer than limit. With no directory it cannot know, and does not
// wait.
func waitHoldReady(dir string, pid int, limit time.Duration) bool {
	if dir == "" {
		return true
	}
	for deadline := time.Now().Add(limit); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, holdReadyFile)); err == nil {
			return true
		}
		if !proc.Alive(pid) || time.Now().After(deadline) {
			return false
		}
	}
}

// holdEnded marks the end of the guardian's hold in dir ("" for none).
func holdEnded(dir string) {
	if dir != "" {
		os.WriteFile(filepath.Join(dir, holdEndedFile), nil, 0o600)
	}
}

// waitHoldEnded waits, up to limit, for the guardian's hold to end, when
// a guardian runs and holds the tracer (its log says so).
func waitHoldEnded(dir string, limit time.Duration) {
	if dir == "" {
		return
	}
	log, _ := os.ReadFile(filepath.Join(dir, "guardian.log"))
	if !bytes.Contains(log, []byte("holding ")) {
		return
	}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, holdEndedFile)); err == nil {
			return
		}
	}
}
