// Package term answers what snapctl asks of a terminal: whether a file is
// one, how wide it is, whether it takes colours and cursor movement, and a
// pseudo-terminal to put between a program and the real terminal.
package term

import (
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
)

// IsTerminal reports whether w is a terminal: an *os.File on which the
// terminal's own ioctl succeeds. A character device that is no terminal,
// such as /dev/null, is not one.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return false
	}
	var t syscall.Termios
	return ioctl(f, syscall.TCGETS, unsafe.Pointer(&t)) == nil
}

// Same reports whether a and b are the same terminal (the same device,
// through any file): a program's stdout and stderr usually are.
func Same(a, b io.Writer) bool {
	da, oka := device(a)
	db, okb := device(b)
	return oka && okb && da == db && IsTerminal(a) && IsTerminal(b)
}

// device is the device number of the character device w is.
func device(w io.Writer) (uint64, bool) {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return 0, false
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Rdev, true
}

// Width is the number of columns of the terminal w, or 0 when it is not a
// terminal or does not say.
func Width(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return 0
	}
	var ws winsize
	if ioctl(f, syscall.TIOCGWINSZ, unsafe.Pointer(&ws)) != nil {
		return 0
	}
	return int(ws.Col)
}

// Dumb reports whether the environment's terminal type takes neither
// colours nor cursor movement: TERM unset, empty or "dumb" (Emacs' shell
// buffers, some CI consoles).
func Dumb() bool {
	t := os.Getenv("TERM")
	return t == "" || t == "dumb"
}

// NoColor reports whether the user asked for no colours: NO_COLOR set to a
// non-empty value (https://no-color.org).
func NoColor() bool {
	return os.Getenv("NO_COLOR") != ""
}

// Color reports whether output to w may be coloured: w is a terminal that
// is not dumb and the user did not set NO_COLOR.
func Color(w io.Writer) bool {
	return !NoColor() && !Dumb() && IsTerminal(w)
}

// OpenPTY opens a new pseudo-terminal pair. What a program writes to the
// slave is read from the master unchanged: output processing (such as
// turning "\n" into "\r\n") is left to the real terminal the master's
// reader writes to. The window size is copied from like when it is a
// terminal, so a program that asks its width gets the real one.
func OpenPTY(like io.Writer) (master, slave *os.File, err error) {
	master, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %w", err)
	}
	fail := func(what string, err error) (*os.File, *os.File, error) {
		master.Close()
		if slave != nil {
			slave.Close()
		}
		return nil, nil, fmt.Errorf("opening a pseudo-terminal: %s: %w", what, err)
	}
	var unlock int32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		return fail("unlock", err)
	}
	var n uint32
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		return fail("number", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fail("slave", err)
	}
	var t syscall.Termios
	if err := ioctl(slave, syscall.TCGETS, unsafe.Pointer(&t)); err != nil {
		return fail("termios", err)
	}
	t.Oflag &^= syscall.OPOST
	if err := ioctl(slave, syscall.TCSETS, unsafe.Pointer(&t)); err != nil {
		return fail("termios", err)
	}
	if f, ok := like.(*os.File); ok && f != nil {
		var ws winsize
		if ioctl(f, syscall.TIOCGWINSZ, unsafe.Pointer(&ws)) == nil {
			ioctl(slave, syscall.TIOCSWINSZ, unsafe.Pointer(&ws))
		}
	}
	return master, slave, nil
}

// winsize is the kernel's struct winsize.
type winsize struct {
	Row, Col, Xpixel, Ypixel uint16
}

// ioctl runs one ioctl on f without taking f out of Go's poller, as f.Fd()
// would.
func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}
