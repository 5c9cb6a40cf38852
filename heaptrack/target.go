package heaptrack

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/snapctl/snapctl/internal/proc"
)

// Target is a stopped process whose heaptrack library state a cut reads
// from its memory. The process must be stopped (every thread) while
// Pending runs: snapctl's gdb holds it.
type Target struct {
	Pid    int
	Base   uint64 // where the library is loaded
	Layout Layout
	mem    *os.File
}

// OpenTarget finds where the library of layout is loaded in process pid
// (/proc/PID/maps) and opens the process's memory. The library must be
// loaded: a program started with LD_PRELOAD has it before main.
func OpenTarget(pid int, layout Layout) (*Target, error) {
	base, err := loadBase(pid, layout.Lib)
	if err != nil {
		return nil, err
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil, fmt.Errorf("reading the memory of process %d: %w", pid, err)
	}
	return &Target{Pid: pid, Base: base, Layout: layout, mem: mem}, nil
}

// Close closes the process's memory.
func (t *Target) Close() error { return t.mem.Close() }

// loadBase returns the start of the mapping of lib at file offset 0.
func loadBase(pid int, lib string) (uint64, error) {
	maps, err := proc.Maps(pid)
	if err != nil {
		return 0, fmt.Errorf("reading the mappings of process %d: %w", pid, err)
	}
	for _, m := range maps {
		if m.Path == lib && m.Offset == 0 {
			return m.Lo, nil
		}
	}
	return 0, fmt.Errorf("process %d has not loaded %s", pid, lib)
}

// BusyError says that a thread of the stopped process is writing an
// event (holds heaptrack's lock): the buffer may hold half a line. The
// thread must be let out of heaptrack's code (alone) before the cut.
type BusyError struct {
	TID int // the thread holding the lock
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("thread %d is inside heaptrack, writing an event", e.TID)
}

// ErrNotRecording says that the library has no output (it has not
// started, could not open its output, or was stopped).
var ErrNotRecording = errors.New("heaptrack is not recording in the process")

// State is what a stopped process's library holds at a cut.
type State struct {
	Fd      int    // the library's output descriptor in the process
	Pending []byte // events written to its buffer and not yet to its output
}

// Pending reads the library's unflushed events from the stopped process:
// a *BusyError when a thread holds the library's lock, ErrNotRecording
// when the library has no output.
func (t *Target) Pending() (State, error) {
	held, owner, err := t.Lock()
	if err != nil {
		return State{}, err
	}
	if held {
		return State{}, &BusyError{TID: owner}
	}
	var p [8]byte
	if err := t.read(t.Base+t.Layout.Data, p[:]); err != nil {
		return State{}, err
	}
	data := binary.LittleEndian.Uint64(p[:])
	if data == 0 {
		return State{}, ErrNotRecording
	}
	var w [16]byte
	if err := t.read(data, w[:]); err != nil {
		return State{}, err
	}
	fd := int(int32(binary.LittleEndian.Uint32(w[offFd:])))
	size := binary.LittleEndian.Uint32(w[offBufferSize:])
	buf := binary.LittleEndian.Uint64(w[offBuffer:])
	if fd < 0 {
		return State{}, ErrNotRecording
	}
	if size > bufferCap || buf == 0 {
		return State{}, fmt.Errorf("process %d: heaptrack's buffer reads %d bytes at %#x: not the layout of %s", t.Pid, size, buf, t.Layout.Lib)
	}
	st := State{Fd: fd, Pending: make([]byte, size)}
	if err := t.read(buf, st.Pending); err != nil {
		return State{}, err
	}
	return st, nil
}

// Lock reads the library's lock: whether a thread holds it, and which
// (its owner's TID, 0 in the moment between taking it and writing the
// owner, docs/facts.md, fact 67).
func (t *Target) Lock() (held bool, owner int, err error) {
	var lock [12]byte
	if err := t.read(t.Base+t.Layout.Lock, lock[:]); err != nil {
		return false, 0, err
	}
	return binary.LittleEndian.Uint32(lock[offLockWord:]) != 0, int(int32(binary.LittleEndian.Uint32(lock[offLockOwner:]))), nil
}

// ReadMem reads the process's memory at addr into b.
func (t *Target) ReadMem(addr uint64, b []byte) error { return t.read(addr, b) }

func (t *Target) read(addr uint64, b []byte) error {
	if _, err := t.mem.ReadAt(b, int64(addr)); err != nil {
		return fmt.Errorf("reading process %d at %#x: %w", t.Pid, addr, err)
	}
	return nil
}

// WritesTo reports whether the library's output descriptor in the
// process is the file at path (the Recorder's FIFO): it checks that the
// layout read the right field.
func (t *Target) WritesTo(fd int, path string) bool {
	a, err1 := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", t.Pid, fd))
	b, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}

// LockAddr returns the address of the library's lock in the process, for
// a breakpoint on its release (a thread to let out of a BusyError).
func (t *Target) LockAddr() uint64 { return t.Base + t.Layout.Lock }

// Descriptors are the library's two descriptors in the process: its
// output and /proc/self/statm, which its timer thread reads, and where in
// the output state each is kept, for moving them (Layout: the statm
// descriptor follows the 16-byte line writer). ErrNotRecording when the
// library has no output yet.
type Descriptors struct {
	Out, Statm         int
	OutAddr, StatmAddr uint64
}

// Descriptors reads the library's descriptors from the stopped process.
func (t *Target) Descriptors() (Descriptors, error) {
	var p [8]byte
	if err := t.read(t.Base+t.Layout.Data, p[:]); err != nil {
		return Descriptors{}, err
	}
	data := binary.LittleEndian.Uint64(p[:])
	if data == 0 {
		return Descriptors{}, ErrNotRecording
	}
	var w [offStatm + 4]byte
	if err := t.read(data, w[:]); err != nil {
		return Descriptors{}, err
	}
	d := Descriptors{Out: int(int32(binary.LittleEndian.Uint32(w[offFd:]))), Statm: int(int32(binary.LittleEndian.Uint32(w[offStatm:]))),
		OutAddr: data + offFd, StatmAddr: data + offStatm}
	if d.Out < 0 {
		return Descriptors{}, ErrNotRecording
	}
	return d, nil
}
