package arenas

import (
	"errors"
	"io"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// Process reads a process's memory: with process_vm_readv(2) while the
// kernel allows it (the same ptrace access check as /proc/PID/mem: root,
// or the same user and, under Yama's ptrace_scope 1, an ancestor of the
// process), which copies once; else from File, /proc/PID/mem opened by
// a process the kernel let open it (gdb's agent passes gdb's), which the
// kernel copies through a page of its own. Either way nothing in the
// process is changed.
type Process struct {
	Pid  int
	File *os.File
	// refused is set once process_vm_readv was refused: File from then on.
	refused bool
}

func (p *Process) ReadAt(b []byte, off int64) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if !p.refused && p.Pid > 0 && sysProcessVMReadv != 0 {
		local := iovec{base: unsafe.Pointer(&b[0]), len: uint64(len(b))}
		remote := remoteIovec{base: uintptr(off), len: uint64(len(b))}
		n, _, errno := syscall.Syscall6(sysProcessVMReadv, uintptr(p.Pid),
			uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
		switch {
		case errno == 0:
			if int(n) < len(b) {
				return int(n), io.ErrUnexpectedEOF
			}
			return int(n), nil
		case errno == syscall.EPERM || errno == syscall.ENOSYS || errno == syscall.EACCES:
			p.refused = true
		default:
			if p.File == nil {
				return 0, errno
			}
			// EFAULT: nothing mapped there. The file says so in the
			// kernel's usual words (EIO).
		}
	}
	if p.File == nil {
		return 0, errors.New("the process's memory cannot be read")
	}
	return p.File.ReadAt(b, off)
}

type iovec struct {
	base unsafe.Pointer
	len  uint64
}

type remoteIovec struct {
	base uintptr
	len  uint64
}

// sysProcessVMReadv is process_vm_readv's number, 0 where unknown.
var sysProcessVMReadv = map[string]uintptr{"amd64": 310, "arm64": 270}[runtime.GOARCH]
