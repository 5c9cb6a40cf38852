package native

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestStepCopyMended: a thread that a dead tracer left in gdb's step copy
// at the program's entry point (docs/facts.md, fact 114) is taken back
// to the program's code, its PC in the first buffer and a return address
// into the second, and _start's bytes are put back; with the buffer
// already written back, by the length of the breakpoint's instruction.
// The test is the tracer: it writes the copies as gdb does (16 bytes of the program's
// code from the breakpoint's address) and moves a thread of the server
// into them, then checks where the repair puts it, gives the thread its
// registers back and lets it go: the server serves, its code the file's.
func TestStepCopyMended(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("gdb's step copy is known on x86-64 only")
	}
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	maps := readMaps(srv.Pid)
	bp := symbolAddr(t, srv.Pid, maps, "handle_request") + 16
	other := symbolAddr(t, srv.Pid, maps, "keep_request") + 8
	entry, ok := entryPoint(srv.Pid)
	if !ok {
		t.Fatal("no AT_ENTRY")
	}
	patches := []textPatch{
		{addr: other, orig: originalBytes(srv.Pid, maps, other, 1)},
		{addr: bp, orig: originalBytes(srv.Pid, maps, bp, 1)},
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := srv.Pid
	if err := seize(tid); err != nil {
		t.Fatal(err)
	}
	defer syscall.PtraceDetach(tid)
	var saved syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(tid, &saved); err != nil {
		t.Fatal(err)
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", srv.Pid), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	// gdb's copies: handle_request's breakpoint in the first buffer,
	// keep_request's in the second.
	for i, addr := range []uint64{bp, other} {
		if _, err := mem.WriteAt(originalBytes(srv.Pid, maps, addr, stepBufLen), int64(entry)+stepSkip+int64(i*stepBufLen)); err != nil {
			t.Fatal(err)
		}
	}
	if len(testenv.TextChanges(t, srv.Pid)) == 0 {
		t.Fatal("the copies written are not seen")
	}
	a, ok := readStepArea(srv.Pid)
	if !ok || !a.dirty() {
		t.Fatalf("the step area at %#x is not seen dirty", entry)
	}

	// The PC five bytes into the first copy: stepped over handle_request's
	// five-byte instruction.
	regs := saved
	regs.SetPC(entry + stepSkip + 5)
	if err := syscall.PtraceSetRegs(tid, &regs); err != nil {
		t.Fatal(err)
	}
	if got := a.mend(srv.Pid, tid, 0, patches, mem); !strings.Contains(got, fmt.Sprintf("to %#x", bp+5)) {
		t.Errorf("mend of a PC in the copy: %q, want it moved to %#x", got, bp+5)
	}
	if err := syscall.PtraceGetRegs(tid, &regs); err != nil || regs.Rip != bp+5 {
		t.Errorf("PC after the mend: %#x (%v), want %#x", regs.Rip, err, bp+5)
	}

	// A return address three bytes into the second copy, on top of the
	// thread's stack, its PC elsewhere.
	if err := syscall.PtraceSetRegs(tid, &saved); err != nil {
		t.Fatal(err)
	}
	top := make([]byte, 8)
	if _, err := mem.ReadAt(top, int64(saved.Rsp)); err != nil {
		t.Fatal(err)
	}
	ret := make([]byte, 8)
	binary.LittleEndian.PutUint64(ret, entry+stepSkip+stepBufLen+3)
	if _, err := mem.WriteAt(ret, int64(saved.Rsp)); err != nil {
		t.Fatal(err)
	}
	if got := a.mend(srv.Pid, tid, 0, patches, mem); !strings.Contains(got, fmt.Sprintf("to %#x", other+3)) {
		t.Errorf("mend of a return address in the copy: %q, want it moved to %#x", got, other+3)
	}
	if _, err := mem.ReadAt(ret, int64(saved.Rsp)); err != nil || binary.LittleEndian.Uint64(ret) != other+3 {
		t.Errorf("return address after the mend: %#x (%v), want %#x", binary.LittleEndian.Uint64(ret), err, other+3)
	}
	if _, err := mem.WriteAt(top, int64(saved.Rsp)); err != nil {
		t.Fatal(err)
	}

	// Nothing in the copy: nothing moved.
	if got := a.mend(srv.Pid, tid, 0, patches, mem); got != "" {
		t.Errorf("mend of a thread outside the copy: %q", got)
	}
	if err := a.restore(mem); err != nil {
		t.Fatal(err)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("after the restore: %s", strings.Join(ch, "; "))
	}

	// gdb wrote the buffer back and died before it moved the PC: the
	// thread five bytes into the first buffer, _start's own bytes
	// there, goes past the one breakpoint whose instruction is five
	// bytes long (keep_request's is four).
	clean, ok := readStepArea(srv.Pid)
	if !ok || clean.dirty() {
		t.Fatalf("the step area is not read back clean")
	}
	regs = saved
	regs.SetPC(entry + stepSkip + 5)
	if err := syscall.PtraceSetRegs(tid, &regs); err != nil {
		t.Fatal(err)
	}
	if got := clean.mend(srv.Pid, tid, 0, patches, mem); !strings.Contains(got, fmt.Sprintf("to %#x", bp+5)) {
		t.Errorf("mend of a PC in a buffer written back: %q, want it moved to %#x", got, bp+5)
	}
	if err := syscall.PtraceSetRegs(tid, &saved); err != nil {
		t.Fatal(err)
	}
	syscall.PtraceDetach(tid)
	srv.MustServe(t)
}
