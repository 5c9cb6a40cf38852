package native

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/osthread"
	"github.com/snapctl/snapctl/internal/proc"
)

// The process's SIGTRAP handler while snapctl is attached. A thread that
// runs into a breakpoint takes a SIGTRAP, which the kernel hands its
// tracer as a stop; a tracer killed before its wait has collected that
// stop leaves the signal to the thread, which dies of it under the
// default action however the code is mended (docs/facts.md, facts 63 and
// 113): the kernel offers no way, from outside the process, to take
// back a signal its dead tracer had not collected. So for as long as
// snapctl is attached, the process has a SIGTRAP handler of snapctl's
// (a few instructions in a page of their own, mapped through gdb), which
// a traced process never runs: its SIGTRAPs go to the tracer. Only once
// the tracer is dead, and only after the guardian has taken the
// breakpoints out and written their addresses into the page (hold.go),
// does it act: a trap one byte past one of those addresses goes back to
// the address, where the program's instruction is by then; a single
// step the tracer had set is cleared and the thread runs on. Anything
// else (no guardian, a trap of the program's own, a SIGTRAP sent to it)
// gets the default action, as without the handler: the handler puts it
// back and sends the signal again. snapctl removes the handler and its
// page as it detaches; a process whose tracer was killed keeps them.

// trapCode is the handler, x86-64, position-independent, at the start of
// the page. handler(sig, info, uc):
//
//	lea  r8, [rip+table]            ; the page's second half
//	cmp  qword [r8], 0              ; armed by the guardian?
//	je   dfl
//	mov  eax, [rsi+8]               ; si_code
//	cmp  eax, 0x80                  ; SI_KERNEL: an int3
//	jne  step
//	mov  rcx, [rdx+0xa8]            ; uc_mcontext's rip, past the int3
//	dec  rcx
//	mov  r9, [r8+8]                 ; how many addresses
//	next: test r9, r9
//	jz   dfl
//	cmp  rcx, [r8+r9*8+8]
//	je   ours
//	dec  r9
//	jmp  next
//	ours: mov [rdx+0xa8], rcx       ; back onto the program's instruction
//	ret
//	step: cmp eax, 2                ; TRAP_TRACE: the tracer's single step
//	jne  dfl
//	and  qword [rdx+0xb0], ~0x100   ; clear TF in the saved flags
//	ret
//	dfl: rt_sigaction(SIGTRAP, &{SIG_DFL}, 0, 8)
//	     tgkill(getpid(), gettid(), SIGTRAP)
//	ret
//	dflact: 32 zero bytes
var trapCode, _ = hex.DecodeString("4c8d05f90f00004983380074428b46083d800000007527488b8aa800000048ffc94d8b48084d85c974254b3b4cc808740549ffc9ebef48898aa8000000c383f802750c4881a2b0000000fffeffffc3b80d000000bf05000000488d353000000031d241ba080000000f05b8270000000f054189c0b8ba0000000f0589c64489c7ba05000000b8ea0000000f05c30f1f000000000000000000000000000000000000000000000000000000000000000000")

// The page's layout.
const (
	trapPageLen = 0x2000
	trapNewAct  = 0x300  // glibc's struct sigaction snapctl installs
	trapOldAct  = 0x400  // the program's own, as sigaction(2) gave it
	trapTable   = 0x1000 // armed (non-zero), count, then the addresses
	// trapTableMax is how many breakpoint addresses the table holds.
	trapTableMax = (trapPageLen-trapTable)/8 - 2
)

// Constants of x86-64 Linux and glibc.
const (
	sigTrap    = 5
	saSiginfo  = 4
	protRW     = 3 // PROT_READ|PROT_WRITE
	protRX     = 5 // PROT_READ|PROT_EXEC
	mapAnonPrv = 0x22
)

// trapHandler is the handler installed in the process attached to: its
// page's address.
type trapHandler struct {
	page uint64
}

// errOwnTrap says the program has its own SIGTRAP disposition, which
// snapctl leaves alone.
var errOwnTrap = errors.New("the program has its own SIGTRAP disposition")

// installTrapHandler maps the handler's page in the process gdb holds
// stopped and makes it the process's SIGTRAP handler, unless the program
// has a disposition of its own.
func installTrapHandler(ctx context.Context, c *gdb.Conn) (*trapHandler, error) {
	if runtime.GOARCH != "amd64" {
		return nil, errors.New("known only on x86-64")
	}
	addr, err := callLong(ctx, c, fmt.Sprintf("((void *(*)(void *, unsigned long, int, int, int, long)) mmap)(0, %d, %d, %d, -1, 0)", trapPageLen, protRW, mapAnonPrv))
	if err != nil {
		return nil, fmt.Errorf("mapping its page: %w", err)
	}
	if addr == 0 || addr == ^uint64(0) {
		return nil, errors.New("mapping its page: mmap failed")
	}
	h := &trapHandler{page: addr}
	act := make([]byte, 152) // glibc's struct sigaction on x86-64
	binary.LittleEndian.PutUint64(act[0:], addr)
	binary.LittleEndian.PutUint32(act[136:], saSiginfo)
	for _, w := range []struct {
		off  uint64
		data []byte
	}{{0, trapCode}, {trapNewAct, act}} {
		if _, err := c.Do(ctx, gdb.WriteMemory(addr+w.off, w.data)); err != nil {
			h.unmap(ctx, c)
			return nil, fmt.Errorf("writing its page: %s", gdb.Message(err))
		}
	}
	if r, err := callInt(ctx, c, h.sigaction(trapNewAct, trapOldAct)); err != nil || r != 0 {
		h.unmap(ctx, c)
		return nil, fmt.Errorf("installing it: %d %v", r, err)
	}
	old, err := readMemory(ctx, c, addr+trapOldAct, 8)
	if err == nil && binary.LittleEndian.Uint64(old) != 0 {
		// The handler of an earlier snapctl whose tracer was killed:
		// its page keeps the program's own disposition, which this one
		// takes over, and goes.
		prev := &trapHandler{page: binary.LittleEndian.Uint64(old)}
		if code, err := readMemory(ctx, c, prev.page, len(trapCode)); err == nil && bytes.Equal(code, trapCode) {
			if act, err := readMemory(ctx, c, prev.page+trapOldAct, 152); err == nil {
				if _, err := c.Do(ctx, gdb.WriteMemory(addr+trapOldAct, act)); err == nil {
					prev.unmap(ctx, c)
					old = act[:8]
				}
			}
		}
	}
	if err != nil || binary.LittleEndian.Uint64(old) != 0 {
		// SIG_IGN, or a handler of the program's: put it back.
		callInt(ctx, c, h.sigaction(trapOldAct, 0))
		h.unmap(ctx, c)
		if err != nil {
			return nil, err
		}
		return nil, errOwnTrap
	}
	if r, err := callInt(ctx, c, fmt.Sprintf("((int (*)(void *, unsigned long, int)) mprotect)(%#x, %d, %d)", addr, trapPageLen, protRX)); err != nil || r != 0 {
		callInt(ctx, c, h.sigaction(trapOldAct, 0))
		h.unmap(ctx, c)
		return nil, fmt.Errorf("protecting its page: %d %v", r, err)
	}
	return h, nil
}

// sigaction is the call that installs the struct sigaction at offset act
// of the page (0: none) and keeps the one it replaces at offset old.
func (h *trapHandler) sigaction(act, old uint64) string {
	at := func(off uint64) string {
		if off == 0 {
			return "0"
		}
		return fmt.Sprintf("%#x", h.page+off)
	}
	return fmt.Sprintf("((int (*)(int, void *, void *)) sigaction)(%d, %s, %s)", sigTrap, at(act), at(old))
}

func (h *trapHandler) unmap(ctx context.Context, c *gdb.Conn) error {
	r, err := callInt(ctx, c, fmt.Sprintf("((int (*)(void *, unsigned long)) munmap)(%#x, %d)", h.page, trapPageLen))
	if err == nil && r != 0 {
		err = fmt.Errorf("munmap returned %d", r)
	}
	return err
}

// removeTrapHandler gives process pid, which no tracer holds any more,
// back its own SIGTRAP disposition and unmaps the handler's page at
// page: one thread, stopped with ptrace, calls libc's sigaction and
// munmap (callFunc), the others held. Calls through gdb are not
// used: through gdbserver, a call made after gdb's interrupt of the
// process left a SIGSEGV that gdbserver handed the thread as it detached.
func removeTrapHandler(pid int, page uint64) error {
	if page == 0 {
		return nil
	}
	libc, base, ok := libcOf(pid)
	if !ok {
		return errors.New("no libc found in the process")
	}
	sa, err := symbolValue(libc, "sigaction")
	if err != nil {
		return err
	}
	unmap, err := symbolValue(libc, "munmap")
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	// ptrace requests come from the thread that attached, which ends
	// with them.
	osthread.Go(func() {
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			err := removeTrapHandlerOnce(pid, page, base+sa, base+unmap)
			if err != errHandlerBusy || time.Now().After(deadline) {
				done <- err
				return
			}
		}
	})
	return <-done
}

// errHandlerBusy says a thread runs the handler, or has a SIGTRAP still
// to take: the handler cannot go yet.
var errHandlerBusy = errors.New("a thread is in snapctl's SIGTRAP handler or has a SIGTRAP pending")

// removeTrapHandlerOnce stops every thread of process pid and, unless
// one of them is in the handler's page or has a SIGTRAP pending (a trap
// its dead tracer had not collected goes through the handler, which
// must still be there: a thread the guardian continued may not have run
// it yet), calls sigaction and munmap at sa and unmap in one of them.
func removeTrapHandlerOnce(pid int, page, sa, unmap uint64) error {
	var seized []int
	defer func() {
		for _, tid := range seized {
			syscall.PtraceDetach(tid)
		}
	}()
	for _, tid := range proc.Tasks(pid) {
		if seize(tid) == nil {
			seized = append(seized, tid)
		}
	}
	if trapPending(pid, pid, "ShdPnd") {
		return errHandlerBusy
	}
	caller := 0
	for _, tid := range seized {
		var regs syscall.PtraceRegs
		if err := syscall.PtraceGetRegs(tid, &regs); err != nil {
			continue
		}
		if regs.Rip >= page && regs.Rip < page+trapPageLen || trapPending(pid, tid, "SigPnd") {
			return errHandlerBusy
		}
		if caller == 0 && !allBlocked(pid, tid) {
			caller = tid
		}
	}
	if caller == 0 {
		return fmt.Errorf("no thread of process %d could make the calls", pid)
	}
	if r, err := callFunc(caller, sa, sigTrap, page+trapOldAct, 0); err != nil || r != 0 {
		return fmt.Errorf("putting back the program's SIGTRAP disposition: %d %v", int64(r), err)
	}
	if r, err := callFunc(caller, unmap, page, trapPageLen); err != nil || r != 0 {
		return fmt.Errorf("unmapping the handler's page: %d %v", int64(r), err)
	}
	return nil
}

// trapPending reports whether a SIGTRAP waits in thread tid of process
// pid (key SigPnd) or for the process (ShdPnd).
func trapPending(pid, tid int, key string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(sigTrap-1)) != 0
		}
	}
	return false
}

// libcOf finds the C library mapped in process pid: its file and the
// address it is loaded at.
func libcOf(pid int) (path string, base uint64, ok bool) {
	for _, m := range readMaps(pid) {
		name := filepath.Base(m.path)
		if m.offset == 0 && (strings.HasPrefix(name, "libc.so") || strings.HasPrefix(name, "libc-")) {
			return fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end), m.start, true
		}
	}
	return "", 0, false
}

// armTrapTable is what the guardian writes at trapTable once it has taken
// the breakpoints at addrs out: armed, their count (at most
// trapTableMax), their addresses.
func armTrapTable(addrs []uint64) []byte {
	if len(addrs) > trapTableMax {
		addrs = addrs[:trapTableMax]
	}
	b := make([]byte, 16+8*len(addrs))
	binary.LittleEndian.PutUint64(b[0:], 1)
	binary.LittleEndian.PutUint64(b[8:], uint64(len(addrs)))
	for i, a := range addrs {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// callLong calls expr in the stopped program and returns its result as
// an unsigned 64-bit value.
func callLong(ctx context.Context, c *gdb.Conn, expr string) (uint64, error) {
	r, err := gdbCall(ctx, c, gdb.Evaluate("(unsigned long) "+expr))
	if err != nil {
		return 0, errors.New(gdb.Message(err))
	}
	return strconv.ParseUint(strings.TrimSpace(r.String("value")), 10, 64)
}

// readMemory reads n bytes of the stopped program at addr through gdb.
func readMemory(ctx context.Context, c *gdb.Conn, addr uint64, n int) ([]byte, error) {
	r, err := c.Do(ctx, gdb.ReadMemory(addr, n))
	if err != nil {
		return nil, errors.New(gdb.Message(err))
	}
	mem := r.List("memory")
	if len(mem) == 0 {
		return nil, errors.New("gdb read no memory")
	}
	data, err := hex.DecodeString(mem[0].String("contents"))
	if err != nil || len(data) < n {
		return nil, fmt.Errorf("gdb read %d of %d bytes", len(data), n)
	}
	return data, nil
}
