package native

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/runjson"
)

// The program's descriptors are its own. heaptrack's library opens its
// output (snapctl's FIFO) and /proc/self/statm at the lowest free
// descriptor numbers, 3 and 4 as a rule. A program that closes every
// descriptor it inherited, as daemons do, closes those too and gets their
// numbers for its own files: the library then writes its stream into the
// program's file, reads and rewinds it as /proc/self/statm, and, at its
// first failed write, closes it (docs/facts.md, fact 82).
//
// So snapctl, once the library has opened them and before the program's
// own code runs (at __libc_start_main under run, right after the
// injection under attach), closes the statm one (snapctl does not read
// heaptrack's RSS lines; the field is set to -1, and the library reads
// none) and moves the output to the number of the process's soft limit
// of open files: it raises the limit by one for the move (prlimit; the
// hard limit too where it is the soft one and snapctl may, as root) and
// puts it back. The program cannot get that number from open(),
// socket() or dup() (EMFILE first), nor close it in a loop up to its
// limit; a program that closes every number (close_range) closes it too:
// the library's next write fails (EBADF) and ends the recording, the
// program's own files untouched, and the stops say sites-failed. Where
// the limit cannot be raised, the output goes to the top number below it,
// which a close loop reaches, with the same end.

// eventSitesDescriptors says that heaptrack's descriptors could not be
// moved out of the program's way.
const eventSitesDescriptors runjson.EventKind = "sites-descriptors"

// moveDescriptors moves the library's descriptors in the stopped process
// pid out of the numbers the program uses.
func (s *siteRecording) moveDescriptors(ctx context.Context, c *gdb.Conn, pid int) error {
	t, err := heaptrack.OpenTarget(pid, s.layout)
	if err != nil {
		return err
	}
	defer t.Close()
	d, err := t.Descriptors()
	if err != nil {
		return err
	}
	// heaptrack's RSS lines are not read: its statm descriptor goes, so
	// that its timer thread reads nothing of the program's (and prints
	// no warning into the program's stderr once the program closed it).
	if d.Statm >= 0 {
		if _, err := c.Do(ctx, gdb.Console(fmt.Sprintf("set var *(int *) %#x = -1", d.StatmAddr))); err != nil {
			return errors.New(gdb.Message(err))
		}
		if err := closeDescriptor(ctx, c, pid, d.Statm); err != nil {
			return err
		}
	}
	// libunwind, which heaptrack unwinds with, keeps a pipe of its own
	// (to test addresses) from its first unwind, and reopens it when a
	// write fails with EBADF, closing the old numbers first: the
	// program's by then. One allocation and free through gdb has it
	// open now; it moves with heaptrack's output.
	if err := callVoid(ctx, c, "call (void) free(((void *(*)(unsigned long)) malloc)(1))"); err != nil {
		return err
	}
	moves := []fdMove{{fd: d.Out, addr: d.OutAddr}}
	if r, w, addr, ok := unwindPipe(pid, t); ok {
		moves = append(moves, fdMove{fd: r, addr: addr}, fdMove{fd: w, addr: addr + 4})
	}
	var lim syscall.Rlimit
	if err := prlimit(pid, nil, &lim); err != nil {
		return err
	}
	// They go to the numbers from the soft limit on, which is raised
	// (and the hard one with it, where snapctl may, as root) for the
	// move; else to the top numbers below the limit.
	n := uint64(len(moves))
	to := int(lim.Cur)
	raised := lim
	raised.Cur, raised.Max = lim.Cur+n, max(lim.Max, lim.Cur+n)
	if err := prlimit(pid, &raised, nil); err != nil {
		to = int(lim.Cur - n)
	} else {
		defer prlimit(pid, &lim, nil)
	}
	for i, m := range moves {
		if m.fd < 0 || m.fd >= to {
			continue
		}
		if err := moveDescriptor(ctx, c, pid, m, to+i); err != nil {
			return err
		}
	}
	return nil
}

// moveDescriptor moves descriptor m.fd of the stopped process pid, whose
// number the library keeps at m.addr, to number to: dup3, the number
// written, the old one closed. Each call goes through gdb, which may give
// it up (a signal in another thread) or take it back (gdbCall): what
// came of it is read from /proc/PID/fd rather than from the call's
// result. The program's descriptors are then either moved (to open on
// m.fd's file, m.fd closed, the number written) or as they were (to not
// open): never a duplicate of heaptrack's descriptor left in the program.
func moveDescriptor(ctx context.Context, c *gdb.Conn, pid int, m fdMove, to int) error {
	got, err := callInt(ctx, c, fmt.Sprintf("dup3(%d, %d, %d)", m.fd, to, syscall.O_CLOEXEC))
	if err != nil || got != to {
		if !sameFile(pid, m.fd, to) {
			// The call failed, or was taken back before the dup, or
			// before to was another file's: to is not ours to close.
			return fmt.Errorf("dup3 of descriptor %d to %d: %d, %v", m.fd, to, got, err)
		}
		// The dup was made (a call gdb gave up, which then ran to its
		// end or was taken back after the system call): the move goes
		// on.
	}
	if _, err := c.Do(ctx, gdb.Console(fmt.Sprintf("set var *(int *) %#x = %d", m.addr, to))); err != nil {
		if cerr := closeDescriptor(ctx, c, pid, to); cerr != nil {
			return fmt.Errorf("writing heaptrack's descriptor number: %s; the copy at %d stays: %w", gdb.Message(err), to, cerr)
		}
		return errors.New(gdb.Message(err))
	}
	if err := closeDescriptor(ctx, c, pid, m.fd); err != nil {
		// The library writes to the copy by now; the old number would
		// stay a duplicate. Back to the old number, the copy closed.
		if _, werr := c.Do(ctx, gdb.Console(fmt.Sprintf("set var *(int *) %#x = %d", m.addr, m.fd))); werr != nil {
			return fmt.Errorf("%v; heaptrack's descriptor number could not be put back: %s", err, gdb.Message(werr))
		}
		if cerr := closeDescriptor(ctx, c, pid, to); cerr != nil {
			return fmt.Errorf("%v; the copy at %d stays: %w", err, to, cerr)
		}
		return err
	}
	return nil
}

// closeDescriptor closes descriptor fd of the stopped process pid with a
// call of close through gdb, and checks in /proc/PID/fd that the file it
// was open on is no longer there: a call gdb gave up may still have
// closed it, and the program, which runs during gdb's calls, may have
// its number for a file of its own already (a server's accept).
func closeDescriptor(ctx context.Context, c *gdb.Conn, pid, fd int) error {
	path := fmt.Sprintf("/proc/%d/fd/%d", pid, fd)
	before, err := os.Stat(path)
	if err != nil {
		return nil // not open
	}
	_, err = callInt(ctx, c, fmt.Sprintf("close(%d)", fd))
	if after, serr := os.Stat(path); serr != nil || !os.SameFile(before, after) {
		return nil
	}
	if err == nil {
		err = errors.New("it is still open")
	}
	return fmt.Errorf("closing descriptor %d: %w", fd, err)
}

// sameFile reports whether descriptors a and b of process pid are both
// open on one file.
func sameFile(pid, a, b int) bool {
	fa, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, a))
	if err != nil {
		return false
	}
	fb, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, b))
	return err == nil && os.SameFile(fa, fb)
}

// restorePreload gives the program back the LD_PRELOAD it was started
// with (user, "" for none): heaptrack's library removes the variable from
// the program's environment as it starts, so that the program's children
// are not recorded, and the user's libraries went with it. The library
// records nothing meanwhile (heaptrack_pause).
func restorePreload(ctx context.Context, c *gdb.Conn, user string) error {
	if user == "" {
		return nil
	}
	for _, cmd := range []string{"call (void) heaptrack_pause()",
		"call (int) setenv(\"LD_PRELOAD\", " + cQuote(user) + ", 1)",
		"call (void) heaptrack_resume()"} {
		if err := callVoid(ctx, c, cmd); err != nil {
			return err
		}
	}
	return nil
}

// fdMove is a descriptor to move and where its number is kept.
type fdMove struct {
	fd   int
	addr uint64
}

// unwindPipe finds libunwind's pipe in process pid: the two ends of one
// pipe among its descriptors from 3 on, whose numbers libunwind keeps
// side by side (int[2], read end first) in its writable data. libunwind's
// symbols are stripped: its data (the mapping of its file that is
// writable, and the anonymous one after it, its .bss) is searched for the
// pair.
func unwindPipe(pid int, t *heaptrack.Target) (r, w int, addr uint64, ok bool) {
	ends := map[string][]int{}
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); strings.HasPrefix(l, "pipe:") {
			ends[l] = append(ends[l], fd)
		}
	}
	var pairs [][2]int
	for _, fds := range ends {
		if len(fds) == 2 {
			pairs = append(pairs, [2]int{min(fds[0], fds[1]), max(fds[0], fds[1])})
		}
	}
	if len(pairs) == 0 {
		return 0, 0, 0, false
	}
	maps, err := proc.Maps(pid)
	if err != nil {
		return 0, 0, 0, false
	}
	for i, m := range maps {
		if !strings.Contains(m.Path, "libunwind") || !strings.HasPrefix(m.Perms, "rw") {
			continue
		}
		spans := []proc.Mapping{m}
		if i+1 < len(maps) {
			if n := maps[i+1]; n.Path == "" && strings.HasPrefix(n.Perms, "rw") {
				spans = append(spans, n) // its .bss
			}
		}
		for _, span := range spans {
			start, end := span.Lo, span.Hi
			if end <= start || end-start > 16<<20 {
				continue
			}
			mem := make([]byte, end-start)
			if t.ReadMem(start, mem) != nil {
				continue
			}
			for off := 0; off+8 <= len(mem); off += 4 {
				a, b := int(int32(binary.LittleEndian.Uint32(mem[off:]))), int(int32(binary.LittleEndian.Uint32(mem[off+4:])))
				for _, p := range pairs {
					if a == p[0] && b == p[1] {
						return a, b, start + uint64(off), true
					}
				}
			}
		}
	}
	return 0, 0, 0, false
}

// callInt calls expr in the stopped program and returns its int result.
func callInt(ctx context.Context, c *gdb.Conn, expr string) (int, error) {
	r, err := gdbCall(ctx, c, gdb.Evaluate("(int) "+expr))
	if err != nil {
		return 0, errors.New(gdb.Message(err))
	}
	return strconv.Atoi(strings.TrimSpace(r.String("value")))
}

// cQuote quotes s as a C string for gdb's expressions.
func cQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range []byte(s) {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteByte(r)
		case r < 0x20 || r >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", r)
		default:
			b.WriteByte(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// prlimit reads (old) and sets (new) process pid's limit of open files.
func prlimit(pid int, new, old *syscall.Rlimit) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_NOFILE),
		uintptr(unsafe.Pointer(new)), uintptr(unsafe.Pointer(old)), 0, 0)
	if e != 0 {
		return fmt.Errorf("prlimit of process %d: %w", pid, e)
	}
	return nil
}

// settleAtStart runs the program of a run --sites to __libc_start_main,
// where every library has started (heaptrack's has opened its output at
// the first allocation) and none of the program's own code has run, moves
// heaptrack's descriptors there and gives the program its LD_PRELOAD
// back (user), then lets it go on. The plan's breakpoints are disabled
// meanwhile, so that the first stop is that one; one in a library's
// constructor misses the hits made before main.
func (b *Launch) settleAtStart(ctx context.Context, user string) error {
	c := b.gdb
	r, err := c.Do(ctx, gdb.BreakList())
	if err != nil {
		return errors.New(gdb.Message(err))
	}
	var enabled []string
	for _, bp := range r.List("BreakpointTable.body") {
		if bp.String("enabled") == "y" {
			enabled = append(enabled, bp.String("number"))
		}
	}
	if len(enabled) > 0 {
		if _, err := c.Do(ctx, gdb.BreakDisable(enabled...)); err != nil {
			return errors.New(gdb.Message(err))
		}
	}
	r, err = c.Do(ctx, gdb.BreakInsert("-t", "-f", "__libc_start_main"))
	if err != nil {
		return fmt.Errorf("a breakpoint on __libc_start_main: %s", gdb.Message(err))
	}
	number := r.String("bkpt.number")
	if _, err := c.Do(ctx, gdb.Run()); err != nil {
		return fmt.Errorf("starting the target: %w", err)
	}
	rec, err := c.WaitStopped(ctx)
	if err != nil {
		return err
	}
	if rec.String("reason") == "exited-signalled" {
		// Killed as it started: the run ends as its death.
		return &backend.TargetKilledError{Signal: rec.String("signal-name"), Err: errors.New("before main")}
	}
	if rec.String("reason") != "breakpoint-hit" || rec.String("bkptno") != number {
		return fmt.Errorf("the target stopped before main (%s), not at __libc_start_main", rec.String("reason"))
	}
	b.readPid(ctx)
	if err := b.sites.moveDescriptors(ctx, c, b.pid); err != nil && !errors.Is(err, heaptrack.ErrNotRecording) {
		b.event(runjson.Event{Kind: eventSitesDescriptors, Message: "heaptrack's descriptors stay where its library opened them, where a program that closes its inherited descriptors can reuse their numbers: " + err.Error()})
	}
	if err := restorePreload(ctx, c, user); err != nil {
		b.event(runjson.Event{Kind: eventSitesDescriptors, Message: "the program's LD_PRELOAD, which heaptrack's library removes from its environment, could not be given back: " + err.Error()})
	}
	if len(enabled) > 0 {
		if _, err := c.Do(ctx, gdb.BreakEnable(enabled...)); err != nil {
			return errors.New(gdb.Message(err))
		}
	}
	if _, err := c.Do(ctx, gdb.Continue()); err != nil {
		return fmt.Errorf("resuming the target: %w", err)
	}
	return nil
}
