package native

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestBreakpointAddrs reads the addresses of `maint info breakpoints`,
// gdb's own breakpoints and multiple locations included.
func TestBreakpointAddrs(t *testing.T) {
	table := `Num     Type           Disp Enb Address            What
-4      shlib events   keep y   0x00007fb45a7ec060 <__GI__dl_debug_state> inf 1
-4.1                        y   0x00007fb45a7ec060 <__GI__dl_debug_state> inf 1
-8      longjmp master keep n   0x00007fb45a630da0 <__libc_siglongjmp> inf 1
1       breakpoint     keep y   <MULTIPLE>
1.1                         y   0x000055c47277116d in tick at t.c:3 inf 1
1.2                         y   0x000055c472771200 in tick at t.c:3 inf 1
	breakpoint already hit 1 time
`
	got := breakpointAddrs(table)
	want := []uint64{0x7fb45a7ec060, 0x7fb45a630da0, 0x55c47277116d, 0x55c472771200}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("addresses %x, want %x", got, want)
	}
	if got := breakpointAddrs("No breakpoints or watchpoints.\n"); len(got) != 0 {
		t.Errorf("no breakpoints: %x", got)
	}
}

// TestRestoreText: the bytes snapctl restores in a running threaded
// process whose tracer is gone: an int3 written where the program has
// other code is replaced with the file's bytes; an address that holds
// the file's bytes already is left alone.
func TestRestoreText(t *testing.T) {
	t.Parallel()
	if breakInsn == nil {
		t.Skip("no breakpoint instruction known here")
	}
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	maps := readMaps(srv.Pid)
	// handle_request's first instruction, as the file has it.
	addr := symbolAddr(t, srv.Pid, maps, "handle_request")
	orig := originalBytes(srv.Pid, maps, addr, len(breakInsn))
	if orig == nil || bytes.Equal(orig, breakInsn) {
		t.Fatalf("the program's bytes at %#x: %x", addr, orig)
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", srv.Pid), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := mem.WriteAt(breakInsn, int64(addr)); err != nil {
		t.Fatal(err)
	}
	if len(testenv.TextChanges(t, srv.Pid)) != 1 {
		t.Fatalf("the int3 written is not seen")
	}
	n, err := restoreText(srv.Pid, []textPatch{{addr: addr, orig: orig}, {addr: addr + 1, orig: []byte{0}}})
	if err != nil || n != 1 {
		t.Fatalf("restored %d, %v; want 1", n, err)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("after the restore: %s", strings.Join(ch, "; "))
	}
	srv.MustServe(t)
	if _, err := restoreText(1<<22+12345, nil); err == nil {
		t.Errorf("no error for a process that does not exist")
	}
}

// symbolAddr is the run-time address of the program's function name.
func symbolAddr(t *testing.T, pid int, maps []mapping, name string) uint64 {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var sym uint64
	for _, s := range syms {
		if s.Name == name {
			sym = s.Value
		}
	}
	if sym == 0 {
		t.Fatalf("no symbol %s in %s", name, exe)
	}
	// A PIE's symbols are offsets from the first mapping of the file.
	for _, m := range maps {
		if m.path == exe && m.offset == 0 {
			return m.start + sym
		}
	}
	t.Fatalf("%s is not mapped", exe)
	return 0
}
